"""Lowering rules for hlotrace/ops/cumulative.py (cumsum, cumprod: the "scan" family).

A scan along an axis of length n is one ``stablehlo.reduce_window`` with a window of n
elements along that axis, stride 1, and n - 1 elements of padding before it (after it
when ``reverse``): output i reduces the window that ends (starts) at element i. It starts
from -0.0 for float sums (the identity that keeps a leading -0.0, as NumPy's first element
is x[0] itself), 0 for integer sums and 1 for products; padding holds the same value.
float16/bfloat16 scan in float32 and are rounded once, like the references.
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.cumulative import accumulation_dtype
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def scan(value: ir.Value, aval: Aval, axis: int, reverse: bool, init, combiner) -> ir.Value:
    """Inclusive scan of ``value`` (of ``aval``) along ``axis`` with ``combiner`` (AddOp,
    MulOp, ...) starting from ``init``, as a ``stablehlo.reduce_window``."""
    n = aval.shape[axis]
    rank = len(aval.shape)
    window = [n if d == axis else 1 for d in range(rank)]
    padding = [[0, 0] for _ in range(rank)]
    padding[axis] = [0, n - 1] if reverse else [n - 1, 0]
    scalar = hlo.tensor_type((), aval.dtype)
    op = stablehlo.ReduceWindowOp(
        [hlo.aval_type(aval)],
        [value],
        [hlo.constant(init, aval.dtype)],
        window,
        window_strides=[1] * rank,
        padding=ir.DenseIntElementsAttr.get(np.asarray(padding, dtype=np.int64)),
    )
    block = op.body.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp([combiner(*block.arguments).result])
    return op.results[0]


def _scan_rule(name):
    combiner = stablehlo.AddOp if name == "cumsum" else stablehlo.MulOp

    def lower(ctx, x, *, axis, reverse, dtype=None):
        (aval,), out = ctx.in_avals, ctx.out_aval
        if axis is None:
            x, axis = hlo.reshape(x, out.shape, aval.dtype), 0
        acc = accumulation_dtype(out.dtype)
        value = hlo.convert(x, Aval(out.shape, aval.dtype), out.dtype)
        value = hlo.convert(value, Aval(out.shape, out.dtype), acc)
        if out.shape[axis] > 1:
            init = (-0.0 if acc in dt.FLOATING else 0) if name == "cumsum" else 1
            value = scan(value, Aval(out.shape, acc), axis, reverse, init, combiner)
        return hlo.convert(value, Aval(out.shape, acc), out.dtype)

    return lower


for _name in ("cumsum", "cumprod"):
    rule(_name)(_scan_rule(_name))
