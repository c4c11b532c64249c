"""Creation ops: zeros, ones, full, arange, eye, linspace. They take no tensor inputs, only attributes.

(One family's op table, over 450 lines on purpose: each op's attribute checks, reference and
semantics are read together; the samples are inline.)

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
- ``eye(n, m=None, k=0, dtype="float32")``: ones where ``column - row == k``. **Difference:**
  float32 by default (NumPy: float64). ``k`` is stored clipped to ``[-n, m]``.
- ``linspace(start, stop, num=50, endpoint=True, dtype=None)``: NumPy's formula in float64
  (``i * (delta / div) + start``, the last value ``stop`` when ``endpoint``; NumPy's
  special cases for ``num <= 1`` and a zero step), then floored for integer dtypes (NumPy)
  and rounded once to ``dtype``: the float64 values are NumPy's bit for bit (the rule
  splits ``step`` in two parts whose products with ``i`` are exact, so XLA fusing
  multiply and add cannot change a rounding). **Differences:** the default dtype is float32
  (NumPy: float64, from Python floats); start, stop and ``stop - start`` must be finite;
  ``num`` at most 2**26; a non-zero step below 2**-960 is refused; integer results must
  lie in the dtype (and within 2**53).

Shapes are stored as tuples of non-negative ints and ``dtype`` explicitly, so a recorded
trace names every attribute. None of these ops is differentiable.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, get_op, register_op

FAMILY = "creation"

__all__ = ["eye", "linspace"]  # re-exported by hlotrace/ops/layout.py (F.eye, F.linspace)

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


# -- eye ------------------------------------------------------------------------------------


def _eye_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("eye", attrs, ("n", "m", "k", "dtype"), ("n",))
    (n,) = canonical_shape((attrs["n"],))
    m = n if attrs.get("m") is None else canonical_shape((attrs["m"],))[0]
    (k,) = _int_attr(attrs.get("k", 0), "k")
    dtype = attrs.get("dtype")
    # k beyond the matrix gives the same all-zero result as k just past its corner.
    return {"n": n, "m": m, "k": min(max(k, -n), m), "dtype": dt.float32 if dtype is None else dt.canonicalize(dtype)}


def _int_attr(value, what) -> tuple[int]:
    if isinstance(value, bool | np.bool_):
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}")
    try:
        return (operator.index(value),)
    except TypeError:
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}") from None


def _eye_reference(*, n, m, k, dtype):
    return (np.arange(m)[None, :] - np.arange(n)[:, None] == k).astype(dtype)


def _eye_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        n = int(rng.integers(0, 7))
        attrs = {"n": n, "dtype": dtype}
        if rng.random() < 0.7:
            attrs["m"] = int(rng.integers(0, 7))
        m = attrs.get("m", n)
        if rng.random() < 0.8:
            attrs["k"] = int(rng.integers(-n - 1, m + 2)) if rng.random() < 0.85 else int(rng.choice([-(2**40), 2**40]))
        if dtype == dt.float32 and rng.random() < 0.2:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()


register_op(
    OpDef(
        name="eye",
        family=FAMILY,
        reference=_eye_reference,
        infer=lambda *avals, n, m, k, dtype: Aval((n, m), dtype),
        canonicalize=_eye_canonicalize,
        sample=_eye_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="n x m matrix with ones where column - row == k (default float32)",
    )
)


# -- linspace -------------------------------------------------------------------------------

LINSPACE_MAX = 2**26  # the rule's exact split of i * step needs i < 2**26
LINSPACE_MIN_STEP = 2.0**-960  # its parts stay normal numbers (XLA flushes subnormals)


def linspace_step_parts(step: float) -> tuple[float, float]:
    """``step`` as ``hi + lo``, hi with 27 significant bits and lo with 26: ``i * hi`` and
    ``i * lo`` are exact in float64 for ``0 <= i < 2**26``."""
    mantissa, exponent = math.frexp(step)
    hi = math.ldexp(math.trunc(math.ldexp(mantissa, 27)), exponent - 27)
    return hi, step - hi


def linspace_float64(start, stop, num, endpoint) -> np.ndarray:
    """NumPy's float64 linspace (``i * step + start``, the last value ``stop``)."""
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)


