"""Shape/dtype inference helpers shared by the op families."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.avals import Aval, describe_avals
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.namespace import F as _F
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``; ShapeDtypeError names the clashing dims.

    >>> broadcast_shapes((3, 1), (4,))
    (3, 4)
    """
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-rank, 0):
        size = 1
        for shape in shapes:
            if len(shape) >= -axis:
                d = shape[axis]
                if d == 1:
                    continue
                if size not in (1, d):
                    raise ShapeDtypeError(
                        f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together "
                        f"(axis {axis}: {size} vs {d})"
                    )
                size = d
        result.append(size)
    return tuple(result)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ShapeDtypeError(f"{what} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ShapeDtypeError(f"{what} {axis} is out of bounds for a tensor of rank {rank}")
    return axis % rank


def normalize_axes(axis, rank: int) -> tuple[int, ...]:
    """``None`` → all axes; an int or a sequence → sorted non-negative tuple, no repeats."""
    if axis is None:
        return tuple(range(rank))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = tuple(normalize_axis(a, rank) for a in axes)
    if len(set(normalized)) != len(normalized):
        raise ShapeDtypeError(f"repeated axis in {axis!r}")
    return tuple(sorted(normalized))


def refuse_bool(dtype, op_meaning: str) -> None:
    if dtype == dt.bool_:
        raise ShapeDtypeError(f"{op_meaning} is not defined for bool tensors (NumPy refuses it too)")


# hlotrace.functional for the families: VJPs are written with it (``F.multiply(ct, y)`` is an
# ordinary op application); bound when hlotrace.functional finishes importing.
F = _F


def as_tensor(x):
    """``x`` as a Tensor (array-likes and Python scalars wrapped: a constant while recording)."""
    return x if isinstance(x, Tensor) else tensor(x)


def composite_error(name, message, *tensors) -> OpError:
    """The OpError of a composite function (``name``), naming its inputs and the user's line."""
    loc = user_location(1)
    at = f" at {loc}" if loc else ""
    return OpError(f"{name}: {message} (inputs: {describe_avals([Aval(t.shape, t.dtype) for t in tensors])}){at}")


_SIDES, _SIDE_WEIGHTS = np.array([0, 1, 2, 3, 4, 5]), np.array([0.04, 0.2, 0.19, 0.19, 0.19, 0.19])
_MAX_ELEMENTS = 128  # keeps a printed failing example readable


def random_shape(rng: np.random.Generator, max_dims: int = 4) -> tuple:
    """A shape of rank 0..max_dims, sides 0..5 (0 rarely, 1 often), at most 128 elements (for
    the families' sample strategies; NumPy only)."""
    while True:
        shape = tuple(int(d) for d in rng.choice(_SIDES, p=_SIDE_WEIGHTS, size=rng.integers(0, max_dims + 1)))
        if np.prod(shape) <= _MAX_ELEMENTS:
            return shape
