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

*Implicit state* is a tensor a step reaches without any argument leading to it: the key of
the default random generator (see :mod:`hlotrace.random`). Such tensors are registered here
(:func:`register_implicit`); a recording binds one as a late input the first time the
function reads it (:meth:`hlotrace.trace.Recorder.var_of`), and the compiled step then
reads and writes it like a holder's state, on every call.
"""

from __future__ import annotations

import weakref

from hlotrace.tensor import Tensor

# id -> tensor for every registered implicit state tensor (kept only while alive).
_IMPLICIT: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def register_implicit(tensor: Tensor) -> None:
    """Make ``tensor`` implicit state: read by a recording, it becomes a late input."""
    _IMPLICIT[id(tensor)] = tensor


def is_implicit(tensor) -> bool:
    return _IMPLICIT.get(id(tensor)) is tensor


def is_holder(obj) -> bool:
    return hasattr(type(obj), "_trace_state")


def collect(holders) -> tuple[tuple, list[Tensor]]:
    """(static key, state tensors deduplicated by identity in first-seen order)."""
    keys, tensors, seen = [], [], set()
    for holder in holders:
        static, owned = holder._trace_state()
        keys.append((type(holder).__name__, static))
        for t in owned:
            if id(t) not in seen:
                seen.add(id(t))
                tensors.append(t)
    return tuple(keys), tensors


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
        for t, host, device, grad, grad_value in self._saved:
            t._host, t._device, t.grad = host, device, grad
            if grad is not None:
                grad._host, grad._device = grad_value
