"""atan2, logaddexp, mod and floor_divide: the binary ops of the math family (semantics: the
docstring of :mod:`hlotrace.ops.math`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, broadcast_shapes
from hlotrace.ops.elementwise import float_result_dtype
from hlotrace.ops.math.base import FAMILY, NUMERIC_DTYPES, _no_attrs, _zero_vjp, compute_dtype
from hlotrace.ops.math.samples import sometimes_other_dtypes
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op

__all__ = ["atan2", "floor_divide", "logaddexp", "mod"]

# The gradient check's finite differences take a step h of 1e-6 |v| (at least 1e-6) and read
# x // y (and mod) as a slope where its steps are finer than 2h: that needs y**2 / |x| > 2h.
# So nonzero float divisors below MIN_DIVISOR in magnitude are drawn as ±MIN_DIVISOR, and
# integer operands of a float division are clipped to ±MAX_MIXED_INT (float ones are small:
# the check replaces those above 1e4). Subnormal divisors are not compared anyway (see
# SUBNORMAL_INPUTS_UNCHECKED); overflowing quotients still come from large x.
MIN_DIVISOR = 0.25
MAX_MIXED_INT = 100
# atan2 turns by pi within a step h of the origin: operand pairs nearer are moved away.
ORIGIN_RADIUS = 2.0**-8


def _promoted(a: Aval, b: Aval) -> Aval:
    return Aval(broadcast_shapes(a.shape, b.shape), dt.promote(a.dtype, b.dtype))


def _atan2_infer(a: Aval, b: Aval) -> Aval:
    out = _promoted(a, b)
    return Aval(out.shape, float_result_dtype(out.dtype))


def _atan2_reference(a, b):
    common = float_result_dtype(dt.promote(a.dtype, b.dtype))
    return np.arctan2(a.astype(common, copy=False), b.astype(common, copy=False))


def _atan2_vjp(ct, out, x, y):
    # d atan2(x, y) = (y dx - x dy) / (x² + y²), in the result dtype (int operands squared
    # in their own dtype would wrap).
    x = x if x.dtype == out.dtype else F.astype(x, out.dtype)
    y = y if y.dtype == out.dtype else F.astype(y, out.dtype)
    norm = F.add(F.square(x), F.square(y))
    return F.divide(F.multiply(ct, y), norm), F.negative(F.divide(F.multiply(ct, x), norm))


def _off_origin(x, y):
    """``x`` (or, when only ``y`` is a float array, ``y``) moved to ±ORIGIN_RADIUS (the sign
    kept) where both operands are below it in magnitude. Near the origin atan2 turns by pi
    within a finite-difference step, which the gradient check reads as a slope of pi / 2h
    (at x = ±0, y = +0 the jump is symmetric, so it is not seen as a kink)."""
    full = np.broadcast_shapes(np.shape(x), np.shape(y))
    with np.errstate(invalid="ignore"):
        near = (np.abs(np.broadcast_to(x, full).astype(np.float64)) < ORIGIN_RADIUS) & (
            np.abs(np.broadcast_to(y, full).astype(np.float64)) < ORIGIN_RADIUS
        )
    for moved, value in ((0, x), (1, y)):
        if isinstance(value, np.ndarray) and value.dtype in dt.FLOATING:
            if near.any():
                wide = np.broadcast_to(value, full).astype(np.float64)
                value = np.where(near, np.copysign(ORIGIN_RADIUS, wide), wide).astype(value.dtype)
            return (value, y) if moved == 0 else (x, value)
    return x, y


def _atan2_sample(s):
    """Elementwise operands, int32 and float primary dtypes; one sample in four with a bool
    or int64 operand; none near the origin (see _off_origin)."""
    mixed = sometimes_other_dtypes(lambda s: s.elementwise(2, (dt.int32, *dt.FLOATING)), (dt.bool_, dt.int64))

    @s.st.composite
    def sample(draw):
        return s.OpSample(_off_origin(*draw(mixed(s)).args))

    return sample()


def _logaddexp_reference(a, b):
    out = float_result_dtype(dt.promote(a.dtype, b.dtype))
    wide = compute_dtype(out)  # float16/bfloat16 in float32, rounded once (NumPy's half loop)
    return np.logaddexp(a.astype(wide, copy=False), b.astype(wide, copy=False)).astype(out, copy=False)


def _logaddexp_vjp(ct, out, x, y):
    # d/dx log(e^x + e^y) = e^x / (e^x + e^y) = sigmoid(x - y), and sigmoid(y - x) for y.
    x = x if x.dtype == out.dtype else F.astype(x, out.dtype)
    y = y if y.dtype == out.dtype else F.astype(y, out.dtype)
    return F.multiply(ct, F.sigmoid(F.subtract(x, y))), F.multiply(ct, F.sigmoid(F.subtract(y, x)))


def _logaddexp_sample(s):
    """Elementwise operands (int32 and float primary dtypes, one sample in four with a bool
    or int64 operand), on half the samples shifted far from 0 by one common offset (±100 to
    ±1e30: exp of either operand overflows or underflows, only the max shift stays finite);
    ties and near-ties (equal infinities among them) come from the correlated operands."""
    base = sometimes_other_dtypes(lambda s: s.elementwise(2, (dt.int32, *dt.FLOATING)), (dt.bool_, dt.int64))

    @s.st.composite
    def sample(draw):
        x, y = draw(base(s)).args
        rng = s.generator(draw)
        if rng.random() < 1 / 2:
            offset = float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.integers(2, 31))
            shifted = []
            for v in (x, y):
                if isinstance(v, np.ndarray) and v.dtype in dt.FLOATING:
                    with np.errstate(over="ignore"):
                        v = (v.astype(np.float64) + offset).astype(v.dtype)
                shifted.append(v)
            x, y = shifted
        return s.OpSample((x, y))

    return sample()


def _division_infer(a: Aval, b: Aval) -> Aval:
    out = _promoted(a, b)
    if out.dtype == dt.bool_:
        raise ShapeDtypeError("is not defined for two bool tensors (NumPy gives int8, which hlotrace lacks)")
    return out


def _division_reference(ufunc):
    def reference(a, b):
        out = dt.promote(a.dtype, b.dtype)
        wide = compute_dtype(out)  # NumPy's and ml_dtypes' float16/bfloat16 loops compute in float32
        # Integer division by zero gives 0 and INT_MIN // -1 wraps, as in NumPy (warnings muted).
        return ufunc(a.astype(wide, copy=False), b.astype(wide, copy=False)).astype(out, copy=False)

    return reference


def _mod_vjp(ct, out, x, y):
    # mod(x, y) = x - y * floor(x / y): d/dx = 1, d/dy = -floor_divide(x, y).
    return ct, F.negative(F.multiply(ct, F.floor_divide(x, y)))


def _no_tiny(y):
    if isinstance(y, float) and 0 < abs(y) < MIN_DIVISOR:
        return math.copysign(MIN_DIVISOR, y)
    if isinstance(y, np.ndarray) and y.dtype in dt.FLOATING:
        wide = y.astype(np.float64)
        tiny = (wide != 0) & (np.abs(wide) < MIN_DIVISOR)
        return np.where(tiny, np.copysign(MIN_DIVISOR, wide), wide).astype(y.dtype)
    return y


def _small_int(value):
    if isinstance(value, np.ndarray) and value.dtype in dt.INTEGER:
        return np.clip(value, -MAX_MIXED_INT, MAX_MIXED_INT).astype(value.dtype)
    if type(value) is int:
        return max(-MAX_MIXED_INT, min(MAX_MIXED_INT, value))
    return value


def _plant_snaps(rng, x, y, out):
    """``x`` with each element replaced, where one of 64 random candidates ±(3..40 + u) * y
    (|u| < 1/2) has it, by one whose quotient (x - fmod(x, y)) / y, in the compute dtype of
    ``out``, rounds to just below an integer: the cases only NumPy's snap to the nearest
    integer gets right (a few % of the candidates in float32 when y has a full mantissa)."""
    full = np.broadcast_shapes(x.shape, np.shape(y))
    wide = compute_dtype(out)
    b = np.broadcast_to(np.asarray(y).astype(out).astype(wide), full)
    quotients = rng.integers(3, 41, (64, *full)) + rng.uniform(-0.5, 0.5, (64, *full))
    with np.errstate(all="ignore"):
        candidates = (rng.choice([-1.0, 1.0], (64, *full)) * quotients * b.astype(np.float64)).astype(x.dtype)
    a = candidates.astype(out).astype(wide)
    with np.errstate(all="ignore"):
        rem = np.fmod(a, b)
        div = (a - rem) / b
        div = np.where((rem != 0) & ((rem < 0) != (b < 0)), div - 1, div)
        snaps = div - np.floor(div) > 0.5
    first = np.argmax(snaps, axis=0)
    found = np.take_along_axis(snaps, first[None], 0)[0]
    picked = np.take_along_axis(candidates, first[None], 0)[0]
    return np.where(found, picked, np.broadcast_to(x, full)).astype(x.dtype)


def _division_sample(s):
    """Elementwise operands (see MIN_DIVISOR); on a quarter of the float samples, divisors
    of a full mantissa and x whose quotient needs NumPy's snap (see _plant_snaps); else on
    about half the samples each, exact multiples planted in x (x = k * y, where signed zeros
    decide) and for integers INT_MIN in x against -1 and 0 in y (wrapping, division by 0)."""

    @s.st.composite
    def sample(draw):
        x, y = draw(s.elementwise(2, NUMERIC_DTYPES)).args
        rng = s.generator(draw)
        y = _no_tiny(y)
        kinds = [a.dtype if isinstance(a, np.ndarray) else dt.Weak(type(a)) for a in (x, y)]
        out = dt.promote(*kinds)
        if out in dt.FLOATING:
            x, y = _small_int(x), _small_int(y)
            if isinstance(x, np.ndarray) and x.dtype == out and rng.random() < 1 / 4:
                # Divisors with a full mantissa (a short one divides exactly) and x beside them
                # whose quotient needs the snap: the only place a wrong snap shows.
                y = (rng.choice([-1.0, 1.0], x.shape) * rng.uniform(0.3, 3.0, x.shape)).astype(x.dtype)
                return s.OpSample((_plant_snaps(rng, x, y, out), y))
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)) or x.dtype != y.dtype:
            return s.OpSample((x, y))
        full = np.broadcast_shapes(x.shape, y.shape)
        if x.shape == full and rng.random() < 1 / 2:
            k = rng.integers(-3, 4, full).astype(x.dtype)
            with np.errstate(all="ignore"):
                multiples = (np.broadcast_to(y, full) * k).astype(x.dtype)
            x = np.where(rng.random(full) < 1 / 2, multiples, x)
        if x.dtype in dt.INTEGER and rng.random() < 1 / 2:
            x = np.where(rng.random(x.shape) < 1 / 4, np.iinfo(x.dtype).min, x).astype(x.dtype)
            y = np.where(rng.random(y.shape) < 1 / 4, rng.choice(np.array([-1, 0], y.dtype), y.shape), y)
        return s.OpSample((x, y))

    return sample()


register_op(
    OpDef(
        name="atan2",
        family=FAMILY,
        reference=_atan2_reference,
        infer=_atan2_infer,
        canonicalize=_no_attrs,
        sample=_atan2_sample,
        vjp=_atan2_vjp,
        doc="arctan(x / y) in the quadrant of the point (y, x) (NumPy's arctan2), in [-pi, pi]",
    )
)
register_op(
    OpDef(
        name="logaddexp",
        family=FAMILY,
        reference=_logaddexp_reference,
        infer=_atan2_infer,
        canonicalize=_no_attrs,
        sample=_logaddexp_sample,
        vjp=_logaddexp_vjp,
        doc="log(exp(x) + exp(y)) without overflow (NumPy's logaddexp); float result",
    )
)
register_op(
    OpDef(
        name="mod",
        family=FAMILY,
        reference=_division_reference(np.mod),
        infer=_division_infer,
        canonicalize=_no_attrs,
        sample=_division_sample,
        vjp=_mod_vjp,
        doc="x % y with the sign of y (NumPy's remainder); integer x % 0 is 0",
    )
)
register_op(
    OpDef(
        name="floor_divide",
        family=FAMILY,
        reference=_division_reference(np.floor_divide),
        infer=_division_infer,
        canonicalize=_no_attrs,
        sample=_division_sample,
        vjp=_zero_vjp,
        doc="x // y rounded toward -inf (NumPy's divmod); integer x // 0 is 0, INT_MIN // -1 wraps",
    )
)


# -- public functions -----------------------------------------------------------------------------


def atan2(x, y):
    """NumPy's ``arctan2(x, y)``: the angle of the point (y, x), in [-pi, pi]. Float result."""
    return apply(OPS["atan2"], x, y)


def logaddexp(x, y):
    """``log(exp(x) + exp(y))`` computed as ``max(x, y) + log1p(exp(-|x - y|))``, so it never
    overflows (NumPy's ``logaddexp``; ``logaddexp(-inf, -inf) == -inf``). Float result."""
    return apply(OPS["logaddexp"], x, y)


def mod(x, y):
    """``x % y`` with the sign of ``y`` (NumPy's ``remainder``; integer ``x % 0`` is 0)."""
    return apply(OPS["mod"], x, y)


def floor_divide(x, y):
    """``x // y``, rounded toward -inf (NumPy; integer ``x // 0`` is 0, ``INT_MIN // -1`` wraps)."""
    return apply(OPS["floor_divide"], x, y)
