"""``Module``: a container of parameters, buffers and sub-modules (PyTorch/MegEngine style).

>>> import hlotrace as ht
>>> from hlotrace import nn
>>> class MLP(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.fc1 = nn.Linear(4, 8)
...         self.act = nn.ReLU()
...         self.fc2 = nn.Linear(8, 2)
...     def forward(self, x):
...         return self.fc2(self.act(self.fc1(x)))
>>> [name for name, _ in MLP().named_parameters()]
['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']

Registration order is *assignment* order across parameters, buffers and sub-modules alike
(a Parameter assigned between two sub-modules is listed between their parameters);
``state_dict()`` alone uses PyTorch's order instead (module by module: its own parameters,
its own persistent buffers, then its sub-modules). Every listing is deduplicated by object
identity: a Parameter or Module reachable under two names is listed once, under the first name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from hlotrace import spmd_hooks
from hlotrace.errors import HlotraceError, TraceError, argument_error
from hlotrace.nn.settings import ModuleKey, is_setting, settings_of
from hlotrace.recording import MODULE_PATH, current_recorder
from hlotrace.tensor import Parameter, Tensor, tensor
from hlotrace.versions import structure_changed

_PARAM, _BUFFER, _MODULE = "parameter", "buffer", "module"


# The modules whose __call__ is running, outermost first (see ops.registry.MODULE_PATH).
_CALLING: list = []


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` did not match (both empty under ``strict``)."""

    missing_keys: list[str]
    unexpected_keys: list[str]


_UNSET = object()


