"""Shape/dtype inference helpers shared by the op families."""

from __future__ import annotations

from collections.abc import Sequence

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError


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


class _Functional:
    """``hlotrace.functional``, imported on first use (it imports the op registry itself).

    VJPs are written with it: ``F.multiply(ct, y)`` inside a VJP is an ordinary op application.
    """

    def __getattr__(self, name):
        from hlotrace import functional

        return getattr(functional, name)


F = _Functional()
