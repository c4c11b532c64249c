"""Lowering rules for hlotrace/ops/indexing.py.

getitem's canonical index has one resolved entry per input dim (see the op's module), so
the rule only maps it onto reverse → slice → reshape, skipping the steps that are no-ops.
"""

from __future__ import annotations

from hlotrace.lowering import hlo
from hlotrace.lowering.registry import rule
from hlotrace.ops.indexing import slice_length
from hlotrace.runtime.jaxlib_compat import stablehlo


@rule("getitem")
def _getitem(ctx, x, *, index):
    shape = ctx.in_avals[0].shape
    starts, limits, strides, counts, reversed_dims = [], [], [], [], []
    for entry in (e for e in index if e[0] != "newaxis"):
        dim = shape[len(starts)]
        if entry[0] == "int":
            start, count, step = entry[1], 1, 1
        else:
            start, stop, step = entry[1:]
            count = slice_length(start, stop, step)
        if step < 0:
            # slice has positive strides only: walk the reversed dim, where index i is dim-1-i.
            reversed_dims.append(len(starts))
            start, step = dim - 1 - start, -step
        starts.append(start)
        limits.append(start + (count - 1) * step + 1 if count else start)
        strides.append(step)
        counts.append(count)

    if reversed_dims:
        x = stablehlo.ReverseOp(x, reversed_dims).result
    if starts != [0] * len(shape) or limits != list(shape) or strides != [1] * len(shape):
        x = stablehlo.SliceOp(x, starts, limits, strides).result
    out = ctx.out_aval
    if tuple(counts) == out.shape:
        return x
    return hlo.reshape(x, out.shape, out.dtype)
