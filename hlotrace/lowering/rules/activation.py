"""Lowering rules for hlotrace/ops/activation.py.

Each rule converts to the compute dtype (float32 for float16/bfloat16), evaluates the
reference's formula with StableHLO ops (erfc through CHLO, which XLA legalizes itself;
``logistic`` for the sigmoids, ``expm1``/``log1p`` where the reference uses them) and rounds
once. The limits at -inf that the products would turn into NaN (``-inf * 0``) are selects.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.ops.activation import GELU_CUBIC, SQRT_2_OVER_PI, SQRT_HALF
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import chlo, stablehlo


def _widened(ctx, x):
    """``(value in the compute dtype, its aval, a constant maker)`` for the single operand."""
    (aval,) = ctx.in_avals
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    return hlo.convert(x, aval, wide.dtype), wide, lambda value: hlo.constant(value, wide.dtype, wide.shape)


def _narrowed(ctx, value, wide):
    return hlo.convert(value, wide, ctx.out_aval.dtype)


def _mul(a, b):
    return stablehlo.MulOp(a, b).result


def _normal_cdf(x, const):
    """erfc(-x / sqrt(2)) / 2."""
    scaled = _mul(x, const(-SQRT_HALF))
    return _mul(chlo.ErfcOp(scaled).result, const(0.5))


def _zero_at_minus_inf(x, value, wide, const):
    """``value`` with -0.0 where ``x`` is -inf (the limit of x * f(x) with f -> 0)."""
    return hlo.select(hlo.compare(x, const(float("-inf")), "EQ", wide.dtype), const(-0.0), value)


@rule("normal_cdf")
def _normal_cdf_rule(ctx, x):
    x, wide, const = _widened(ctx, x)
    return _narrowed(ctx, _normal_cdf(x, const), wide)


@rule("gelu")
def _gelu(ctx, x, *, approximate):
    x, wide, const = _widened(ctx, x)
    if approximate == "tanh":
        cubic = _mul(_mul(_mul(x, x), x), const(GELU_CUBIC))
        inner = _mul(stablehlo.AddOp(cubic, x).result, const(2 * SQRT_2_OVER_PI))
        value = _mul(x, stablehlo.LogisticOp(inner).result)
    else:
        value = _mul(x, _normal_cdf(x, const))
    return _narrowed(ctx, _zero_at_minus_inf(x, value, wide, const), wide)


@rule("silu")
def _silu(ctx, x):
    x, wide, const = _widened(ctx, x)
    value = _mul(x, stablehlo.LogisticOp(x).result)
    return _narrowed(ctx, _zero_at_minus_inf(x, value, wide, const), wide)


@rule("leaky_relu")
def _leaky_relu(ctx, x, *, negative_slope):
    x, wide, const = _widened(ctx, x)
    negative = _mul(x, const(negative_slope))
    if negative_slope == 0:
        negative = _zero_at_minus_inf(x, negative, wide, const)
    # x > 0 is false for NaN, whose product with the slope is NaN again.
    value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)
    return _narrowed(ctx, value, wide)


@rule("elu")
def _elu(ctx, x, *, alpha):
    x, wide, const = _widened(ctx, x)
    negative = _mul(stablehlo.Expm1Op(x).result, const(alpha))
    value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)
    return _narrowed(ctx, value, wide)


@rule("softplus")
def _softplus(ctx, x, *, beta, threshold):
    x, wide, const = _widened(ctx, x)
    z = _mul(x, const(beta))
    # max(z, 0) + log1p(exp(-|z|)): exp never overflows.
    tail = stablehlo.Log1pOp(stablehlo.ExpOp(stablehlo.NegOp(stablehlo.AbsOp(z).result).result).result).result
    positive = hlo.select(hlo.compare(z, const(0.0), "GT", wide.dtype), z, const(0.0))
    smooth = stablehlo.DivOp(stablehlo.AddOp(positive, tail).result, const(beta)).result
    value = hlo.select(hlo.compare(z, const(threshold), "GT", wide.dtype), x, smooth)
    return _narrowed(ctx, value, wide)
