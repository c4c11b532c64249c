"""What a compiled function baked in from outside its arguments, and whether it went stale.

``xla_trace(capture_as_const=True)`` bakes the tensors a function closes over into the
program as constants (MegEngine's semantics), and any function bakes in the ``training``
flag of a module it closes over (a parameterless ``Dropout``, say). Training that model
afterwards, or switching it to ``eval()``, would leave the compiled program computing with
the old values, silently. A :class:`CaptureGuard` remembers, per traced function, each
captured tensor's buffers and each closed-over module's flag at recording time; before a call
it checks them (only after some value or module structure changed anywhere:
``hlotrace.versions``), and on a change either warns once per function, naming the tensor
and where it was created (``capture_as_const=True``), or asks for a new recording
(``capture_as_const="refresh"``).

Without ``capture_as_const`` a function does not bake closed-over state in: the modules,
optimizers, GradManagers and Parameters it closes over are found again before each call and
become its state (:class:`Closure`, :func:`closed_over`; the design is written above them):
their ``training`` flags are then in the key, and only a module the walk does not reach (too
deep) is still guarded here, by the warning.
"""

from __future__ import annotations

import functools
import types
import warnings

from hlotrace.errors import TraceError
from hlotrace.tensor import Parameter, Tensor
from hlotrace.versions import VERSIONS

REFRESH = "refresh"
CAPTURE_MODES = (False, True, REFRESH)


class StaleCaptureWarning(UserWarning):
    """A compiled function runs with a captured value or module flag that has since changed."""


def check_mode(value):
    """``capture_as_const``'s value, checked (False, True or "refresh")."""
    if value is None:
        return False
    if isinstance(value, bool) or value == REFRESH:
        return value
    raise TraceError(f"capture_as_const must be True, False or {REFRESH!r}, not {value!r}")


class CaptureGuard:
    """The captured tensors and closed-over module flags of one traced function's entries."""

    def __init__(self, name: str, mode):
        self.name = name
        self.mode = mode
        self.tensors: list = []  # (tensor, host, device, label) at recording time
        self.modules: list = []  # (module, training, label)
        self.seen = None  # the version counters when last found fresh
        self.warned = False

    def add(self, recorder, holders) -> None:
        """Remember what ``recorder`` captured; modules reachable through ``holders`` (the
        call's arguments) are not closed over: their flags are part of the cache key."""
        held = {id(m) for h in holders if callable(getattr(h, "modules", None)) for m in h.modules()}
        closed = [m for m in recorder.called_modules.values() if id(m) not in held]
        names = _parameter_names(closed)
        for t in recorder.captured_tensors:
            self.tensors.append((t, t._host, t._device, _describe(t, names)))
        for m in closed:
            self.modules.append((m, m.training, names.get(id(m), type(m).__name__)))
        self.seen = (VERSIONS.values, VERSIONS.structure)

    def __bool__(self) -> bool:
        return bool(self.tensors or self.modules)

    def stale(self) -> bool:
        """Whether a captured value or flag changed since recording (warns once when the
        mode is not "refresh"); cheap while no version counter moved."""
        now = (VERSIONS.values, VERSIONS.structure)
        if now == self.seen:
            return False
        self.seen = now
        changes = [label for t, host, device, label in self.tensors if not _same_value(t, host, device)]
        changes += [
            f"module {label} (recorded in {'training' if flag else 'eval'} mode, now in "
            f"{'training' if m.training else 'eval'} mode)"
            for m, flag, label in self.modules
            if m.training != flag
        ]
        if not changes:
            return False
        if self.mode == REFRESH:
            return True
        if not self.warned:
            self.warned = True
            shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
            warnings.warn(
                f"{self.name}: the compiled program still uses the value it captured when it was recorded, "
                f"but {shown} changed since. Pass the module (or tensor) as an argument so every call reads "
                f"it, or decorate with xla_trace(capture_as_const={REFRESH!r}) to re-record when it changes "
                f"(warned once per function)",
                StaleCaptureWarning,
                stacklevel=3,
            )
        return False


