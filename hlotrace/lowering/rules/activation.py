"""Lowering rules for hlotrace/ops/activation/ (smooth.py, piecewise.py).

Each rule converts to the compute dtype (float32 for float16/bfloat16), evaluates the
reference's formula with StableHLO ops (erfc through CHLO, which XLA legalizes itself;
``logistic`` for the sigmoids, ``expm1``/``log1p`` where the reference uses them) and rounds
once. The limits at -inf that the products would turn into NaN (``-inf * 0``) are selects.
The piecewise activations are selects on comparisons with x (false for NaN, which then
flows through the arithmetic branch); prelu broadcasts its weight along dim 1.
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.ops.activation import GELU_CUBIC, SQRT_2_OVER_PI, SQRT_HALF, weight_shape
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import chlo, stablehlo


def _widened(ctx, x):
    """``(value in the compute dtype, its aval, a constant maker)`` for the single operand."""
    (aval,) = ctx.in_avals
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    return hlo.convert(x, aval, wide.dtype), wide, lambda value: hlo.constant(value, wide.dtype, wide.shape)


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
    return hlo.narrowed(_normal_cdf(x, const), wide.dtype, ctx.out_aval)


@rule("gelu")
def _gelu(ctx, x, *, approximate):
    x, wide, const = _widened(ctx, x)
    if approximate == "tanh":
        cubic = _mul(_mul(_mul(x, x), x), const(GELU_CUBIC))
        inner = _mul(stablehlo.AddOp(cubic, x).result, const(2 * SQRT_2_OVER_PI))
        value = _mul(x, stablehlo.LogisticOp(inner).result)
    else:
        value = _mul(x, _normal_cdf(x, const))
    return hlo.narrowed(_zero_at_minus_inf(x, value, wide, const), wide.dtype, ctx.out_aval)


@rule("silu")
def _silu(ctx, x):
    x, wide, const = _widened(ctx, x)
    value = _mul(x, stablehlo.LogisticOp(x).result)
    return hlo.narrowed(_zero_at_minus_inf(x, value, wide, const), wide.dtype, ctx.out_aval)


@rule("leaky_relu")
def _leaky_relu(ctx, x, *, negative_slope):
    x, wide, const = _widened(ctx, x)
    negative = _mul(x, const(negative_slope))
    if negative_slope == 0:
        negative = _zero_at_minus_inf(x, negative, wide, const)
    # x > 0 is false for NaN, whose product with the slope is NaN again.
    value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)
    return hlo.narrowed(value, wide.dtype, ctx.out_aval)


@rule("elu")
def _elu(ctx, x, *, alpha):
    x, wide, const = _widened(ctx, x)
    negative = _mul(stablehlo.Expm1Op(x).result, const(alpha))
    value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)
    return hlo.narrowed(value, wide.dtype, ctx.out_aval)


@rule("softplus")
def _softplus(ctx, x, *, beta, threshold):
    x, wide, const = _widened(ctx, x)
    z = _mul(x, const(beta))
    # max(z, 0) + log1p(exp(-|z|)): exp never overflows.
    tail = stablehlo.Log1pOp(stablehlo.ExpOp(stablehlo.NegOp(stablehlo.AbsOp(z).result).result).result).result
    positive = hlo.select(hlo.compare(z, const(0.0), "GT", wide.dtype), z, const(0.0))
    smooth = stablehlo.DivOp(stablehlo.AddOp(positive, tail).result, const(beta)).result
    value = hlo.select(hlo.compare(z, const(threshold), "GT", wide.dtype), x, smooth)
    return hlo.narrowed(value, wide.dtype, ctx.out_aval)


def _greater(x, value, wide, const):
    return hlo.compare(x, const(value), "GT", wide.dtype)


def _relu6(x, wide, const):
    """min(max(x, 0), 6): NaN kept (no compare holds for it), -0.0 made +0.0."""
    is_nan = hlo.compare(x, x, "NE", wide.dtype)
    lower = hlo.select(_greater(x, 0.0, wide, const), x, hlo.select(is_nan, x, const(0.0)))
    return hlo.select(_greater(x, 6.0, wide, const), const(6.0), lower)


@rule("relu6")
def _relu6_rule(ctx, x):
    x, wide, const = _widened(ctx, x)
    return hlo.narrowed(_relu6(x, wide, const), wide.dtype, ctx.out_aval)


@rule("hsigmoid")
def _hsigmoid(ctx, x):
    x, wide, const = _widened(ctx, x)
    shifted = stablehlo.AddOp(x, const(3.0)).result
    return hlo.narrowed(stablehlo.DivOp(_relu6(shifted, wide, const), const(6.0)).result, wide.dtype, ctx.out_aval)


@rule("hswish")
def _hswish(ctx, x):
    x, wide, const = _widened(ctx, x)
    middle = stablehlo.DivOp(_mul(x, stablehlo.AddOp(x, const(3.0)).result), const(6.0)).result
    below = hlo.compare(x, const(-3.0), "LE", wide.dtype)
    value = hlo.select(below, const(0.0), middle)
    value = hlo.select(hlo.compare(x, const(3.0), "GE", wide.dtype), x, value)
    return hlo.narrowed(value, wide.dtype, ctx.out_aval)


@rule("prelu")
def _prelu(ctx, x, weight):
    x_aval, w_aval = ctx.in_avals
    wide = Aval(x_aval.shape, compute_dtype(x_aval.dtype))
    x = hlo.convert(x, x_aval, wide.dtype)
    size = int(np.prod(w_aval.shape, dtype=np.int64))
    shape = weight_shape(len(wide.shape), size)
    slope = hlo.reshape(hlo.convert(weight, w_aval, wide.dtype), shape, wide.dtype)
    slope = hlo.broadcast_in_dim(slope, wide.shape, tuple(range(len(shape))))
    positive = hlo.compare(x, hlo.constant(0.0, wide.dtype, wide.shape), "GT", wide.dtype)
    return hlo.narrowed(hlo.select(positive, x, _mul(x, slope)), wide.dtype, ctx.out_aval)
