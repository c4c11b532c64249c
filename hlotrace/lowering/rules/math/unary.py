"""Lowering rules for hlotrace/ops/math/unary.py.

Float functions compute float16/bfloat16 in float32 and round once, like the references.
sinh and cosh switch to exp(|x|/2)**2 / 2 for large |x| (chlo's versions lose ~1e-5 of
relative accuracy above |x| = 33 in float32 and overflow just below the threshold); sign
and the rounding ops pass integers through; the predicates of integers are constants.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.math import SINH_COSH_SPLIT, compute_dtype
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import chlo, stablehlo


def in_compute_dtype(ctx, fn):
    """``fn(x)`` on the single operand converted to the compute dtype of the (float) result,
    rounded to the result dtype once."""
    (aval,), out = ctx.in_avals, ctx.out_aval

    def lower(x):
        wide = Aval(out.shape, compute_dtype(out.dtype))
        return hlo.convert(fn(hlo.convert(x, aval, wide.dtype), wide), wide, out.dtype)

    return lower


def _float_unary(build):
    def lower(ctx, x):
        return in_compute_dtype(ctx, build)(x)

    return lower


rule("log1p")(_float_unary(lambda x, aval: stablehlo.Log1pOp(x).result))
rule("expm1")(_float_unary(lambda x, aval: stablehlo.Expm1Op(x).result))
rule("erf")(_float_unary(lambda x, aval: chlo.ErfOp(x).result))
rule("tan")(_float_unary(lambda x, aval: stablehlo.TanOp(x).result))
rule("arctan")(_float_unary(lambda x, aval: stablehlo.Atan2Op(x, hlo.constant(1, aval.dtype, aval.shape)).result))
rule("asin")(_float_unary(lambda x, aval: chlo.AsinOp(x).result))
rule("acos")(_float_unary(lambda x, aval: chlo.AcosOp(x).result))


def _asinh(x, aval):
    """asinh, with a zero returned as itself: XLA's constant folder gives asinh(-0.0) = +0.0
    for a splat constant (at run time XLA keeps the sign; NumPy does too)."""
    zero = hlo.compare(x, hlo.constant(0, aval.dtype, aval.shape), "EQ", aval.dtype)
    return hlo.select(zero, x, chlo.AsinhOp(x).result)


rule("asinh")(_float_unary(_asinh))
rule("acosh")(_float_unary(lambda x, aval: chlo.AcoshOp(x).result))
rule("atanh")(_float_unary(lambda x, aval: chlo.AtanhOp(x).result))
rule("reciprocal")(_float_unary(lambda x, aval: stablehlo.DivOp(hlo.constant(1, aval.dtype, aval.shape), x).result))


def _half_exp_squared(x, aval):
    """exp(|x|) / 2 as h * (h / 2) with h = exp(|x| / 2): |x| / 2 is exact and h stays finite
    up to the result's own overflow (exp(|x| + log(1/2)) rounds the sum)."""
    half = hlo.constant(0.5, aval.dtype, aval.shape)
    h = stablehlo.ExpOp(stablehlo.MulOp(stablehlo.AbsOp(x).result, half).result).result
    return stablehlo.MulOp(h, stablehlo.MulOp(h, half).result).result


def _large(x, aval):
    split = hlo.constant(SINH_COSH_SPLIT, aval.dtype, aval.shape)
    return hlo.compare(stablehlo.AbsOp(x).result, split, "GT", aval.dtype)


def _sinh(x, aval):
    big = _half_exp_squared(x, aval)
    negative = hlo.compare(x, hlo.constant(0, aval.dtype, aval.shape), "LT", aval.dtype)
    big = hlo.select(negative, stablehlo.NegOp(big).result, big)
    return hlo.select(_large(x, aval), big, chlo.SinhOp(x).result)


def _cosh(x, aval):
    return hlo.select(_large(x, aval), _half_exp_squared(x, aval), chlo.CoshOp(x).result)


rule("sinh")(_float_unary(_sinh))
rule("cosh")(_float_unary(_cosh))


@rule("square")
def _square(ctx, x):
    return stablehlo.MulOp(x, x).result


def _rounding(op_class):
    def lower(ctx, x):
        if ctx.in_avals[0].dtype not in dt.FLOATING:
            return x  # integers and bools are already integral
        return op_class(x).result

    return lower


rule("floor")(_rounding(stablehlo.FloorOp))
rule("ceil")(_rounding(stablehlo.CeilOp))
rule("round")(_rounding(stablehlo.RoundNearestEvenOp))


@rule("sign")
def _sign(ctx, x):
    (aval,) = ctx.in_avals
    signs = stablehlo.SignOp(x).result
    if aval.dtype not in dt.FLOATING:
        return signs
    # stablehlo.sign(-0.0) is -0.0; NumPy 2 gives +0.0 for both zeros (NaN stays NaN). The
    # zero test is on the sign, not on x: XLA:CPU may fold a compare of a captured subnormal
    # constant (not zero) while computing its sign from the flushed -0.0 (seed 454817280).
    return hlo.plus_zero(signs, aval)


def _predicate(build, integer_value: bool):
    def lower(ctx, x):
        (aval,) = ctx.in_avals
        if aval.dtype not in dt.FLOATING:
            return hlo.constant(integer_value, dt.bool_, aval.shape)
        return build(x, aval)

    return lower


rule("isnan")(_predicate(lambda x, aval: hlo.compare(x, x, "NE", aval.dtype), False))
rule("isinf")(
    _predicate(
        lambda x, aval: hlo.compare(
            stablehlo.AbsOp(x).result, hlo.constant(float("inf"), aval.dtype, aval.shape), "EQ", aval.dtype
        ),
        False,
    )
)
rule("isfinite")(_predicate(lambda x, aval: stablehlo.IsFiniteOp(x).result, True))
