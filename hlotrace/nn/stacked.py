"""``Stacked``: n identical blocks whose parameters are stored stacked ``[n, ...]`` and run
by one ``F.scan`` (a module whose size, compile time and StableHLO do not grow with n).

>>> import numpy as np, hlotrace as ht
>>> from hlotrace import nn
>>> layers = nn.Stacked(lambda: nn.Linear(4, 4), 3)
>>> [(name, p.shape) for name, p in layers.named_parameters()]
[('weight', (3, 4, 4)), ('bias', (3, 4))]
>>> layers(ht.tensor(np.ones((2, 4), np.float32))).shape
(2, 4)

How it works. ``make_block()`` is called n times (each block is initialized as it would be
on its own); every parameter and buffer is stacked along a new leading axis into one
Parameter (buffer) of this module, under the block's own name (``fc.weight`` of a block is
``fc.weight`` of shape ``[n, ...]`` here, ``layers.fc.weight`` in a model that calls this
module ``layers``). The stacked tensors are the real state: optimizers, ``GradManager``,
``state_dict`` and ``xla_trace`` see them and update them in place, and nothing is stacked
per step (the scan slices them inside the loop). ``dist.shard_module`` places them by name
like any parameter (a spec for them covers the leading ``[n]`` axis too).

The first block is kept, unregistered, as a *template* holding no values. ``forward(x,
*args, **kwargs)`` runs ``F.scan`` with ``x`` as the carry and the stacked tensors as the
xs; each step binds the template's parameter and buffer attributes to that step's slices
(``object.__setattr__``, restored afterwards: no structure change, no recompile), calls
``template(carry, *args, **kwargs)`` and carries its result to the next block. ``args`` and
``kwargs`` (masks, flags) are the same for every block; tensors among them are closed over
by the scan. The template's modules take this module's ``training`` flag.

What a scanned block cannot do (each refused with a message naming your line): return a
value of another shape or dtype than its input (it is a loop carry); update a buffer in
place (batch-norm statistics in training mode: call ``eval()``, or use ``nn.Sequential``);
draw random numbers (dropout in training mode), which ``F.scan`` refuses inside a body for
now.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hlotrace import functional as F
from hlotrace.errors import HlotraceError, OpError, TraceError, positive_int
from hlotrace.nn.module import _BUFFER, _PARAM, Module
from hlotrace.source import user_location
from hlotrace.tensor import Parameter, Tensor, tensor

__all__ = ["Stacked"]


class StackedState(Module):
    """Holds the stacked ``[n, ...]`` parameters and buffers of one sub-module of a
    :class:`Stacked` block, under the sub-module's names (it is not callable)."""

    def __init__(self, n: int, of: str):
        super().__init__()
        object.__setattr__(self, "_n", n)
        object.__setattr__(self, "_of", of)

    def forward(self, *args, **kwargs):
        raise HlotraceError(
            f"StackedState holds the stacked parameters of {self._of} sub-modules of an nn.Stacked; "
            f"call the nn.Stacked module instead"
        )

    def extra_repr(self) -> str:
        return f"{self._n} x {self._of}"


def _state_of(module: Module) -> list[tuple[str, Module, str, str, Tensor]]:
    """``(full name, owning module, attribute, kind, tensor)`` of every parameter and buffer
    of ``module``, in ``state_dict`` order, each owned by the module that registers it."""
    out = []
    for path, m in module.named_modules():
        for name, kind in m._member_table().items():
            value = m.__dict__.get(name)
            if kind in (_PARAM, _BUFFER) and value is not None:
                out.append((f"{path}.{name}" if path else name, m, name, kind, value))
    order = {name: i for i, (name, _) in enumerate(module._named_state())}
    return sorted((s for s in out if s[0] in order), key=lambda s: order[s[0]])


