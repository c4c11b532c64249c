"""Creation ops: zeros, ones, full, arange. They take no tensor inputs, only attributes.

- ``zeros(shape, dtype)``, ``ones(shape, dtype)``: ``dtype`` defaults to float32.
- ``full(shape, value, dtype)``: ``dtype`` defaults to the dtype of ``value`` as a Python
  scalar on its own (bool, int32 or float32, see :func:`hlotrace.dtypes.promote`). The
  value is stored converted to ``dtype``: rounded for floats (1e10 in float16 is inf),
  ``value != 0`` for bool; an integer dtype's value must be an integer in its range.
- ``arange(start, stop=None, step=1, dtype=None)``: NumPy's ``arange``. One argument is
  ``stop`` (from 0); the length is ``ceil((stop - start) / step)`` (0 if negative, computed
  in float64 for floats, as NumPy). ``dtype`` defaults to int32 when every argument is an
  int and float32 otherwise. Float results are ``start + i * step`` with ``start`` and
  ``step`` rounded to float32 (float64 for a float64 arange), computed in float64 and
  rounded once to the dtype (NumPy
  accumulates its own rounding differently; XLA may or may not fuse the multiply-add, so
  results can differ in the last bit where the two terms nearly cancel). Integer results
  must all lie in the dtype's range; an integer arange needs int arguments; bool is refused.

Shapes are stored as tuples of non-negative ints and ``dtype`` explicitly, so a recorded
trace names every attribute. None of these ops is differentiable.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, register_op

FAMILY = "creation"

INT32_MAX = 2**31 - 1


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a float arange computes in: float32, or float64 for float64."""
    return dt.promote_strong(dtype, dt.float32)


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
    if isinstance(value, bool | np.bool_):
        return bool
    if isinstance(value, int | np.integer):
        return int
    if isinstance(value, float | np.floating):
        return float
    raise ShapeDtypeError(f"{what} must be a Python number, got {type(value).__name__} {value!r}")


def canonical_value(value, dtype):
    """``value`` as a Python scalar of ``dtype``'s kind, converted to ``dtype``."""
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


# -- zeros, ones, full --------------------------------------------------------------------


def _fill_canonicalize(name, fixed=None):
    def canonicalize(avals, attrs):
        _no_inputs(avals)
        if fixed is None:
            _check_attrs(name, attrs, ("shape", "value", "dtype"), ("shape", "value"))
            value = attrs["value"]
            kind = _scalar_kind(value, "value")
            dtype = attrs.get("dtype")
            dtype = dt.promote(dt.Weak(kind)) if dtype is None else dt.canonicalize(dtype)
            return {"shape": canonical_shape(attrs["shape"]), "value": canonical_value(value, dtype), "dtype": dtype}
        _check_attrs(name, attrs, ("shape", "dtype"), ("shape",))
        dtype = attrs.get("dtype")
        return {
            "shape": canonical_shape(attrs["shape"]),
            "dtype": dt.float32 if dtype is None else dt.canonicalize(dtype),
        }

    return canonicalize


def _fill_infer(*avals, shape, dtype, value=None) -> Aval:
    return Aval(shape, dtype)


def _fill_reference(fixed):
    def reference(*, shape, dtype, value=None):
        return np.full(shape, fixed if value is None else value, dtype=dtype)

    return reference


def _fill_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        rng = s.generator(draw)
        shape = s.random_shape(rng)
        if rng.random() < 1 / 6:
            shape = list(shape)  # lists and plain ints are accepted too
        elif rng.random() < 1 / 6 and len(shape) == 1:
            shape = shape[0]
        attrs = {"shape": shape, "dtype": dtype}
        if name == "full":
            # Boundary and special values (-0.0, NaN, subnormals, integer extremes) and
            # values of another kind than the dtype (an int filling a float tensor).
            kind = dtype if rng.random() < 3 / 4 else (dt.int32, dt.float32, dt.bool_)[rng.integers(0, 3)]
            if dtype in dt.INTEGER and kind not in (dt.bool_, dt.int32):
                kind = dtype  # a float (or too large an int) cannot fill an integer tensor
            attrs["value"] = s.values(kind).scalar(rng)
            if rng.random() < 1 / 8 and dtype == dt.promote(dt.Weak(type(attrs["value"]))):
                del attrs["dtype"]  # the default: the value's own dtype
        elif rng.random() < 1 / 8 and dtype == dt.float32:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()


for _name, _fixed, _doc in [
    ("zeros", 0, "a tensor of zeros of shape and dtype (default float32)"),
    ("ones", 1, "a tensor of ones of shape and dtype (default float32)"),
    ("full", None, "a tensor of shape filled with value, converted to dtype (default: value's own dtype)"),
]:
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_fill_reference(_fixed),
            infer=_fill_infer,
            canonicalize=_fill_canonicalize(_name, _fixed),
            sample=lambda s, _n=_name: _fill_sample(s, _n),
            vjp=NOT_DIFFERENTIABLE,
            doc=_doc,
        )
    )


# -- arange -------------------------------------------------------------------------------


