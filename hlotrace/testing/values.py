"""Element values for the sample strategies: general values, per-dtype boundaries, specials.

Wrong lowering rules hide at the edges of a dtype: a comparison done in float32 instead of
int32 is wrong only above 2**24, an int32 max started at -(2**31 - 1) only for -2**31, a
rule that loses the sign of zero only on -0.0. Element strategies here therefore mix

- general values in the op's range (most elements: the arithmetic must stay tested),
- boundary values of the dtype inside that range (:func:`boundary_values`), and
- special values (NaN, ±inf, ±0.0) where the op admits them,

at rates that put several of each in a typical run of 50 examples per op.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from hlotrace import dtypes as dt

SPECIAL_FLOATS = (float("nan"), float("inf"), float("-inf"), -0.0, 0.0)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# int32 values a rule gets wrong when it computes in float32 (exact up to 2**24 only) or
# starts a max/min at the wrong end of the range.
INT32_BOUNDARIES = (
    INT32_MIN,
    INT32_MIN + 1,
    -(2**24) - 1,
    -(2**24),
    -(2**24) + 1,
    -2,
    -1,
    0,
    1,
    2,
    2**24 - 1,
    2**24,
    2**24 + 1,
    INT32_MAX - 1,
    INT32_MAX,
)

# Out of 16 elements: how many are boundary values and how many NaN/±inf/±0.0.
BOUNDARY_IN_16 = 3
SPECIAL_IN_16 = 2


def float_boundaries(dtype) -> tuple[float, ...]:
    """Finite edge values of a float dtype: signed zeros, subnormals, the smallest normal,
    values around 1 and 2**24, and the largest finite values (all exactly representable)."""
    info = ml_dtypes.finfo(dtype)
    tiny, sub, big, eps = float(info.smallest_normal), float(info.smallest_subnormal), float(info.max), float(info.eps)
    values = [0.0, -0.0, sub, -sub, tiny - sub, tiny, -tiny, 0.5, -1.0, 1.0, 1.0 + eps, 1.0 - eps / 2]
    values += [2.0**24 - 1, 2.0**24, -(2.0**24), 2.0**24 + 2, big, -big, big / 2]
    # Rounded to the dtype, duplicates (2**24-1 in bfloat16, say) dropped, -0.0 kept apart from 0.0.
    rounded = {}
    with np.errstate(over="ignore"):
        for value in values:
            v = float(np.asarray(value, dtype=dtype))
            if np.isfinite(v):  # 2**24 is inf in float16
                rounded[(v, np.signbit(v))] = v
    return tuple(rounded.values())


def boundary_values(dtype, low=None, high=None) -> tuple:
    """The dtype's boundary values that lie in ``[low, high]`` (None: unbounded).

    Signed zeros and subnormals are kept whenever the range contains 0.
    """
    dtype = np.dtype(dtype)
    if dtype == dt.bool_:
        return (False, True)
    values = INT32_BOUNDARIES if dtype == dt.int32 else float_boundaries(dtype)
    lo = -np.inf if low is None else low
    hi = np.inf if high is None else high
    return tuple(v for v in values if lo <= v <= hi)


def mix(general, boundaries: tuple, specials: tuple = (), boundary_in_16=BOUNDARY_IN_16, special_in_16=SPECIAL_IN_16):
    """Elements from ``general``, with boundary and special values at fixed rates out of 16."""
    boundary_in_16 = boundary_in_16 if boundaries else 0
    special_in_16 = special_in_16 if specials else 0

    def pick(r):
        if r < special_in_16:
            return st.sampled_from(specials)
        if r < special_in_16 + boundary_in_16:
            return st.sampled_from(boundaries)
        return general

    return st.integers(0, 15).flatmap(pick)


def float_elements(dtype, low=-10.0, high=10.0, special=True, boundary_in_16=BOUNDARY_IN_16):
    """Floats representable in ``dtype``: general values in [low, high] plus the dtype's
    boundary values in that range and (if ``special``) NaN/±inf/±0.0."""
    width = 16 if dtype == dt.float16 else 32
    if width == 16:  # hypothesis wants float16-representable bounds
        low, high = max(low, -65504.0), min(high, 65504.0)
    general = st.floats(low, high, width=width, allow_subnormal=False)
    if dtype == dt.bfloat16:
        general = general.map(lambda v: float(np.float32(v).astype(dt.bfloat16)))
    edges = boundary_values(dtype, low, high)
    return mix(general, edges, SPECIAL_FLOATS if special else (), boundary_in_16=boundary_in_16)


def int_elements(low=INT32_MIN, high=INT32_MAX, boundary_in_16=BOUNDARY_IN_16):
    """int32 values: half small (-10..10, clipped to the range), half anywhere in [low, high],
    plus the int32 boundary values in range."""
    low, high = int(max(low, INT32_MIN)), int(min(high, INT32_MAX))
    small = st.integers(max(low, -10), min(high, 10)) if max(low, -10) <= min(high, 10) else st.integers(low, high)
    general = small | st.integers(low, high)
    return mix(general, boundary_values(dt.int32, low, high), boundary_in_16=boundary_in_16)


def default_elements(dtype, low=None, high=None, special=True, boundary_in_16=BOUNDARY_IN_16):
    """Elements for ``dtype`` in [low, high] (floats default to [-10, 10] for their general
    values, int32 to its full range); bool draws both values."""
    dtype = np.dtype(dtype)
    if dtype in dt.FLOATING:
        low, high = -10.0 if low is None else low, 10.0 if high is None else high
        return float_elements(dtype, low, high, special, boundary_in_16)
    if dtype == dt.int32:
        return int_elements(INT32_MIN if low is None else low, INT32_MAX if high is None else high, boundary_in_16)
    return st.booleans()


def exact_floats(low=-10.0, high=10.0, bits=4, special=True):
    """Multiples of ``2**-bits`` in [low, high], plus (rarely) special values.

    With the defaults every value fits in 8 significant bits (so in bfloat16 too), and sums
    and dot products of a few thousand of them are exact in float32: accumulation order
    cannot change a result, so a mismatch against a reference is a bug, not rounding.
    """
    scale = 2**bits
    finite = st.integers(int(np.ceil(low * scale)), int(np.floor(high * scale))).map(lambda i: i / scale)
    return rare_specials(finite) if special else finite


def rare_specials(finite, one_in=16):
    """Elements from ``finite``, and a special value (NaN, ±inf, ±0.0) about once in ``one_in``.

    Every element of an array is drawn, so with specials as likely as finite values nearly
    every reduction or dot product would come out NaN and the finite arithmetic would go
    untested.
    """
    return st.integers(0, one_in - 1).flatmap(lambda r: st.sampled_from(SPECIAL_FLOATS) if r == 0 else finite)


def neighbours(value, dtype) -> list:
    """``value`` and the values one step away in ``dtype`` (one ulp for floats, ±1 for
    int32), so that operands meet as ties and near-ties."""
    dtype = np.dtype(dtype)
    if dtype == dt.bool_:
        return [value]
    if dtype == dt.int32:
        return [v for v in (value - 1, value, value + 1) if INT32_MIN <= v <= INT32_MAX]
    x = np.asarray(value, dtype=dtype)
    if not np.isfinite(x):
        return [value]
    bits = x.view(f"u{dtype.itemsize}")
    steps = [(bits + 1).view(dtype), (bits - 1).view(dtype) if bits else x]
    return [value] + [float(s) for s in steps if np.isfinite(s)]


def flush_subnormals(array: np.ndarray) -> np.ndarray:
    """Float subnormals replaced by a zero of the same sign (what XLA:CPU's flush-to-zero
    and denormals-are-zero modes make of them); other dtypes unchanged."""
    array = np.asarray(array)
    if array.dtype not in dt.FLOATING:
        return array
    tiny = float(ml_dtypes.finfo(array.dtype).smallest_normal)
    wide = array.astype(np.float32)
    subnormal = (np.abs(wide) < tiny) & (wide != 0)
    if not subnormal.any():
        return array
    return np.where(subnormal, np.copysign(np.zeros_like(wide), wide), wide).astype(array.dtype)