class Stacked(Module):
    """``n`` blocks built by ``make_block()``, applied one after the other (block 0 first) as
    one ``F.scan`` over their stacked parameters (see the module docstring).

    ``forward(x, *args, **kwargs)`` is ``block_{n-1}(... block_0(x, *args, **kwargs) ...,
    *args, **kwargs)``; each block must return the structure, shapes and dtypes of ``x``.
    ``unroll`` is ``F.scan``'s (k blocks per loop iteration in the compiled program).

    >>> blocks = nn.Stacked(lambda: Block(dim=64, heads=4), 48)
    >>> blocks.attn.in_proj_weight.shape
    (48, 192, 64)
    """

    def __init__(self, make_block: Callable[[], Module], n: int, unroll: int | bool = 1):
        super().__init__()
        location = user_location()
        where = f" at {location}" if location else ""
        if isinstance(make_block, Module) or not callable(make_block):
            raise HlotraceError(
                f"nn.Stacked: make_block must be a function that builds one block (e.g. lambda: Block(64, 4)), "
                f"got {type(make_block).__name__}{where}"
            )
        n = positive_int("nn.Stacked", "n", n)
        blocks = [make_block() for _ in range(n)]
        for i, block in enumerate(blocks):
            if not isinstance(block, Module):
                raise HlotraceError(
                    f"nn.Stacked: make_block() must return an nn.Module, call {i} returned "
                    f"{type(block).__name__}{where}"
                )
        if len({id(b) for b in blocks}) != n:
            raise HlotraceError(
                f"nn.Stacked: make_block() returned the same module twice; it must build a new block on every "
                f"call{where}"
            )
        template = blocks[0]
        slots = _state_of(template)
        _check_same_state(slots, blocks, where)
        object.__setattr__(self, "_n", n)
        self.unroll = unroll  # F.scan's unroll (set it before the first compiled call)
        object.__setattr__(self, "_template", template)
        # (template module, attribute, kind, path of the module holding the stacked tensor).
        object.__setattr__(self, "_slots", [])
        containers: dict[str, Module] = {"": self}
        modules = dict(template.named_modules())

        def container(path: str) -> Module:
            # Created at first use, so the listing order is the block's own.
            if path not in containers:
                parent, _, name = path.rpartition(".")
                containers[path] = StackedState(n, type(modules[path]).__name__)
                container(parent).add_module(name, containers[path])
            return containers[path]

        for full, m, attr, kind, t in slots:
            path = full.rpartition(".")[0]
            container(path)
            stacked = np.stack([_lookup(b, full).numpy() for b in blocks])
            if kind == _PARAM:
                setattr(containers[path], attr, Parameter(stacked, dtype=t.dtype))
            else:
                containers[path].register_buffer(attr, tensor(stacked, dtype=t.dtype))
            self._slots.append((m, attr, kind, path))
            object.__setattr__(m, attr, None)  # the template holds no values between calls

    def __len__(self) -> int:
        return self._n

    @property
    def template(self) -> Module:
        """The block whose ``forward`` each step runs (its parameters are None between calls)."""
        return self._template

    def _stacked(self) -> list[Tensor]:
        """The stacked tensors, in the order of ``self._slots``."""
        return [_lookup(self, f"{path}.{attr}" if path else attr) for _, attr, _, path in self._slots]

    def forward(self, x, *args, **kwargs):
        template, slots = self._template, self._slots
        for m in template.modules():
            object.__setattr__(m, "training", self.training)
        location = user_location()

        def step(carry, slices):
            bound = []
            try:
                for (module, attr, kind, _), value in zip(slots, slices, strict=True):
                    object.__setattr__(module, attr, value)
                    bound.append((module, attr, kind, value, value._host))
                out = template(carry, *args, **kwargs)
                for module, attr, kind, value, before in bound:
                    if value._host is not before:
                        raise TraceError(
                            f"nn.Stacked: the block updates its {kind} {attr!r} of {type(module).__name__} in "
                            f"place (batch-norm statistics in training mode?), which a scanned block cannot do yet; "
                            f"call eval() on it, or use nn.Sequential of separate blocks. Called at {location}"
                        )
            finally:
                for module, attr, *_ in bound:
                    object.__setattr__(module, attr, None)
            return out, None

        try:
            out, _ = F.scan(step, x, self._stacked(), unroll=self.unroll)
        except OpError as exc:
            if "changes the carry" not in str(exc):
                raise
            raise OpError(
                f"nn.Stacked: each block must return what it takes (the blocks run as one F.scan whose carry is "
                f"the input): {exc}"
            ) from None
        except TraceError as exc:
            if "random" not in str(exc):
                raise
            raise TraceError(
                f"nn.Stacked runs its blocks as the body of one F.scan, and F.scan refuses random draws in a body "
                f"for now (dropout in training mode? call eval(), or pass the random numbers in as an argument): "
                f"{exc}"
            ) from None
        return out

    def extra_repr(self) -> str:
        return f"n={self._n}, block={type(self._template).__name__}" + (
            f", unroll={self.unroll}" if self.unroll != 1 else ""
        )


def _lookup(module: Module, full: str) -> Tensor:
    owner = module
    *path, attr = full.split(".")
    for part in path:
        owner = owner.__dict__[part]
    return owner.__dict__[attr]


def _check_same_state(slots, blocks, where: str) -> None:
    """Every block must have the template's parameters and buffers, shapes and dtypes."""
    expected = [(name, kind, tuple(t.shape), np.dtype(t.dtype)) for name, _, _, kind, t in slots]
    for i, block in enumerate(blocks[1:], start=1):
        got = [(name, kind, tuple(t.shape), np.dtype(t.dtype)) for name, _, _, kind, t in _state_of(block)]
        if got == expected:
            continue
        names = {e[0]: e for e in expected}
        for g in got:
            e = names.get(g[0])
            if e is None:
                raise HlotraceError(f"nn.Stacked: block {i} has {g[1]} {g[0]!r} that block 0 does not have{where}")
            if e != g:
                raise HlotraceError(
                    f"nn.Stacked: {g[1]} {g[0]!r} is {np.dtype(g[3]).name}{list(g[2])} in block {i} but "
                    f"{np.dtype(e[3]).name}{list(e[2])} in block 0; the blocks must be identical{where}"
                )
        missing = sorted(set(names) - {g[0] for g in got})
        raise HlotraceError(f"nn.Stacked: block {i} lacks {missing} that block 0 has{where}")