def arange_length(start, stop, step) -> int:
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        return max(0, -((start - stop) // step))  # ceil((stop - start) / step), exactly
    return max(0, math.ceil((stop - start) / step))


def _arange_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("arange", attrs, ("start", "stop", "step", "dtype"), ("start",))
    start, stop, step = attrs["start"], attrs.get("stop"), attrs.get("step", 1)
    if stop is None:
        start, stop = 0, start
    kinds = [_scalar_kind(v, k) for k, v in (("start", start), ("stop", stop), ("step", step))]
    if bool in kinds:
        raise ShapeDtypeError("start, stop and step must be numbers, not bools")
    dtype = attrs.get("dtype")
    dtype = dt.promote(*(dt.Weak(k) for k in kinds)) if dtype is None else dt.canonicalize(dtype)
    if dtype == dt.bool_:
        raise ShapeDtypeError("cannot produce bool tensors")
    if dtype in dt.INTEGER:
        if float in kinds:
            raise ShapeDtypeError(f"an integer dtype needs int start, stop and step, got {start!r}, {stop!r}, {step!r}")
        start, stop, step = int(start), int(stop), int(step)
    else:
        start, stop, step = float(start), float(stop), float(step)
        if not all(np.isfinite(v) for v in (start, stop, step)):
            raise ShapeDtypeError(f"needs finite start, stop and step, got {start!r}, {stop!r}, {step!r}")
    if step == 0:
        raise ShapeDtypeError("step must not be zero")
    length = arange_length(start, stop, step)
    if length > INT32_MAX:
        raise ShapeDtypeError(f"{length} elements are too many")
    if dtype in dt.INTEGER and length:
        last, info = start + (length - 1) * step, np.iinfo(dtype)
        if not (info.min <= start <= info.max and info.min <= last <= info.max):
            raise ShapeDtypeError(f"values from {start} to {last} do not fit in {dtype}")
    return {"start": start, "stop": stop, "step": step, "dtype": dtype}


def _arange_infer(*avals, start, stop, step, dtype) -> Aval:
    return Aval((arange_length(start, stop, step),), dtype)


def _arange_reference(*, start, stop, step, dtype):
    n = arange_length(start, stop, step)
    if dtype in dt.INTEGER:
        # In int64, which wraps like the rule's arithmetic; the values themselves fit.
        with np.errstate(over="ignore"):
            wrapped = (step + 2**63) % 2**64 - 2**63
            return (start + np.arange(n, dtype=np.int64) * np.int64(wrapped)).astype(dtype)
    wide = compute_dtype(dtype)
    first, delta = (np.float64(wide.type(v)) for v in (start, step))
    return (first + np.arange(n, dtype=np.float64) * delta).astype(dtype)


def _arange_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        dtype = draw(s.dtypes(s.NUMERIC))
        n = int(rng.choice([0, 1, 2, 5, 17, 64, 128])) if rng.random() < 1 / 2 else int(rng.integers(0, 40))
        if dtype in dt.INTEGER:
            info = np.iinfo(dtype)
            step = int(rng.integers(1, 6)) * int(rng.choice([-1, 1]))
            if rng.random() < 1 / 6:
                step *= 1000003
            start = int(rng.integers(-20, 21))
            if rng.random() < 1 / 6:  # near the ends of the dtype's range
                start = int(info.max) - int(rng.integers(0, 3)) if step < 0 else int(info.min) + int(rng.integers(0, 3))
                n = min(n, 40)
            if rng.random() < 1 / 10:
                # A step beyond the dtype's range: one value, or two from one end to the other.
                start, step, n = int(info.min), 2 ** (8 * dtype.itemsize) - 1, int(rng.integers(1, 3))
            shortfall = int(rng.integers(0, min(abs(step), 2**31)))
            stop = start + n * step - (1 if step > 0 else -1) * shortfall  # length n
            kwargs = {"start": start, "stop": stop, "step": step}
        elif rng.random() < 2 / 3:
            # Multiples of 1/16: every value is exact in float32, so rounding cannot differ.
            start = int(rng.integers(-256, 257)) / 16
            step = int(rng.integers(1, 65)) / 16 * float(rng.choice([-1, 1]))
            stop = start + n * step - float(rng.uniform(0, abs(step))) * float(np.sign(step))
            kwargs = {"start": start, "stop": stop, "step": step}
        else:
            # General floats. For float32 and float64, start and step of one sign, so that
            # start + i * step never nearly cancels (where a fused multiply-add rounds
            # differently from two roundings); float16/bfloat16 results absorb that float32
            # rounding, so there the terms may cancel (where rounding step to the result
            # dtype first shows).
            sign = float(rng.choice([-1, 1]))
            start = sign * float(rng.uniform(0, 10)) if rng.random() < 3 / 4 else 0.0
            if dtype.itemsize == 2 and rng.random() < 1 / 2:
                start = -start
            step = sign * float(rng.uniform(0.01, 3))
            stop = start + step * n * float(rng.uniform(0.9, 1.0))
            kwargs = {"start": start, "stop": stop, "step": step}
        if kwargs["start"] == 0 and rng.random() < 1 / 2 and kwargs["step"] == 1:
            kwargs = {"start": kwargs["stop"]}  # arange(stop)
        if rng.random() < 3 / 4 or dtype != dt.promote(*(dt.Weak(type(v)) for v in kwargs.values())):
            kwargs["dtype"] = dtype
        return s.OpSample((), kwargs)

    return sample()


register_op(
    OpDef(
        name="arange",
        family=FAMILY,
        reference=_arange_reference,
        infer=_arange_infer,
        canonicalize=_arange_canonicalize,
        sample=_arange_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="NumPy arange(start, stop, step); int32 when all arguments are ints, else float32",
    )
)
