"""The creation family's helpers: attribute checks, shapes and fill values (semantics in
:mod:`hlotrace.ops.creation`)."""

from __future__ import annotations

import operator

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError

FAMILY = "creation"

INT32_MAX = 2**31 - 1


def _check_attrs(name, attrs, allowed, required=()):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({name} takes {', '.join(allowed)})")
    for key in required:
        if key not in attrs:
            raise ShapeDtypeError(f"needs {key}=")


def _no_inputs(avals):
    if avals:
        raise ShapeDtypeError(f"takes no tensor inputs (got {len(avals)})")


def canonical_shape(shape) -> tuple[int, ...]:
    """An int or a sequence of ints as a tuple of non-negative Python ints."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool | np.bool_):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeDtypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    result = []
    for d in dims:
        if isinstance(d, bool | np.bool_):
            raise ShapeDtypeError(f"shape entries must be ints, got {d!r} in {shape!r}")
        try:
            d = operator.index(d)
        except TypeError:
            raise ShapeDtypeError(f"shape entries must be ints, got {d!r} in {shape!r}") from None
        if d < 0:
            raise ShapeDtypeError(f"negative dimension {d} in shape {dims}")
        result.append(d)
    return tuple(result)


def _scalar_kind(value, what):
    kind = dt.number_kind(value)  # Python, NumPy and ml_dtypes scalars
    if kind is not None:
        return kind
    raise ShapeDtypeError(f"{what} must be a Python number, got {type(value).__name__} {value!r}")


def canonical_value(value, dtype):
    """``value`` as a Python scalar of ``dtype``'s kind, converted to ``dtype``."""
    value = dt.as_python_number(value)
    if dtype == dt.bool_:
        return bool(value != 0)  # NaN is True, as NumPy converts it
    if dtype in dt.INTEGER:
        if isinstance(value, float | np.floating) and not (np.isfinite(value) and float(value).is_integer()):
            raise ShapeDtypeError(f"value {value!r} is not an integer, so it cannot fill an {dtype} tensor")
        value, info = int(value), np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ShapeDtypeError(f"value {value} is out of range for {dtype}")
        return value
    with np.errstate(over="ignore"):
        return float(np.asarray(float(value), dtype=dtype))


def _int_attr(value, what) -> tuple[int]:
    if isinstance(value, bool | np.bool_):
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}")
    try:
        return (operator.index(value),)
    except TypeError:
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}") from None