def _same_value(t, host, device) -> bool:
    """Every in-place update and write-back rebinds a tensor's buffers, so the value is the
    recorded one while one of them is still the object seen at recording time."""
    return (host is not None and t._host is host) or (device is not None and t._device is device)


def _parameter_names(modules) -> dict[int, str]:
    """id -> a readable name (``Net.fc1.weight``) for the closed-over modules, their
    submodules and their state, outermost module first."""
    names: dict[int, str] = {}
    for root in modules:
        prefix = type(root).__name__
        names.setdefault(id(root), prefix)
        for path, m in root.named_modules() if hasattr(root, "named_modules") else ():
            names.setdefault(id(m), f"{prefix}.{path}" if path else prefix)
        for path, t in root._named_state() if hasattr(root, "_named_state") else ():
            names.setdefault(id(t), f"{prefix}.{path}")
    return names


def _describe(t, names) -> str:
    kind = type(t).__name__.lower()
    name = names.get(id(t))
    what = f"{kind} {name}" if name else f"a {kind}"
    where = f" created at {t._origin}" if t._origin else ""
    return f"{what} of shape {list(t.shape)}{where}"


# -- closed-over state ------------------------------------------------------------------------
# A step that closes over ``net``, ``opt`` and ``gm`` (PyTorch's usual training loop) trains
# exactly as if they were passed: before every call (outside the hot path of stateless
# functions) the call path walks what the function can reach without arguments -- its closure
# cells, the globals its code names, and from there plain objects' attributes, lists, tuples,
# dicts, user functions and wrapped functions, ``CLOSURE_DEPTH`` levels deep -- and every state
# holder (Module, Optimizer, GradManager) found there joins the call's holders, every loose
# ``Parameter`` one :class:`ClosedParameters` holder. From there on they are the arguments'
# holders in all but name: executable inputs read and written back in place, their old buffers
# donated, their structure in the cache key, an optimizer's hyper tensors refreshed before the
# call. The walk runs on every such call, so what the key holds (the identities of the objects
# found, and through their holder state their shapes, dtypes and ``.grad`` presence) is what
# the function reaches now: a rebound closure variable (``net = Net()`` again) or an object
# attribute (``trainer.net = Net()``) selects another entry, never the old tensors.
# A parameter reached some other way (deeper, through a list longer than ``CLOSURE_ITEMS``,
# through hlotrace's own objects) is a TraceError naming the line, never a step that silently
# does not train. With ``capture_as_const`` (True or "refresh") nothing is walked: closed-over
# Parameters and modules are baked in as constants, as before (MegEngine's semantics).
# Why not late inputs, as the random key is (bound when the recording first reads it): an
# entry would then remember the tensors it read, and nothing would tell a later call that
# the closure now leads elsewhere. Found before the call, they are re-derived every call like
# the arguments' state (an entry holds no tensor), and the walk costs ~1.5 us for a step over
# net/opt/gm (the 16-layer AdamW step of benchmarks/overhead_state.py closed over: 1.00-1.01x passed).
# What the walk finds but the step does not use is an unused input (an optimizer found that
# way gets its zero state created, as passing it would).

CLOSURE_DEPTH = 3  # objects this many steps below a closure cell or global are still walked
CLOSURE_ITEMS = 64  # longer lists/tuples/dicts (and bigger objects) are not walked into
_NOT_WALKED = frozenset(
    (type(None), bool, int, float, complex, str, bytes, type, types.ModuleType, types.BuiltinFunctionType)
)
_FOREIGN = ("hlotrace", "numpy", "jax", "jaxlib", "builtins", "functools", "typing", "collections")


class ClosedParameters:
    """The loose Parameters a function closes over, as one state holder."""

    def __init__(self, parameters):
        self.parameters = tuple(parameters)

    def _trace_state(self):
        return ("closed parameters", len(self.parameters)), list(self.parameters)


