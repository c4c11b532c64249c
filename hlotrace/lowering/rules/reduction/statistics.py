"""Lowering rules for hlotrace/ops/reduction/statistics.py.

any/all reduce ``x != 0`` with OR/AND; prod is one multiplying ``stablehlo.reduce`` in
:func:`hlotrace.ops.reduction.statistics.compute_dtype`; var takes two passes (the mean, then the
squared deviations from it); logsumexp shifts by the slice's max (0 where that is not
finite: a NaN the max skips on XLA:CPU's vectorized path still reaches the sum).
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.reduction.basic import reduce
from hlotrace.ops.reduction.basic import reduced_shape
from hlotrace.ops.reduction.statistics import compute_dtype
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def _finish(value, aval: Aval, out: Aval, keepdims) -> object:
    """``value`` (reduced, of ``aval``) converted to the result dtype, reshaped for keepdims."""
    value = hlo.convert(value, aval, out.dtype)
    return hlo.reshape(value, out.shape, out.dtype) if keepdims else value


def _logical(name):
    combiner, init = (stablehlo.OrOp, False) if name == "any" else (stablehlo.AndOp, True)

    def lower(ctx, x, *, axis, keepdims):
        (aval,), out = ctx.in_avals, ctx.out_aval
        truth = hlo.convert(x, aval, dt.bool_)  # x != 0: NaN is true, -0.0 false
        value = reduce(truth, Aval(aval.shape, dt.bool_), axis, init, combiner)
        return _finish(value, Aval(reduced_shape(aval.shape, axis, False), dt.bool_), out, keepdims)

    return lower


for _name in ("any", "all"):
    rule(_name)(_logical(_name))


@rule("prod")
def _prod(ctx, x, *, axis, keepdims):
    (aval,), out = ctx.in_avals, ctx.out_aval
    acc = compute_dtype("prod", aval.dtype)
    value = reduce(hlo.convert(x, aval, acc), Aval(aval.shape, acc), axis, 1, stablehlo.MulOp)
    return _finish(value, Aval(reduced_shape(aval.shape, axis, False), acc), out, keepdims)


@rule("var")
def _var(ctx, x, *, axis, ddof, keepdims):
    (aval,), out = ctx.in_avals, ctx.out_aval
    acc = compute_dtype("var", aval.dtype)
    wide = Aval(aval.shape, acc)
    shape = reduced_shape(aval.shape, axis, False)
    kept = [d for d in range(len(aval.shape)) if d not in axis]
    count = math.prod(aval.shape[a] for a in axis)
    value = hlo.convert(x, aval, acc)
    total = reduce(value, wide, axis, 0, stablehlo.AddOp)
    mean = stablehlo.DivOp(total, hlo.constant(count, acc, shape)).result
    deviation = stablehlo.SubtractOp(value, hlo.broadcast_in_dim(mean, aval.shape, kept)).result
    squares = reduce(stablehlo.MulOp(deviation, deviation).result, wide, axis, 0, stablehlo.AddOp)
    result = stablehlo.DivOp(squares, hlo.constant(max(count - ddof, 0), acc, shape)).result
    return _finish(result, Aval(shape, acc), out, keepdims)


@rule("logsumexp")
def _logsumexp(ctx, x, *, axis, keepdims):
    (aval,), out = ctx.in_avals, ctx.out_aval
    acc = compute_dtype("logsumexp", aval.dtype)
    wide = Aval(aval.shape, acc)
    shape = reduced_shape(aval.shape, axis, False)
    kept = [d for d in range(len(aval.shape)) if d not in axis]
    value = hlo.convert(x, aval, acc)
    peak = reduce(value, wide, axis, -np.inf, stablehlo.MaxOp)
    peak = hlo.select(stablehlo.IsFiniteOp(peak).result, peak, hlo.constant(0, acc, shape))
    shifted = stablehlo.SubtractOp(value, hlo.broadcast_in_dim(peak, aval.shape, kept)).result
    total = reduce(stablehlo.ExpOp(shifted).result, wide, axis, 0, stablehlo.AddOp)
    result = stablehlo.AddOp(stablehlo.LogOp(total).result, peak).result
    return _finish(result, Aval(shape, acc), out, keepdims)