def _linspace_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("linspace", attrs, ("start", "stop", "num", "endpoint", "dtype"), ("start", "stop", "num"))
    if bool in (_scalar_kind(attrs["start"], "start"), _scalar_kind(attrs["stop"], "stop")):
        raise ShapeDtypeError("start and stop must be numbers, not bools")
    start, stop = float(attrs["start"]), float(attrs["stop"])
    if not (np.isfinite(start) and np.isfinite(stop) and np.isfinite(stop - start)):
        raise ShapeDtypeError(f"needs finite start, stop and stop - start, got {start!r}, {stop!r}")
    (num,) = _int_attr(attrs["num"], "num")
    if not 0 <= num <= LINSPACE_MAX:
        raise ShapeDtypeError(f"num must lie in [0, 2**26], got {num}")
    endpoint = attrs.get("endpoint", True)
    if not isinstance(endpoint, bool | np.bool_):
        raise ShapeDtypeError(f"endpoint must be a bool, got {endpoint!r}")
    div = num - 1 if endpoint else num
    if start != stop and div > 0 and abs((stop - start) / div) < LINSPACE_MIN_STEP:
        raise ShapeDtypeError(f"the step from {start!r} to {stop!r} in {div} steps is too small (below 2**-960)")
    dtype = attrs.get("dtype")
    dtype = dt.float32 if dtype is None else dt.canonicalize(dtype)
    if dtype in dt.INTEGER:
        info = np.iinfo(dtype)
        low, high = math.floor(min(start, stop)), math.floor(max(start, stop))
        if not info.min <= low <= high <= min(info.max, 2**53):
            raise ShapeDtypeError(f"values from {start!r} to {stop!r} do not fit in {dtype}")
    return {"start": start, "stop": stop, "num": num, "endpoint": bool(endpoint), "dtype": dtype}


def _linspace_reference(*, start, stop, num, endpoint, dtype):
    y = linspace_float64(start, stop, num, endpoint)
    return (np.floor(y) if dtype in dt.INTEGER else y).astype(dtype)


def _linspace_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        num = int(rng.choice([0, 1, 2, 3, 5, 17, 50])) if rng.random() < 0.4 else int(rng.integers(0, 41))
        pick = rng.random()
        if pick < 0.15:
            # A long ramp (XLA:CPU fuses multiply and add in long loops) through 0 and other
            # integers, with step r / q rounded to the side where a fused multiply-add lands
            # just short of them: NumPy's two roundings give them exactly, one rounding does not.
            q, r, t = int(rng.choice([3, 7, 9, 11, 13])), int(rng.choice([1, 2, 4, 5])), int(rng.integers(5, 31))
            m = int(rng.integers(max(2 * t, 1000 // q), 3000 // q))
            sign = 1 if Fraction(r / q) < Fraction(r, q) else -1
            start, num = -sign * r * t, m * q + 1
            stop = start + sign * m * r
        elif pick < 0.3:
            # An endpoint that i * step + start misses: stop -0.0 (where start + (num - 1) *
            # step gives +0.0 or a tiny value), or for integers and bools a stop just above
            # the computed value (it floors lower) or 0 where the computed value is not.
            stop = -0.0 if dtype in dt.FLOATING else 0.0 if dtype == dt.bool_ else float(rng.integers(-3, 4))
            for _ in range(50):
                start, num = float(rng.uniform(-10, 10)), int(rng.integers(2, 41))
                last = (num - 1) * ((stop - start) / (num - 1)) + start
                if dtype in dt.FLOATING or (last != 0 if dtype == dt.bool_ else math.floor(last) != stop):
                    break
        elif pick < 0.55 or (dtype in dt.INTEGER and rng.random() < 0.5):
            # Integer ends (for integer dtypes, NumPy floors values just below an integer).
            start, stop = (int(v) for v in rng.integers(-30, 31, 2))
        elif pick < 0.65:
            start = stop = float(rng.choice([0.0, -0.0, 1.5]))  # a zero step
            stop = float(rng.choice([stop, 0.0, -0.0]))
        else:  # values whose floor needs care, cancelling ends, larger magnitudes
            scale = 10.0 ** int(rng.integers(0, 4 if dtype != dt.float16 else 3))
            start, stop = (float(v) for v in rng.uniform(-scale, scale, 2))
            if rng.random() < 0.3:
                stop = -start
        if pick >= 0.3 and rng.random() < 0.1:
            start = float(rng.choice([0.0, -0.0]))  # 0 * (negative step) + 0.0 is +0.0
        attrs = {"start": start, "stop": stop, "num": num, "dtype": dtype}
        if rng.random() < 0.5:
            attrs["endpoint"] = pick < 0.3 or bool(rng.random() < 0.4)
        if dtype == dt.float32 and rng.random() < 0.2:
            del attrs["dtype"]
        return s.OpSample((), attrs)

    return sample()


register_op(
    OpDef(
        name="linspace",
        family=FAMILY,
        reference=_linspace_reference,
        infer=lambda *avals, start, stop, num, endpoint, dtype: Aval((num,), dtype),
        canonicalize=_linspace_canonicalize,
        sample=_linspace_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="NumPy linspace(start, stop, num, endpoint) computed in float64, then dtype (default float32)",
    )
)


def eye(n, m=None, k=0, dtype="float32"):
    """An ``n x m`` matrix (``m`` defaults to ``n``) with ones where ``column - row == k``
    and zeros elsewhere; float32 unless ``dtype`` is given (NumPy's default is float64)."""
    return apply(get_op("eye"), n=n, m=m, k=k, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    """NumPy's ``linspace``: ``num`` evenly spaced values from ``start`` to ``stop``
    (included unless ``endpoint=False``), computed in float64 as NumPy does and rounded once
    to ``dtype`` (default float32; integer dtypes floor, as NumPy)."""
    return apply(get_op("linspace"), start=start, stop=stop, num=num, endpoint=endpoint, dtype=dtype)
