"""Lowering rules for hlotrace/ops/gather/ (take.py, scatter.py, writes.py).

Negative indices are wrapped first (``i + dim`` where ``i < 0``); what is still out of
range is then clamped by ``stablehlo.gather`` and dropped by ``stablehlo.scatter`` (the ops'
module docstring states it). take/index_add/index_copy index one axis with windows over the
others; take_along_axis and scatter_add address single elements with full index vectors
(an iota per dim, the wrapped index on ``axis``). Scatter-adds of float16/bfloat16 add in
float32 and round once, like the references. masked_fill is a select; setitem pads the
value (and a mask) into place the way getitem_transpose does.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.indexing import selection_padding
from hlotrace.ops.gather.common import compute_dtype, take_shape
from hlotrace.ops.indexing import getitem_infer
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def _wrap(idx, aval: Aval, dim: int):
    """``idx + dim`` where ``idx < 0`` (NumPy's negative indices)."""
    negative = hlo.compare(idx, hlo.constant(0, aval.dtype, aval.shape), "LT", aval.dtype)
    shifted = stablehlo.AddOp(idx, hlo.constant(dim, aval.dtype, aval.shape)).result
    return hlo.select(negative, shifted, idx)


def _index_vectors(idx, aval: Aval, axis: int, operand_shape):
    """Index vectors of shape ``aval.shape + (rank,)``: entry ``d`` is the position along dim
    ``d`` (the wrapped ``idx`` for ``axis``, 0 where the operand's dim is 1 and broadcast)."""
    shape, rank = aval.shape, len(aval.shape)
    column = (*shape, 1)
    parts = []
    for d in range(rank):
        if d == axis:
            part = _wrap(idx, aval, operand_shape[axis])
        elif operand_shape[d] == 1:
            part = hlo.constant(0, aval.dtype, shape)
        else:
            part = stablehlo.IotaOp(hlo.tensor_type(shape, aval.dtype), d).result
        parts.append(hlo.reshape(part, column, aval.dtype))
    return stablehlo.ConcatenateOp(parts, rank).result


def _scatter(out: Aval, operand, indices, updates, dims, combine: str):
    """``stablehlo.scatter`` whose update region adds (``"add"``) or replaces (``"replace"``)."""
    op = stablehlo.ScatterOp(
        [hlo.aval_type(out)],
        [operand],
        indices,
        [updates],
        stablehlo.ScatterDimensionNumbers.get(**dims),
        indices_are_sorted=False,
        unique_indices=False,
    )
    scalar = hlo.tensor_type((), out.dtype)
    block = op.update_computation.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        current, update = block.arguments
        result = stablehlo.AddOp(current, update).result if combine == "add" else update
        stablehlo.ReturnOp([result])
    return op.results[0]


def _scatter_dims(window, inserted, to_operand, index_vector_dim):
    return {
        "update_window_dims": list(window),
        "inserted_window_dims": list(inserted),
        "input_batching_dims": [],
        "scatter_indices_batching_dims": [],
        "scattered_dims_to_operand_dims": list(to_operand),
        "index_vector_dim": index_vector_dim,
    }


@rule("take")
def _take(ctx, x, indices, *, axis):
    (xa, ia), out = ctx.in_avals, ctx.out_aval
    if 0 in out.shape:
        return hlo.constant(0, out.dtype, out.shape)
    rank, k = len(xa.shape), len(ia.shape)
    dims = stablehlo.GatherDimensionNumbers.get(
        offset_dims=[*range(axis), *range(axis + k, rank + k - 1)],
        collapsed_slice_dims=[axis],
        operand_batching_dims=[],
        start_indices_batching_dims=[],
        start_index_map=[axis],
        index_vector_dim=k,
    )
    sizes = [1 if d == axis else n for d, n in enumerate(xa.shape)]
    op = stablehlo.GatherOp(x, _wrap(indices, ia, xa.shape[axis]), dims, sizes, results=[hlo.aval_type(out)])
    return op.result


@rule("take_along_axis")
def _take_along_axis(ctx, x, indices, *, axis):
    (xa, ia), out = ctx.in_avals, ctx.out_aval
    if 0 in out.shape:
        return hlo.constant(0, out.dtype, out.shape)
    rank = len(out.shape)
    indices = hlo.broadcast_to(indices, ia, out.shape)
    vectors = _index_vectors(indices, Aval(out.shape, ia.dtype), axis, xa.shape)
    dims = stablehlo.GatherDimensionNumbers.get(
        offset_dims=[],
        collapsed_slice_dims=list(range(rank)),
        operand_batching_dims=[],
        start_indices_batching_dims=[],
        start_index_map=list(range(rank)),
        index_vector_dim=rank,
    )
    return stablehlo.GatherOp(x, vectors, dims, [1] * rank, results=[hlo.aval_type(out)]).result


def _widened(value, aval: Aval):
    """``value`` converted to the dtype scatter-adds accumulate in, and its aval."""
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    return hlo.convert(value, aval, wide.dtype), wide


@rule("scatter_add")
def _scatter_add(ctx, x, index, src, *, axis):
    (xa, ia, sa), out = ctx.in_avals, ctx.out_aval
    if 0 in ia.shape:
        return x
    rank = len(xa.shape)
    vectors = _index_vectors(index, ia, axis, xa.shape)
    constant_x, constant_src = hlo.is_constant(x), hlo.is_constant(src)
    (x, wide), (src, _) = _widened(x, xa), _widened(src, sa)
    if out.dtype in dt.FLOATING:
        # As index_add's (below): XLA turns a scatter-add onto a constant zero operand into
        # its updates, and drops one of constant zeros (seed 3592493969: +0.0 scatter-added
        # -0.0 gave -0.0, IEEE +0.0).
        src, x = (hlo.hidden_from_folding(v) if hidden else v for v, hidden in ((src, constant_src), (x, constant_x)))
    dims = _scatter_dims((), range(rank), range(rank), rank)
    result = _scatter(wide, x, vectors, src, dims, "add")
    return hlo.convert(result, wide, out.dtype)


@rule("index_add")
def _index_add(ctx, x, index, source, *, axis, alpha):
    (xa, ia, sa), out = ctx.in_avals, ctx.out_aval
    if 0 in sa.shape:
        return x
    constant_x, constant_source = hlo.is_constant(x), hlo.is_constant(source)
    (x, wide), (source, source_wide) = _widened(x, xa), _widened(source, sa)
    if alpha != 1:
        scale = hlo.constant(alpha, source_wide.dtype, source_wide.shape)
        source = stablehlo.MulOp(source, scale).result
    if out.dtype in dt.FLOATING:
        # XLA drops a scatter-add of constant zeros (a zero source, or any source times
        # alpha=0.0), and turns a scatter-add onto a constant zero operand into the updates:
        # either keeps a -0.0 where IEEE's -0.0 + 0.0 is +0.0 (NumPy's add.at).
        if constant_source:
            source = hlo.hidden_from_folding(source)
        if constant_x:
            x = hlo.hidden_from_folding(x)
    window = [d for d in range(len(xa.shape)) if d != axis]
    dims = _scatter_dims(window, (axis,), (axis,), 1)
    result = _scatter(wide, x, _wrap(index, ia, xa.shape[axis]), source, dims, "add")
    return hlo.convert(result, wide, out.dtype)


@rule("masked_fill")
def _masked_fill(ctx, x, mask, *, value):
    (_, ma), out = ctx.in_avals, ctx.out_aval
    mask = hlo.broadcast_to(mask, ma, out.shape)
    return hlo.select(mask, hlo.constant(value, out.dtype, out.shape), x)


@rule("setitem")
def _setitem(ctx, x, value, *, index):
    """The value, broadcast and cast, reshaped to one dim per input dim, reversed on
    negative-step dims and padded into place (low = first position, interior = step - 1);
    a bool mask padded the same way selects it over x."""
    (xa, va), out = ctx.in_avals, ctx.out_aval
    placement = selection_padding(index, xa.shape)
    if placement is None:
        return x
    counts, low, high, interior, reversed_dims = placement
    selected = getitem_infer(xa, index=index).shape
    value = hlo.broadcast_to(hlo.convert(value, va, out.dtype), Aval(va.shape, out.dtype), selected)
    if tuple(counts) != selected:
        value = hlo.reshape(value, counts, out.dtype)
    if reversed_dims:
        value = stablehlo.ReverseOp(value, reversed_dims).result
    placed = stablehlo.PadOp(value, hlo.constant(0, out.dtype), low, high, interior).result
    written = hlo.constant(True, dt.bool_, counts)
    mask = stablehlo.PadOp(written, hlo.constant(False, dt.bool_), low, high, interior).result
    return hlo.select(mask, placed, x)


@rule("index_copy")
def _index_copy(ctx, x, index, source, *, axis):
    (xa, ia, sa), out = ctx.in_avals, ctx.out_aval
    target = take_shape(xa.shape, ia.shape, axis)
    if 0 in target:
        return x
    k = len(ia.shape)
    source = hlo.broadcast_to(hlo.convert(source, sa, out.dtype), Aval(sa.shape, out.dtype), target)
    window = [*range(axis), *range(axis + k, len(target))]
    dims = _scatter_dims(window, (axis,), (axis,), k)
    return _scatter(out, x, _wrap(index, ia, xa.shape[axis]), source, dims, "replace")
