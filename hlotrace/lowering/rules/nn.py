"""Lowering rules for hlotrace/ops/nn.py.

relu and clip are compares and selects (not max/min, whose sign of zero at ties XLA and
NumPy order differently), so they give exactly the reference's result; sigmoid and
log_softmax compute in float32 for float16/bfloat16 and round once, like the references.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.reduction.basic import reduce
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


@rule("relu")
def _relu(ctx, x):
    (aval,) = ctx.in_avals
    zero = hlo.constant(0, aval.dtype, aval.shape)
    # x <= 0 is false for NaN (kept) and true for -0.0 (which becomes +0.0).
    return hlo.select(hlo.compare(x, zero, "LE", aval.dtype), zero, x)


@rule("sigmoid")
def _sigmoid(ctx, x):
    (aval,) = ctx.in_avals
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    value = stablehlo.LogisticOp(hlo.convert(x, aval, wide.dtype)).result
    return hlo.convert(value, wide, aval.dtype)


@rule("log_softmax")
def _log_softmax(ctx, x, *, axis):
    (aval,) = ctx.in_avals
    if 0 in aval.shape:
        return x
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    value = hlo.convert(x, aval, wide.dtype)
    keep = [d for d in range(len(aval.shape)) if d != axis]
    # A NaN the max misses (XLA:CPU's vectorized max skips NaN) still reaches the sum.
    peak = reduce(value, wide, (axis,), float("-inf"), stablehlo.MaxOp)
    shifted = stablehlo.SubtractOp(value, hlo.broadcast_in_dim(peak, aval.shape, keep)).result
    total = reduce(stablehlo.ExpOp(shifted).result, wide, (axis,), 0.0, stablehlo.AddOp)
    log_total = stablehlo.LogOp(total).result
    result = stablehlo.SubtractOp(shifted, hlo.broadcast_in_dim(log_total, aval.shape, keep)).result
    return hlo.convert(result, wide, aval.dtype)


@rule("one_hot")
def _one_hot(ctx, labels, *, num_classes, dtype):
    (aval,), out = ctx.in_avals, ctx.out_aval
    rank = len(aval.shape)
    classes = stablehlo.IotaOp(hlo.tensor_type(out.shape, aval.dtype), rank).result
    spread = hlo.broadcast_in_dim(labels, out.shape, list(range(rank)))
    hot = hlo.compare(spread, classes, "EQ", aval.dtype)
    return hlo.convert(hot, Aval(out.shape, dt.bool_), dtype)


@rule("clip")
def _clip(ctx, x, *, min, max):  # noqa: A002  (the attribute names)
    (aval,), out = ctx.in_avals, ctx.out_aval
    value = hlo.convert(x, aval, out.dtype)
    if min is not None:
        lo = hlo.constant(min, out.dtype, out.shape)
        value = hlo.select(hlo.compare(value, lo, "LT", out.dtype), lo, value)
    if max is not None:
        hi = hlo.constant(max, out.dtype, out.shape)
        value = hlo.select(hlo.compare(value, hi, "GT", out.dtype), hi, value)
    return value
