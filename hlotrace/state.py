"""State of a compiled step: the tensors that Modules, Optimizers and GradManagers own.

An object passed to an ``xla_trace`` function is a *state holder* when its class defines
``_trace_state(self) -> (static_key, tensors)``:

- ``static_key``: hashable; everything that changes which ops the step records
  (``training`` flags, whether SGD uses momentum, ...). A change records and compiles again.
- ``tensors``: every Tensor the holder owns (parameters, buffers, optimizer state, the
  hyper-parameter tensors an optimizer refreshes from ``param_groups`` before returning).

Each such tensor is an executable input (and its ``.grad`` too, when set); each one the
step updates in place (``Tensor._assign``: ``p -= lr * g``) is an output whose buffer is
written back into the same Tensor object after the call, its old buffer donated.

*Closed-over holders* are holders too: a holder (or a loose ``Parameter``, gathered into one
``hlotrace.captures.ClosedParameters``) that the function reaches through its closure cells
and the globals it names is found again before every call (:func:`hlotrace.captures.closed_over`)
and joins the call's holders after the arguments' ones, so everything above applies to it
unchanged (donation, write-back, hyper-parameter refresh, the restore on failure); the cache
key adds the identities of the objects found.

*Implicit state* is a tensor a step reaches without any argument leading to it: the key of
the default random generator (see :mod:`hlotrace.random`). Such tensors are registered in
:mod:`hlotrace.recording` (``register_implicit``); a recording binds one as a late input the
first time the function reads it (:meth:`hlotrace.trace.Recorder.var_of`), and the compiled
step then reads and writes it like a holder's state, on every call.
"""

from __future__ import annotations

from hlotrace.recording import is_implicit, register_implicit  # noqa: F401  (their home before)
from hlotrace.tensor import Tensor
from hlotrace.versions import VERSIONS


def is_holder(obj) -> bool:
    return hasattr(type(obj), "_trace_state")


def collect(holders) -> tuple[tuple, list[Tensor]]:
    """(static key, state tensors deduplicated by identity in first-seen order).

    The static key has, per holder, its class, its own static key and the positions of its
    tensors in the deduplicated list: which holder owns which tensor decides the program
    (an optimizer that now steps another parameter of the same shapes is another program).
    """
    keys, tensors, position = [], [], {}
    for holder in holders:
        static, owned = holder._trace_state()
        slots = []
        for t in owned:
            p = position.get(id(t))
            if p is None:
                p = position[id(t)] = len(tensors)
                tensors.append(t)
            slots.append(p)
        keys.append((type(holder).__name__, static, tuple(slots)))
    return tuple(keys), tensors


class HolderState:
    """The state of one tuple of holders, cached between calls (see :mod:`hlotrace.versions`).

    ``token`` stands for (static key, signature) in a compile-cache key: equal tokens mean
    the same holders' structure, shapes, dtypes and ``.grad`` signature.
    """

    __slots__ = ("aliased", "holders", "hyper", "optimizers", "positions", "static", "structure", "tensors", "token")

    def __init__(self, holders):
        self.holders = holders
        self.static, self.tensors = collect(holders)
        self.positions = {id(t): i for i, t in enumerate(self.tensors)}
        self.token = _intern((self.static, signature(self.tensors)))
        self.optimizers = [(h, h._static_key()) for h in holders if hasattr(h, "_sync_hyper")]
        self.aliased: dict = {}  # leaf aliasing pattern -> (state tensors not among the leaves, slots)
        # Read last: collect() may itself create state (optimizer moments, hyper tensors).
        self.structure, self.hyper = VERSIONS.structure, VERSIONS.hyper


_TOKENS: dict = {}
_HOLDER_CACHE_SIZE = 8  # holder tuples remembered per traced function


def _intern(signature_key) -> int:
    token = _TOKENS.get(signature_key)
    if token is None:
        token = _TOKENS[signature_key] = len(_TOKENS)
    return token


def holder_state(cache: dict, holders: list) -> HolderState:
    """The holders' state, re-derived only when a version counter moved (O(1) otherwise).

    ``cache`` maps the holders' ids to their :class:`HolderState` (one per traced function).
    A hyper-parameter change (``lr``) refreshes the optimizers' hyper tensors in place and
    re-collects only if that changed the optimizers' structural choices.
    """
    ids = tuple(map(id, holders))
    cached = cache.get(ids)
    versions = VERSIONS
    if (
        cached is not None
        and cached.structure == versions.structure
        and all(a is b for a, b in zip(cached.holders, holders, strict=True))
    ):
        if cached.hyper == versions.hyper:
            return cached
        for optimizer, _ in cached.optimizers:
            optimizer._sync_hyper()
        if cached.structure == versions.structure and all(o._static_key() == k for o, k in cached.optimizers):
            cached.hyper = versions.hyper
            return cached
    fresh = HolderState(tuple(holders))
    if len(cache) >= _HOLDER_CACHE_SIZE:
        cache.pop(next(iter(cache)))
    cache[ids] = fresh
    return fresh


