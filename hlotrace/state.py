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


def signature(tensors) -> tuple:
    """Shapes/dtypes of the state tensors and of their gradients (None when unset)."""
    return tuple((t.shape, t.dtype, None if t.grad is None else (t.grad.shape, t.grad.dtype)) for t in tensors)


class Snapshot:
    """The values (and ``.grad``) of some tensors, restorable after a failed call."""

    def __init__(self, tensors):
        self._saved = [(t, t._host, t._device, t.grad) for t in tensors]

    def add(self, tensor) -> None:
        """Save ``tensor`` too (an implicit state tensor found during the recording)."""
        self._saved.append((tensor, tensor._host, tensor._device, tensor.grad))

    def grad_before(self, index: int):
        return self._saved[index][3]

    def restore(self) -> None:
        for t, host, device, grad in self._saved:
            t._host, t._device, t.grad = host, device, grad