class Closure:
    """What one traced function closes over, found again before each of its calls."""

    def __init__(self, fn):
        self.fn = fn
        self._loose: tuple | None = None  # (ids, ClosedParameters) of the last loose Parameters

    def holders(self) -> list:
        """The state holders ``fn`` closes over now, its loose Parameters as one
        :class:`ClosedParameters` (the same object while they are the same Parameters, so
        the per-call state cache, :func:`hlotrace.state.holder_state`, keeps hitting)."""
        holders, parameters = closed_over(self.fn)
        if parameters:
            ids = tuple(map(id, parameters))
            if self._loose is None or self._loose[0] != ids:
                self._loose = (ids, ClosedParameters(parameters))
            holders.append(self._loose[1])
        return holders

    def describe(self) -> dict[str, str]:
        """``{path: description}`` of the holders closed over now, for the recompile
        explanations and ``describe_entries()`` (``closed over[1]: MLP at 0x7f.., training``)."""
        out = {}
        for k, holder in enumerate(self.holders()):
            mode = {True: ", training", False: ", eval"}.get(getattr(holder, "training", None), "")
            out[f"closed over[{k}]"] = f"{type(holder).__name__} at {id(holder):#x}{mode}"
        return out


def closed_over(fn) -> tuple[list, list]:
    """``(holders, parameters)`` ``fn`` reaches through its closure and the globals it names
    (see above), each once, in the order found.

    >>> net = nn.Linear(2, 2)
    >>> closed_over(lambda x: net(x))
    ([Linear(...)], [])
    """
    holders: list = []
    parameters: list = []
    seen: set[int] = set()
    for root in _roots(fn):
        _visit(root, 0, holders, parameters, seen)
    return holders, parameters


def _roots(fn):
    """What ``fn`` reaches without arguments: its bound object, partial arguments, closure
    cells and the globals its code (nested functions and generators included) names."""
    if isinstance(fn, types.MethodType):
        yield fn.__self__
        fn = fn.__func__
    elif isinstance(fn, functools.partial):
        yield from fn.args
        yield from fn.keywords.values()
        fn = fn.func
    if not isinstance(fn, types.FunctionType):
        yield fn  # a callable object: its attributes
        return
    if _foreign(fn):  # hlotrace's own functions close over no user state
        return
    code = fn.__code__
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # a cell not yet assigned
            pass
    namespace = fn.__globals__
    for name in _global_names(code):
        if name in namespace:
            yield namespace[name]


def _global_names(code) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return names


def _visit(obj, depth: int, holders: list, parameters: list, seen: set) -> None:
    kind = type(obj)
    if kind in _NOT_WALKED or id(obj) in seen:
        return
    seen.add(id(obj))
    if hasattr(kind, "_trace_state"):
        holders.append(obj)
        return
    if isinstance(obj, Tensor):
        if isinstance(obj, Parameter):
            parameters.append(obj)
        return  # a plain tensor stays what it was: refused, or baked in by capture_as_const
    if depth >= CLOSURE_DEPTH:
        return
    for item in _inside(obj, kind):
        _visit(item, depth + 1, holders, parameters, seen)


def _inside(obj, kind):
    """What the walk looks at below ``obj``."""
    if kind is list or kind is tuple:
        return obj if len(obj) <= CLOSURE_ITEMS else ()
    if kind is dict:
        return obj.values() if len(obj) <= CLOSURE_ITEMS else ()
    if kind is types.FunctionType or kind is types.MethodType or kind is functools.partial:
        return _roots(obj)
    if _foreign(kind):
        try:  # xla_trace / partial_trace of a user function
            wrapped = getattr(obj, "__wrapped__", None)
        except Exception:  # a library object's __getattr__ may raise anything: not walked
            return ()
        return (wrapped,) if wrapped is not None else ()
    attributes = getattr(obj, "__dict__", None)
    if type(attributes) is not dict or len(attributes) > CLOSURE_ITEMS:
        return ()
    return attributes.values()


def _foreign(owner) -> bool:
    """Whether ``owner`` (a class or function) is hlotrace's or a library's, not the user's."""
    module = getattr(owner, "__module__", None) or ""
    return module.split(".", 1)[0] in _FOREIGN
