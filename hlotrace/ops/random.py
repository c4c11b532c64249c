"""Random ops driven by an explicit counter-based key (see :mod:`hlotrace.random`).

Every primitive takes the key, an ``int32[2]`` tensor (the two words of a Threefry-2x32
key, Salmon et al. 2011, as in JAX), as its only operand and is a pure function of it:
eager (NumPy on uint32) and compiled (StableHLO on ui32) agree bit for bit except where
stated.

- Bits: ``bits(key, count)`` is ``count`` uint32 words; block ``i`` is
  ``threefry2x32(key, counter=(i, 0))`` (20 rounds), giving words ``2i`` and ``2i + 1``. An
  op needing ``k`` words per element of an ``n``-element result reads ``bits(key, k * n)``
  as ``k`` rows of ``n``.
- ``random_split(key)``: the next key, ``threefry2x32(key, counter=(0, 1))`` (no draw uses
  that counter). The public functions draw with a generator's key, then replace it in
  place with ``random_split(key)``.
- ``random_uniform(key, shape, dtype, low, high)``: ``u`` in ``[0, 1)`` made exactly from
  the top ``p`` bits (the dtype's mantissa bits: 10 float16, 7 bfloat16, 23 float32, 52
  float64 from two words) put into the mantissa of 1.0 (``[1, 2) - 1``); that is the result
  for ``[0, 1)``. Otherwise ``low + span * u`` in float64 with every product exact, so that
  XLA fusing the multiply-add into an FMA cannot change a bit: ``span`` is ``high - low``
  rounded to float32 (float16/bfloat16/float32); for float64 ``span`` and ``u`` are split
  into 26-bit halves and the four exact partial products summed in a fixed order. Then
  clamped to ``high`` and rounded (via float32 for the narrower dtypes). Bounds are stored
  rounded to ``dtype``, finite, ``low <= high``. As with PyTorch's ``uniform_``, the result
  lies in ``[low, high)`` except that rounding may give ``high`` (never for ``[0, 1)``).
- ``random_normal(key, shape, dtype, mean, std)``: Box–Muller,
  ``sqrt(-2 log(1 - u1)) * cos(2 pi u2)`` with two 23-bit (float64: 52-bit) uniforms per
  element, in float32 (float64), then ``mean + std * z`` rounded once; ``std >= 0``.
  Compiled results differ from eager ones by a few ulp (XLA's log/cos are not libm's, see
  the tolerance table). Tails are cut at ``|z| <= 5.64`` (float64: 8.49), probability < 2e-8.
- ``random_randint(key, shape, low, high, dtype)``: ``low + (b mod (high - low))``, ``b`` a
  64-bit word (two per element), in uint64 arithmetic. Each value's probability is within a
  factor ``1 ± (high - low) / 2**64`` of uniform: < 2.4e-10 off for any int32 range, < 6e-8
  for int64 spans up to 2**40; int64 spans beyond 2**63 make some values twice as likely as
  others (the full int64 range is exact). ``low < high`` (high exclusive), in the dtype's range.
- ``random_permutation(key, n, dtype)``: stable ``argsort`` of ``n`` 32-bit words (ties,
  about ``n**2 / 2**33`` pairs, broken by index). int32 (default) or int64.

Differences from NumPy/PyTorch: the streams are hlotrace's own; ``permutation`` defaults to
int32 (PyTorch's ``randperm``: int64); ``dropout`` (a composite:
``where(uniform(x.shape) >= p, x * (1 / (1 - p)), 0)``, float32 uniform) gives 0 at dropped
positions even where ``x`` is NaN or inf (PyTorch's ``x * mask * scale`` gives NaN) and
draws nothing for ``p`` of 0 or 1 or ``training=False``. The primitives are not
differentiable (the key is an integer); dropout's gradient flows through where and multiply.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.creation import canonical_shape
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, OPS, Aval, OpDef, register_op
from hlotrace.ops.threefry import (
    MANTISSA_BITS,
    _rows,
    _uniform_bits,
    _uniform_parts,
    compute_dtype,
    is_unit_range,
    random_bits,
    span_split,
    threefry2x32,
    words_per_uniform,
)

__all__ = ["random_split"]

FAMILY = "random"

KEY_SHAPE = (2,)

# -- attribute checks ---------------------------------------------------------------------


def _check_attrs(name, attrs, allowed):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({name} takes {', '.join(allowed)})")
    missing = [a for a in allowed if a not in attrs]
    if missing:
        raise ShapeDtypeError(f"needs {', '.join(f'{a}=' for a in missing)}")


def _dtype_attr(value, admitted, what):
    try:
        dtype = dt.canonicalize(value)
    except (ShapeDtypeError, TypeError):
        raise ShapeDtypeError(f"dtype must be one of {[str(d) for d in admitted]}, got {value!r}") from None
    if dtype not in admitted:
        raise ShapeDtypeError(f"dtype must be {what} ({', '.join(str(d) for d in admitted)}), got {dtype}")
    return dtype


def _float_attr(value, name, dtype):
    """``value`` (a finite real number) rounded to ``dtype``, as a Python float."""
    if not dt.is_number(value):
        raise ShapeDtypeError(f"{name}= must be a Python number, got {type(value).__name__} {value!r}")
    with np.errstate(over="ignore"):
        rounded = float(np.asarray(float(value), dtype=dtype))
    if not math.isfinite(rounded):
        raise ShapeDtypeError(f"{name}={value!r} is not finite in {dtype}")
    return rounded


def _int_attr(value, name):
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ShapeDtypeError(f"{name}= must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _key_infer(key: Aval, out: Aval) -> Aval:
    if key.dtype != dt.int32 or key.shape != KEY_SHAPE:
        raise ShapeDtypeError(f"the key must be an int32[2] tensor (a Generator's state), got {key}")
    return out


# -- random_split -------------------------------------------------------------------------


def _split_reference(key):
    one = np.ones(1, np.uint32)
    with np.errstate(over="ignore"):
        x0, x1 = threefry2x32(np.ascontiguousarray(key).view(np.uint32), one - one, one)
    return np.concatenate([x0, x1]).view(np.int32)


def _key_sample(s, draw):
    """A key: any int32 pair, boundary values included."""
    return draw(s.arrays(dt.int32, KEY_SHAPE))


register_op(
    OpDef(
        name="random_split",
        family=FAMILY,
        reference=_split_reference,
        infer=lambda key: _key_infer(key, Aval(KEY_SHAPE, dt.int32)),
        canonicalize=lambda avals, attrs: _check_attrs("random_split", attrs, ()) or {},
        sample=lambda s: s.arrays(dt.int32, KEY_SHAPE).map(lambda key: s.OpSample((key,))),
        vjp=NOT_DIFFERENTIABLE,
        doc="the next key: threefry2x32(key, counter=(0, 1)) as int32[2]",
    )
)


# -- random_uniform -----------------------------------------------------------------------


def _uniform_canonicalize(avals, attrs):
    _check_attrs("random_uniform", attrs, ("shape", "dtype", "low", "high"))
    dtype = _dtype_attr(attrs["dtype"], dt.FLOATING, "a float dtype")
    low, high = _float_attr(attrs["low"], "low", dtype), _float_attr(attrs["high"], "high", dtype)
    if low > high:
        raise ShapeDtypeError(f"low={low} is above high={high}")
    wide = compute_dtype(dtype)
    with np.errstate(over="ignore"):
        span = np.asarray(high, wide) - np.asarray(low, wide)
    if not np.isfinite(span):
        raise ShapeDtypeError(f"high - low = {high} - {low} overflows {wide}")
    return {"shape": canonical_shape(attrs["shape"]), "dtype": dtype, "low": low, "high": high}


def _shape_infer(key: Aval, *, shape, dtype, **attrs) -> Aval:
    return _key_infer(key, Aval(shape, dtype))


def _uniform_reference(key, *, shape, dtype, low, high):
    n = math.prod(shape)
    parts = _uniform_parts(_rows(key, words_per_uniform(dtype), n), dtype, MANTISSA_BITS[dtype])
    if is_unit_range(low, high):
        value = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    elif len(parts) == 1:
        # In float64, where span * u is exact (24 + 23 bits): an FMA cannot change it.
        span = np.float64(np.float32(high) - np.float32(low))
        value = np.float64(low) + span * parts[0].astype(np.float64)
    else:
        # Four exact partial products (26-27 bits each side), summed in a fixed order.
        (s_hi, s_lo), (u_hi, u_lo) = span_split(low, high), parts
        value = low + (s_hi * u_hi + ((s_hi * u_lo + s_lo * u_hi) + s_lo * u_lo))
    if not is_unit_range(low, high):
        value = np.where(value > high, high, value)
    return value.astype(compute_dtype(dtype)).astype(dtype).reshape(shape)


def _uniform_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.FLOATS))
        rng = s.generator(draw)
        key = _key_sample(s, draw)
        pick = rng.random()
        big = float(ml_dtypes.finfo(dtype).max) / 4
        if pick < 1 / 3:
            low, high = 0.0, 1.0
        elif pick < 1 / 2:
            low = high = float(rng.uniform(-10, 10))  # an empty range: every value is low
        elif pick < 5 / 8:
            low, high = -big, big  # the widest spans the compute dtype holds
        else:
            low, high = sorted(float(v) for v in rng.uniform(-100, 100, 2))
        return s.OpSample((key,), {"shape": s.random_shape(rng), "dtype": dtype, "low": low, "high": high})

    return sample()


register_op(
    OpDef(
        name="random_uniform",
        family=FAMILY,
        reference=_uniform_reference,
        infer=_shape_infer,
        canonicalize=_uniform_canonicalize,
        sample=_uniform_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="uniform in [low, high): mantissa bits of the key's Threefry stream; float dtypes",
    )
)


# -- random_normal ------------------------------------------------------------------------


def _normal_canonicalize(avals, attrs):
    _check_attrs("random_normal", attrs, ("shape", "dtype", "mean", "std"))
    dtype = _dtype_attr(attrs["dtype"], dt.FLOATING, "a float dtype")
    wide = compute_dtype(dtype)
    mean, std = _float_attr(attrs["mean"], "mean", wide), _float_attr(attrs["std"], "std", wide)
    if std < 0:
        raise ShapeDtypeError(f"std must be >= 0, got {std}")
    return {"shape": canonical_shape(attrs["shape"]), "dtype": dtype, "mean": mean, "std": std}


def _normal_reference(key, *, shape, dtype, mean, std):
    n = math.prod(shape)
    wide = compute_dtype(dtype)
    k = words_per_uniform(dtype)
    rows = _rows(key, 2 * k, n)
    u1 = wide.type(1) - _uniform_bits(rows[:k], dtype, MANTISSA_BITS[wide])
    u2 = _uniform_bits(rows[k:], dtype, MANTISSA_BITS[wide])
    z = np.sqrt(wide.type(-2) * np.log(u1)) * np.cos(wide.type(2 * np.pi) * u2)
    return (wide.type(mean) + wide.type(std) * z).astype(dtype).reshape(shape)


def _normal_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.FLOATS))
        rng = s.generator(draw)
        key = _key_sample(s, draw)
        mean = 0.0 if rng.random() < 1 / 3 else float(rng.uniform(-10, 10))
        std = (1.0, 0.0, float(rng.uniform(0, 4)))[rng.choice(3, p=(0.4, 0.1, 0.5))]
        return s.OpSample((key,), {"shape": s.random_shape(rng), "dtype": dtype, "mean": mean, "std": std})

    return sample()


register_op(
    OpDef(
        name="random_normal",
        family=FAMILY,
        reference=_normal_reference,
        infer=_shape_infer,
        canonicalize=_normal_canonicalize,
        sample=_normal_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="mean + std * Box-Muller normal of the key's Threefry stream; float dtypes",
    )
)


# -- random_randint -----------------------------------------------------------------------


def _randint_canonicalize(avals, attrs):
    _check_attrs("random_randint", attrs, ("shape", "low", "high", "dtype"))
    dtype = _dtype_attr(attrs["dtype"], dt.INTEGER, "an integer dtype")
    low, high = _int_attr(attrs["low"], "low"), _int_attr(attrs["high"], "high")
    info = np.iinfo(dtype)
    if low >= high:
        raise ShapeDtypeError(f"needs low < high (high is exclusive), got low={low}, high={high}")
    if low < info.min or high > info.max + 1:
        raise ShapeDtypeError(f"[{low}, {high}) is out of range for {dtype} ([{info.min}, {info.max + 1}))")
    return {"shape": canonical_shape(attrs["shape"]), "low": low, "high": high, "dtype": dtype}


def _randint_reference(key, *, shape, low, high, dtype):
    rows = _rows(key, 2, math.prod(shape)).astype(np.uint64)
    b = (rows[0] << np.uint64(32)) | rows[1]
    span = high - low
    r = b if span == 2**64 else b % np.uint64(span)
    return (np.uint64(low % 2**64) + r).view(np.int64).astype(dtype).reshape(shape)


def _randint_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(dt.INTEGER))
        rng = s.generator(draw)
        key = _key_sample(s, draw)
        info = np.iinfo(dtype)
        pick = rng.random()
        if pick < 1 / 3:
            low = int(rng.integers(-10, 10))
            high = low + int(rng.integers(1, 12))
        elif pick < 1 / 2:
            low, high = int(info.min), int(info.max) + 1  # the whole range
        elif pick < 5 / 8:
            low = int(rng.integers(info.min, info.max, endpoint=True))
            high = low + 1  # a single value
        else:  # spans beyond 2**32 for int64, near the ends of the range
            low, high = sorted(int(v) for v in rng.integers(info.min, info.max, 2, endpoint=True))
            high += 1
        return s.OpSample((key,), {"shape": s.random_shape(rng), "low": low, "high": high, "dtype": dtype})

    return sample()


register_op(
    OpDef(
        name="random_randint",
        family=FAMILY,
        reference=_randint_reference,
        infer=_shape_infer,
        canonicalize=_randint_canonicalize,
        sample=_randint_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="integers in [low, high): low + 64 random bits mod (high - low); int32 and int64",
    )
)


# -- random_permutation -------------------------------------------------------------------


def _permutation_canonicalize(avals, attrs):
    _check_attrs("random_permutation", attrs, ("n", "dtype"))
    dtype = _dtype_attr(attrs["dtype"], dt.INTEGER, "an integer dtype")
    n = _int_attr(attrs["n"], "n")
    if not 0 <= n <= np.iinfo(dtype).max:
        raise ShapeDtypeError(f"n must be in [0, {np.iinfo(dtype).max}] for {dtype}, got {n}")
    return {"n": n, "dtype": dtype}


def _permutation_reference(key, *, n, dtype):
    return np.argsort(random_bits(key, n), kind="stable").astype(dtype)


def _permutation_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(dt.INTEGER))
        rng = s.generator(draw)
        n = int(rng.choice([0, 1, 2, int(rng.integers(3, 17)), int(rng.integers(17, 129))]))
        return s.OpSample((_key_sample(s, draw),), {"n": n, "dtype": dtype})

    return sample()


register_op(
    OpDef(
        name="random_permutation",
        family=FAMILY,
        reference=_permutation_reference,
        infer=lambda key, *, n, dtype: _key_infer(key, Aval((n,), dtype)),
        canonicalize=_permutation_canonicalize,
        sample=_permutation_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="a permutation of range(n): stable argsort of the key's Threefry words; int32/int64",
    )
)


# -- public functions ---------------------------------------------------------------------
# (the draws from a generator -- uniform, normal, ... -- are in hlotrace.ops.generator)


def random_split(key):
    """The key that follows ``key`` (``int32[2]``): a pure function, nothing is updated."""
    return apply(OPS["random_split"], key)
