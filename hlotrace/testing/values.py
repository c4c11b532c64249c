"""Element values for the sample strategies: general values, per-dtype boundaries, specials.

Wrong lowering rules hide at the edges of a dtype: a comparison done in float32 instead of
int32 is wrong only above 2**24, an int32 max started at -(2**31 - 1) only for -2**31, a
rule that loses the sign of zero only on -0.0. Element strategies here therefore mix

- general values in the op's range (most elements: the arithmetic must stay tested),
- boundary values of the dtype inside that range (:func:`boundary_values`), and
- special values (NaN, ±inf, ±0.0) where the op admits them,

at rates (:class:`Values`) that put several of each in a typical run of 25 examples.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from hlotrace import dtypes as dt

SPECIAL_FLOATS = (float("nan"), float("inf"), float("-inf"), -0.0, 0.0)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# int32 values a rule gets wrong when it computes in float32 (exact up to 2**24 only) or
# starts a max/min at the wrong end of the range.
INT32_BOUNDARIES = (
    INT32_MIN,
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
    INT32_MAX,
)  # the extremes twice: they decide max/min start values and wraparound

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# int64 values a rule gets wrong when it computes in float64 (exact up to 2**53 only), in
# int32 (values just past its range) or starts a max/min at the wrong end of the range.
INT64_BOUNDARIES = (
    INT64_MIN,
    INT64_MIN,
    INT64_MIN + 1,
    -(2**53) - 1,
    -(2**53),
    -(2**53) + 1,
    INT32_MIN - 1,
    INT32_MIN,
    -2,
    -1,
    0,
    1,
    2,
    INT32_MAX,
    INT32_MAX + 1,
    2**53 - 1,
    2**53,
    2**53 + 1,
    INT64_MAX - 1,
    INT64_MAX,
    INT64_MAX,
)
INT_BOUNDARIES = {dt.int32: INT32_BOUNDARIES, dt.int64: INT64_BOUNDARIES}


# Python scalars as written in programs, by dtype kind (bfloat16's kind is "V").
_FLOAT_LITERALS = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5)
LITERALS = {"b": (False, True), "i": (0, 1, -1, 2), "f": _FLOAT_LITERALS, "V": _FLOAT_LITERALS}


def float_boundaries(dtype) -> tuple[float, ...]:
    """Finite edge values of a float dtype: signed zeros, subnormals, the smallest normal,
    values around 1 and 2**24, and the largest finite values (all exactly representable)."""
    info = ml_dtypes.finfo(dtype)
    tiny, sub, big, eps = float(info.smallest_normal), float(info.smallest_subnormal), float(info.max), float(info.eps)
    values = [0.0, -0.0, sub, -sub, tiny - sub, tiny, -tiny, 0.5, -1.0, 1.0, 1.0 + eps, 1.0 - eps / 2]
    values += [2.0**24 - 1, 2.0**24, -(2.0**24), 2.0**24 + 2, big, -big, big / 2]
    if np.dtype(dtype) == dt.float64:  # where float64 stops holding every integer
        values += [2.0**53 - 1, 2.0**53, -(2.0**53), 2.0**53 + 2]
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
    values = INT_BOUNDARIES[dtype] if dtype in dt.INTEGER else float_boundaries(dtype)
    lo = -np.inf if low is None else low
    hi = np.inf if high is None else high
    return tuple(v for v in values if lo <= v <= hi)


@dataclass(frozen=True)
class Values:
    """How the elements of ``dtype`` arrays and scalars are drawn, at calibrated rates.

    Each element is, independently: a special value (NaN, ±inf, ±0.0; floats, if
    ``special``) with probability ``special_rate``; a boundary value of the dtype inside
    [low, high] with ``boundary_rate``; else a general value: floats uniform in
    [low, high] (on the grid of multiples of ``2**-grid_bits`` if set), integers half in
    -10..10 and half anywhere in [low, high], bool either.

    The draws come from a NumPy generator seeded by hypothesis, not from one hypothesis
    choice per element: hypothesis favours its simplest choices, which would make the
    first special value and small arrays far more common than the rates say.
    """

    dtype: np.dtype
    low: float | None = None
    high: float | None = None
    special: bool = True
    boundary_rate: float = 1 / 4
    special_rate: float = 2 / 16
    grid_bits: int | None = None
    edges: tuple | None = None  # replaces the boundary values (reductions' extreme fills)

    def bounds(self) -> tuple:
        if self.dtype in dt.INTEGER:
            info = np.iinfo(self.dtype)
            low, high = info.min if self.low is None else self.low, info.max if self.high is None else self.high
            return int(max(low, info.min)), int(min(high, info.max))
        low, high = -10.0 if self.low is None else self.low, 10.0 if self.high is None else self.high
        finite = float(ml_dtypes.finfo(self.dtype).max) if self.dtype in dt.FLOATING else np.inf
        return max(low, -finite), min(high, finite)

    def boundaries(self) -> tuple:
        """Boundary values in range (all of the dtype's when no bound was given)."""
        if self.edges is not None:
            return self.edges
        if self.low is None and self.high is None:
            return boundary_values(self.dtype)
        return boundary_values(self.dtype, *self.bounds())

    def general(self, rng: np.random.Generator, size: int) -> np.ndarray:
        low, high = self.bounds()
        if self.dtype == dt.bool_:
            return rng.integers(0, 2, size).astype(bool)
        if self.dtype in dt.INTEGER:
            small = rng.integers(max(low, -10), min(high, 10) + 1, size) if max(low, -10) <= min(high, 10) else None
            wide = rng.integers(low, high, size, endpoint=True, dtype=np.int64)
            return wide if small is None else np.where(rng.random(size) < 0.5, small, wide)
        if self.grid_bits is not None:
            scale = 2.0**self.grid_bits
            return rng.integers(int(np.ceil(low * scale)), int(np.floor(high * scale)), size, endpoint=True) / scale
        return rng.uniform(low, high, size)

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` elements, as an array of ``dtype`` (float32 holding bfloat16 values)."""
        wide = np.float32 if self.dtype == dt.bfloat16 else self.dtype
        out = self.general(rng, size).astype(np.float64 if self.dtype in dt.FLOATING else wide)
        choice = rng.random(size)
        edge = self.special_rate if self.special and self.dtype in dt.FLOATING else 0.0
        for values, rate in ((SPECIAL_FLOATS, edge), (self.boundaries(), self.boundary_rate)):
            picked = choice < rate if values else np.zeros(size, bool)
            if picked.any():
                out[picked] = np.asarray(values, dtype=out.dtype)[rng.integers(0, len(values), int(picked.sum()))]
            choice = np.where(picked, 2.0, choice - rate)  # 2.0: taken, never below a rate again
        with np.errstate(over="ignore"):
            return out.astype(self.dtype).astype(wide)

    def scalar(self, rng: np.random.Generator):
        """One element as a Python bool, int or float; a third of them are the literals
        people write (``x + 0``, ``x * 1``, ``x / 2``), which XLA's simplifier rewrites."""
        literals = [v for v in LITERALS[self.dtype.kind] if self.bounds()[0] <= v <= self.bounds()[1]]
        if literals and rng.random() < 1 / 3:
            value = literals[rng.integers(0, len(literals))]
        else:
            value = self.draw(rng, 1)[0]
        if self.dtype == dt.bool_:
            return bool(value)
        return int(value) if self.dtype in dt.INTEGER else float(value)


def nudge(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each element moved one step up or down in its dtype (one ulp for floats, one unit for
    integers, clipped at the ends of the range; NaN and ±inf stay; bools flip), so that
    operands meet as near-ties: the values a comparison done in a narrower type confuses."""
    array = np.asarray(array)
    step = rng.choice(np.array([-1, 1]), size=array.shape)
    if array.dtype == dt.int32:
        return np.clip(array.astype(np.int64) + step, INT32_MIN, INT32_MAX).astype(dt.int32)
    if array.dtype == dt.int64:
        at_end = ((array == INT64_MAX) & (step > 0)) | ((array == INT64_MIN) & (step < 0))
        return np.where(at_end, array, array + step).astype(dt.int64)
    if array.dtype == dt.bool_:
        return ~array
    unsigned = np.dtype(f"u{array.dtype.itemsize}")
    bits = np.ascontiguousarray(array).view(unsigned).astype(np.int64)
    moved = np.clip(bits + step, 0, np.iinfo(unsigned).max).astype(unsigned).view(array.dtype)
    # A step past the largest finite value lands on inf/NaN bits: such elements stay.
    with np.errstate(invalid="ignore", over="ignore"):
        keep = np.isfinite(array.astype(np.float64)) & np.isfinite(moved.astype(np.float64))
    return np.where(keep, moved, array)


def subnormals(array) -> np.ndarray:
    """Boolean mask of the float subnormals in ``array`` (all False for other dtypes)."""
    array = np.asarray(array)
    if array.dtype not in dt.FLOATING:
        return np.zeros(array.shape, bool)
    wide = np.abs(array.astype(np.float64))
    return (wide < float(ml_dtypes.finfo(array.dtype).smallest_normal)) & (wide != 0)


def flush_subnormals(array: np.ndarray) -> np.ndarray:
    """Float subnormals replaced by a zero of the same sign (what XLA:CPU's flush-to-zero
    and denormals-are-zero modes make of them); the same array if it has none."""
    array = np.asarray(array)
    mask = subnormals(array)
    if not mask.any():
        return array
    return np.where(mask, np.copysign(np.zeros(array.shape, np.float64), array.astype(np.float64)), array).astype(
        array.dtype
    )
