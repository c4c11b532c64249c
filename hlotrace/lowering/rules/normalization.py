"""Lowering rules for hlotrace/ops/normalization.py.

Both primitives compute in float32 for float16/bfloat16 (their own dtype otherwise) and
round once. ``layer_norm`` subtracts the first element of each slice before the two
``reduce`` passes (mean, then mean of squared deviations), as the reference does; the
scale is ``rsqrt(var + eps)``.
"""

from __future__ import annotations

import math

import hlotrace.lowering.hlo as hlo
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.reduction.basic import reduce
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def _spread(value, shape, axis):
    """Broadcast a value reduced over ``axis`` back to ``shape``."""
    keep = [d for d in range(len(shape)) if d not in axis]
    return hlo.broadcast_in_dim(value, shape, keep)


def _mean(value, wide: Aval, axis, count):
    total = reduce(value, wide, axis, 0.0, stablehlo.AddOp)
    reduced = [d for i, d in enumerate(wide.shape) if i not in axis]
    return stablehlo.DivOp(total, hlo.constant(count, wide.dtype, reduced)).result


@rule("layer_norm")
def _layer_norm(ctx, x, *, axis, eps):
    (aval,) = ctx.in_avals
    shape = aval.shape
    if 0 in shape:
        return x
    wide = Aval(shape, compute_dtype(aval.dtype))
    value = hlo.convert(x, aval, wide.dtype)
    rank = len(shape)
    limits = [1 if d in axis else shape[d] for d in range(rank)]
    first = stablehlo.SliceOp(value, [0] * rank, limits, [1] * rank).result
    first = hlo.reshape(first, [shape[d] for d in range(rank) if d not in axis], wide.dtype)
    shifted = stablehlo.SubtractOp(value, _spread(first, shape, axis)).result
    count = math.prod(shape[d] for d in axis)
    centered = stablehlo.SubtractOp(shifted, _spread(_mean(shifted, wide, axis, count), shape, axis)).result
    var = _mean(stablehlo.MulOp(centered, centered).result, wide, axis, count)
    reduced = [shape[d] for d in range(rank) if d not in axis]
    scale = stablehlo.RsqrtOp(stablehlo.AddOp(var, hlo.constant(eps, wide.dtype, reduced)).result).result
    result = stablehlo.MulOp(centered, _spread(scale, shape, axis)).result
    return hlo.convert(result, wide, aval.dtype)


@rule("batch_norm_inference")
def _batch_norm_inference(ctx, x, mean, var, *, eps):
    aval, mean_aval, var_aval = ctx.in_avals
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    channels = (aval.shape[1],)
    value = hlo.convert(x, aval, wide.dtype)
    spread = hlo.broadcast_in_dim(hlo.convert(mean, mean_aval, wide.dtype), aval.shape, [1])
    if hlo.is_zero_constant(mean, -1.0):
        # x - (-0.0) is x + 0.0 (-0.0 becomes +0.0), which XLA would fold to x.
        centered = hlo.plus_zero(value, wide)
    elif hlo.is_zero_constant(x, 1.0):
        # +0.0 - mean is -mean except that it is +0.0 for either zero mean; XLA folds it to
        # -mean, keeping -0.0 (seed 454817280: x all zeros captured, mean [0, -0]).
        centered = hlo.plus_zero(stablehlo.NegOp(spread).result, wide)
    else:
        centered = stablehlo.SubtractOp(value, spread).result
    var = hlo.convert(var, var_aval, wide.dtype)
    scale = stablehlo.RsqrtOp(stablehlo.AddOp(var, hlo.constant(eps, wide.dtype, channels)).result).result
    result = stablehlo.MulOp(centered, hlo.broadcast_in_dim(scale, aval.shape, [1])).result
    return hlo.convert(result, wide, aval.dtype)