def inputs_of(leaves: list, held: HolderState | None) -> tuple[list, tuple[int, ...] | None]:
    """:func:`distinct_inputs` of the argument leaves and the holders' cached state, in
    O(number of leaves) (the state part is cached per aliasing pattern)."""
    if held is None:
        if len(leaves) < 2 or len(set(map(id, leaves))) == len(leaves):
            return leaves, None
        return distinct_inputs(leaves, ())
    positions = held.positions
    pattern = []
    seen: dict[int, int] = {}
    for j, t in enumerate(leaves):
        key = id(t)
        if key in positions or key in seen:
            pattern.append((j, positions.get(key), seen.get(key)))
        seen.setdefault(key, j)
    if not pattern:
        return [*leaves, *held.tensors], None
    pattern = tuple(pattern)
    cached = held.aliased.get(pattern)
    if cached is None:
        inputs, slots = distinct_inputs(leaves, held.tensors)
        cached = held.aliased[pattern] = (inputs[len(leaves) - _duplicates(slots, len(leaves)) :], slots)
    rest, slots = cached
    unique = leaves if not any(p[2] is not None for p in pattern) else list({id(t): t for t in leaves}.values())
    return [*unique, *rest], slots


def _duplicates(slots, num_leaves: int) -> int:
    """How many of the first ``num_leaves`` slots repeat an earlier one."""
    return num_leaves - len(set(slots[:num_leaves]))


def distinct_inputs(leaves, state_tensors) -> tuple[list[Tensor], tuple[int, ...] | None]:
    """The executable's tensor inputs: every Tensor object once, however often it is reached.

    ``leaves`` (the argument tensors, in flattening order) come first, then the holders'
    state tensors that are not also arguments. A Tensor passed twice, or passed as an
    argument and owned by a module/optimizer/GradManager argument (``step(net.w, net, opt)``,
    tied weights), is one input, read once and written back once -- exactly the object the
    eager run reads and updates.

    Returns ``(inputs, slots)``: ``slots[k]`` is the input position of the k-th of
    ``(*leaves, *state_tensors)``, or None when every one is distinct (the common case). The
    slots are part of the compile-cache key: another aliasing pattern is another program.
    """
    position: dict[int, int] = {}
    inputs: list[Tensor] = []
    slots: list[int] = []
    for t in (*leaves, *state_tensors):
        p = position.get(id(t))
        if p is None:
            p = position[id(t)] = len(inputs)
            inputs.append(t)
        slots.append(p)
    if len(inputs) == len(slots):
        return inputs, None
    return inputs, tuple(slots)


def state_positions(num_leaves: int, num_state: int, slots) -> frozenset[int]:
    """Input positions that hold a holder's state tensor (donated when the step writes them)."""
    if slots is None:
        return frozenset(range(num_leaves, num_leaves + num_state))
    return frozenset(slots[num_leaves:])


def signature(tensors) -> tuple:
    """Shapes/dtypes of the state tensors and of their gradients (None when unset)."""
    return tuple((t.shape, t.dtype, None if t.grad is None else (t.grad.shape, t.grad.dtype)) for t in tensors)


class Snapshot:
    """The values (and ``.grad``, with its value) of some tensors, restorable after a failed call.

    A recording runs the step eagerly on the very objects it updates, and a gradient may be
    accumulated into in place: both the object a ``.grad`` names and that object's value are
    saved, so a failure at any point (an exception after ``gm.backward``, Ctrl-C, a compile
    error) puts every tensor back exactly.
    """

    def __init__(self, tensors):
        self._saved: list = []
        for t in tensors:
            self.add(t)

    def add(self, tensor) -> None:
        """Save ``tensor`` too (an implicit state tensor found during the recording)."""
        grad = tensor.grad
        grad_value = None if grad is None else (grad._host, grad._device)
        self._saved.append((tensor, tensor._host, tensor._device, grad, grad_value))

    def grad_before(self, index: int):
        return self._saved[index][3]

    def restore(self) -> None:
        VERSIONS.values += 1
        for t, host, device, grad, grad_value in self._saved:
            t._host, t._device, t.grad = host, device, grad
            if grad is not None:
                grad._host, grad._device = grad_value