class Module:
    """Base class of every layer and model; subclasses define ``forward``.

    Attributes holding a :class:`~hlotrace.Parameter` or a ``Module`` are registered when
    assigned; non-trainable state (running statistics) is registered with
    :meth:`register_buffer`. Calling the module calls ``forward``.
    """

    training: bool

    def __init__(self):
        # name -> kind, in first-assignment order (one order across all kinds).
        object.__setattr__(self, "_members", {})
        # names of the buffers registered with persistent=False (kept out of state_dict)
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    # -- registration -------------------------------------------------------------------
    def _member_table(self) -> dict[str, str]:
        members = self.__dict__.get("_members")
        if members is None:
            raise HlotraceError(
                f"{type(self).__name__}: call super().__init__() in __init__ before assigning attributes"
            )
        return members

    def __setattr__(self, name: str, value: Any) -> None:
        members = self._member_table()
        kind = members.get(name)
        if isinstance(value, Parameter):
            new_kind = _PARAM
        elif isinstance(value, Module):
            new_kind = _MODULE
        elif kind == _BUFFER and (value is None or isinstance(value, Tensor)):
            new_kind = _BUFFER
        elif kind is not None and value is None:
            new_kind = kind  # a registered slot set to None stays registered (and is skipped)
        elif kind == _PARAM and isinstance(value, Tensor):
            raise HlotraceError(
                f"{type(self).__name__}.{name} is a registered parameter; assign an ht.Parameter "
                f"(or use register_buffer for non-trainable state), not a plain {type(value).__name__}"
            )
        else:
            new_kind = None
        if new_kind != _BUFFER:
            self.__dict__.get("_non_persistent", set()).discard(name)
        if new_kind is None:
            members.pop(name, None)
        elif kind != new_kind:
            members.pop(name, None)
            members[name] = new_kind
        if new_kind is not None or kind is not None:
            structure_changed()  # a compiled step re-collects this module's state
        elif is_setting(value) and is_setting(old := self.__dict__.get(name, _UNSET)) and old != value:
            # A setting a compiled step baked in (bn.momentum = 0.01, ln.eps = 1e-6):
            # part of its key (_trace_state), so the step recompiles instead of going stale.
            structure_changed()
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self._member_table().pop(name, None) is not None:
            self.__dict__.get("_non_persistent", set()).discard(name)
            structure_changed()
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value: Tensor | None, persistent: bool = True) -> None:
        """Register non-trainable state (in ``buffers()``, not in ``parameters()``).

        A persistent buffer is saved by ``state_dict``; ``persistent=False`` keeps it out
        (a cached mask, a position table rebuilt by ``__init__``). Both kinds are state of a
        compiled step alike: read as inputs, written back when updated in place.

        >>> self.register_buffer("running_mean", ht.tensor(np.zeros(16, np.float32)))
        >>> self.register_buffer("causal_mask", mask, persistent=False)
        """
        if not isinstance(name, str) or not name or "." in name:
            raise HlotraceError(f"register_buffer: bad buffer name {name!r} (a non-empty name without '.')")
        if value is not None and not isinstance(value, Tensor):
            raise HlotraceError(f"register_buffer({name!r}): expected a Tensor or None, got {type(value).__name__}")
        if isinstance(value, Parameter):
            raise HlotraceError(f"register_buffer({name!r}): a Parameter is trainable; assign it as an attribute")
        members = self._member_table()
        if name in members and members[name] != _BUFFER:
            raise HlotraceError(f"register_buffer({name!r}): the name is already a registered {members[name]}")
        if name not in members and name in self.__dict__:
            raise HlotraceError(f"register_buffer({name!r}): the module already has an attribute of that name")
        members[name] = _BUFFER
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        structure_changed()
        object.__setattr__(self, name, value)

    def register_parameter(self, name: str, value: Parameter | None) -> None:
        """Register ``value`` under ``name`` (what ``self.name = Parameter(...)`` does)."""
        if value is not None and not isinstance(value, Parameter):
            raise HlotraceError(f"register_parameter({name!r}): expected a Parameter, got {type(value).__name__}")
        members = self._member_table()
        if value is None and members.get(name) != _PARAM:
            members.pop(name, None)
            members[name] = _PARAM
        setattr(self, name, value)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` under ``name`` (what ``self.name = module`` does)."""
        if module is not None and not isinstance(module, Module):
            raise HlotraceError(f"add_module({name!r}): expected a Module, got {type(module).__name__}")
        members = self._member_table()
        if module is None and members.get(name) != _MODULE:
            members.pop(name, None)
            members[name] = _MODULE
        setattr(self, name, module)

    def _direct(self, kind: str) -> Iterator[tuple[str, Any]]:
        for name, k in self._member_table().items():
            if k == kind:
                value = self.__dict__.get(name)
                if value is not None:
                    yield name, value

    # -- traversal ----------------------------------------------------------------------
    def _named_members(self, kind: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = {id(self)} if kind == _MODULE else set()
        walked: set[int] = set()

        def walk(module: Module, prefix: str):
            walked.add(id(module))
            for name, k in module._member_table().items():
                value = module.__dict__.get(name)
                if value is None:
                    continue
                full = prefix + name
                if k == kind and id(value) not in seen:
                    seen.add(id(value))
                    yield full, value
                if k == _MODULE and recurse and id(value) not in walked:
                    yield from walk(value, full + ".")

        yield from walk(self, prefix)

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``("fc1.weight", Parameter)`` pairs in definition order, each Parameter once."""
        return self._named_members(_PARAM, prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every Parameter (recursively, each once, in definition order)."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``("bn.running_mean", Tensor)`` pairs, like :meth:`named_parameters`."""
        return self._named_members(_BUFFER, prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Every registered buffer (recursively, each once)."""
        return (b for _, b in self.named_buffers(recurse=recurse))

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct sub-modules as ``(name, module)``, each once."""
        seen: set[int] = set()
        for name, m in self._direct(_MODULE):
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        """Direct sub-modules, each once."""
        return (m for _, m in self.named_children())

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module (name ``prefix``, ``""`` by default) and every descendant, each once."""
        yield prefix, self
        yield from self._named_members(_MODULE, prefix + "." if prefix else "", True)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant, each once (pre-order)."""
        return (m for _, m in self.named_modules())

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every descendant, then on this module; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set ``training`` on this module and every descendant; returns self."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        structure_changed()  # the training flags are part of a compiled step's key
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Set every parameter's ``.grad`` to None."""
        for p in self.parameters():
            p.grad = None

    # -- calling ------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        parent = _CALLING[-1] if _CALLING else None
        name = type(self).__name__
        if parent is not None:
            name = next((n for n, m in parent.named_children() if m is self), name)
        MODULE_PATH.append(name)
        _CALLING.append(self)
        recorder = current_recorder()
        if recorder is not None:  # its training flag is baked in (hlotrace.captures)
            recorder.called_modules.setdefault(id(self), self)
        try:
            return self.forward(*args, **kwargs)
        except TraceError as exc:
            hint = None if parent is None or name != type(self).__name__ else _unregistered_hint(parent, self)
            if hint is None or getattr(exc, "_unregistered_hint", False):
                raise
            explained = TraceError(f"{exc} {hint}")
            explained._unregistered_hint = True
            raise explained from exc
        finally:
            _CALLING.pop()
            MODULE_PATH.pop()

    # -- state ----------------------------------------------------------------------------
    def _named_state(self) -> list[tuple[str, Tensor]]:
        return [*self.named_parameters(), *self.named_buffers()]

    def _persistent_state(self) -> list[tuple[str, Tensor]]:
        """The parameters and persistent buffers in PyTorch's ``state_dict`` order: module by
        module (pre-order), each module's own parameters, then its own persistent buffers,
        each in registration order; a tensor reachable under two names is listed once, under
        the first. (``named_parameters`` keeps assignment order across kinds instead.)"""
        out: list[tuple[str, Tensor]] = []
        seen: set[int] = set()
        transient = {
            id(module.__dict__.get(name))
            for module in self.modules()
            for name in module.__dict__.get("_non_persistent", ())
        }
        for prefix, module in self.named_modules():
            dot = prefix + "." if prefix else ""
            for kind in (_PARAM, _BUFFER):
                for name, t in module._direct(kind):
                    if id(t) not in seen and id(t) not in transient:
                        seen.add(id(t))
                        out.append((dot + name, t))
        return out

    def _state_defaults(self) -> dict[str, np.ndarray]:
        """Values of this module's own persistent buffers that a state dict holding its other
        entries may leave out (``load_state_dict`` fills them in): none by default; BatchNorm's
        ``num_batches_tracked`` is 0, as PyTorch fills it in a checkpoint that predates it."""
        return {}

    def _with_defaults(self, state_dict: Mapping, own: Mapping) -> Mapping:
        """``state_dict`` plus the :meth:`_state_defaults` of each module that it holds other
        keys of but not these (a checkpoint written before the buffer existed)."""
        filled = {}
        for prefix, module in self.named_modules():
            dot = prefix + "." if prefix else ""
            defaults = module._state_defaults()
            if not defaults or not any(dot + name in state_dict for name in module._member_table()):
                continue
            for name, value in defaults.items():
                if dot + name in own and dot + name not in state_dict:
                    filled[dot + name] = value
        return {**state_dict, **filled} if filled else state_dict

    def state_dict(self) -> dict[str, np.ndarray]:
        """``{name: NumPy copy}`` of every parameter and persistent buffer, keys and order as
        PyTorch's: module by module, its parameters then its buffers, then its sub-modules
        (``["conv.weight", "bn.weight", "bn.bias", "bn.running_mean", ...]``).

        >>> ht.save(model.state_dict(), "model.npz")
        """
        return {name: np.array(t.numpy(), copy=True) for name, t in self._persistent_state()}

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into the existing parameters and buffers, in place.

        Shapes and dtypes must match exactly (a mismatch names the key and both shapes or
        dtypes). With ``strict`` missing or unexpected keys are an error too; otherwise they
        are returned. Nothing is changed unless every entry fits. The Parameter objects are
        kept, so an optimizer built on them goes on updating the loaded values. A BatchNorm
        whose entries lack ``num_batches_tracked`` (a checkpoint older than that buffer) gets
        0 there, as in PyTorch.

        >>> model.load_state_dict(ht.load("model.npz"))
        """
        if not isinstance(state_dict, Mapping):
            wanted = "a dict of names to arrays (module.state_dict(), ht.load(path))"
            raise argument_error(f"{type(self).__name__}.load_state_dict", "state_dict", state_dict, wanted)
        own = dict(self._persistent_state())
        state_dict = self._with_defaults(state_dict, own)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise HlotraceError(f"{type(self).__name__}.load_state_dict: " + " and ".join(parts))
        updates = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if array.shape != target.shape:
                raise HlotraceError(
                    f"{type(self).__name__}.load_state_dict: {key!r} has shape {tuple(array.shape)} in the "
                    f"state dict but {tuple(target.shape)} in the module"
                )
            if array.dtype != target.dtype:
                raise HlotraceError(
                    f"{type(self).__name__}.load_state_dict: {key!r} has dtype {array.dtype} in the state dict "
                    f"but {target.dtype} in the module (shape {tuple(target.shape)}); cast it first"
                )
            updates.append((target, array))
        for target, array in updates:
            target._assign(tensor(array, dtype=target.dtype))
        if spmd_hooks.active:  # a parameter placed on a mesh stays there, laid out as before
            spmd_hooks.keep_placements((target, None) for target, _ in updates)
        return IncompatibleKeys(missing, unexpected)

    def _trace_state(self) -> tuple[tuple, list[Tensor]]:
        """``(static_key, tensors)`` for ``xla_trace``.

        ``static_key`` holds the ``training`` flags of every module (pre-order) and each
        module's settings (its public attributes holding numbers, strings, None or tuples
        of them: ``momentum``, ``eps``, ``p``), so switching ``train()``/``eval()`` or
        assigning ``bn.momentum`` selects another compiled program; ``tensors`` are
        the parameters then the buffers in :meth:`state_dict` order, which a compiled step
        takes as inputs and writes back when it updates them in place.
        """
        modules = list(self.modules())
        key = ModuleKey((tuple(m.training for m in modules), tuple(settings_of(m) for m in modules)))
        return key, [t for _, t in self._named_state()]

    # -- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """Text shown inside this module's parentheses by ``repr``."""
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._direct(_MODULE):
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}({extra}" if extra else f"{type(self).__name__}("
        return head + "\n" + "\n".join(lines) + "\n)"


def _unregistered_hint(parent: Module, child: Module) -> str | None:
    """Why ``child``'s parameters are not state: it sits in a plain list/tuple/dict attribute
    of ``parent`` (a Python container registers nothing), or None when it does not."""
    for attr, value in parent.__dict__.items():
        values = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else ()
        if any(v is child for v in values):
            kind = "dict" if isinstance(value, dict) else type(value).__name__
            container = "nn.ModuleDict" if isinstance(value, dict) else "nn.ModuleList"
            return (
                f"The {type(child).__name__} that uses it is kept in {type(parent).__name__}.{attr}, a plain "
                f"Python {kind} of modules, which registers no parameters (so passing the module does not pass "
                f"them): wrap it as self.{attr} = {container}(...)."
            )
    return None
