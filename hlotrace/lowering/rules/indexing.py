"""Lowering rules for hlotrace/ops/indexing.py.

getitem's canonical index has one resolved entry per input dim (see the op's module), so
the rule only maps it onto reverse → slice → reshape, skipping the steps that are no-ops.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
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


def selection_padding(index, shape):
    """Where a canonical getitem ``index`` of an array of ``shape`` selects, as the pad that puts
    the selection back in place: per indexed dim (newaxis entries skipped) the selected count,
    the pad's low (first position), high (what is left) and interior (step - 1), and the dims a
    negative step reverses. None when the selection is empty."""
    counts, low, high, interior, reversed_dims = [], [], [], [], []
    for entry in index:
        if entry[0] == "newaxis":
            continue  # a size-1 dim the callers' reshape drops
        dim = shape[len(counts)]
        if entry[0] == "int":
            first, count, step = entry[1], 1, 1
        else:
            start, stop, step = entry[1:]
            count = slice_length(start, stop, step)
            first = start + (count - 1) * step if step < 0 else start
            if step < 0:
                reversed_dims.append(len(counts))
                step = -step
        if count == 0:
            return None
        counts.append(count)
        low.append(first)
        interior.append(step - 1)
        high.append(dim - (first + (count - 1) * step + 1))
    return counts, low, high, interior, reversed_dims


@rule("getitem_transpose")
def _getitem_transpose(ctx, x, *, shape, index):
    """Reshape x to one dim per input dim, reverse negative-step dims, then pad with zeros:
    low = first position, interior = step - 1, high = what is left."""
    out = ctx.out_aval
    placement = selection_padding(index, shape)
    if placement is None:
        return hlo.constant(0, out.dtype, out.shape)
    counts, low, high, interior, reversed_dims = placement
    if tuple(counts) != ctx.in_avals[0].shape:
        x = hlo.reshape(x, counts, out.dtype)
    if reversed_dims:
        x = stablehlo.ReverseOp(x, reversed_dims).result
    zero = hlo.constant(0, out.dtype)
    return stablehlo.PadOp(x, zero, low, high, interior).result
