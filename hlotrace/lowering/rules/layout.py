"""Lowering rules for hlotrace/ops/layout.py.

Attributes arrive canonical (sorted non-negative axes, shifts reduced modulo the size,
one pad pair and one rep per dim, clipped k), so each rule is a few data-movement ops:
flip is a reverse; roll concatenates two slices per axis; pad "constant" is a
``stablehlo.pad`` and "reflect"/"edge" concatenate, per padded axis, slices of the input
(reversed or broadcast where the copied indices run backwards or stand still); tile and
int repeat broadcast into an extra dim and reshape; tril/triu select against an iota mask.
Everything moves values without arithmetic, so results are exact for every dtype.
"""

from __future__ import annotations

import math

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.layout import index_runs, pad_indices, repeat_groups, tile_operand_shape
from hlotrace.runtime.jaxlib_compat import stablehlo


def _slice(x, shape, axis, start, stop):
    """``x[..., start:stop, ...]`` along ``axis`` of a value of ``shape``."""
    starts, limits = [0] * len(shape), list(shape)
    starts[axis], limits[axis] = start, stop
    return stablehlo.SliceOp(x, starts, limits, [1] * len(shape)).result


def _concat(pieces, axis):
    return pieces[0] if len(pieces) == 1 else stablehlo.ConcatenateOp(pieces, axis).result


@rule("flip")
def _flip(ctx, x, *, axis):
    return stablehlo.ReverseOp(x, list(axis)).result if axis else x


@rule("roll")
def _roll(ctx, x, *, shift, axis):
    (aval,) = ctx.in_avals
    if axis is None:
        if not shift:
            return x
        flat = (math.prod(aval.shape),)
        rolled = _roll_axis(hlo.reshape(x, flat, aval.dtype), flat, 0, shift)
        return hlo.reshape(rolled, aval.shape, aval.dtype)
    for a, s in zip(axis, shift, strict=True):
        x = _roll_axis(x, aval.shape, a, s)
    return x


def _roll_axis(x, shape, axis, shift):
    # The last `shift` elements move to the front.
    n = shape[axis]
    return _concat([_slice(x, shape, axis, n - shift, n), _slice(x, shape, axis, 0, n - shift)], axis)


def take_static(x, shape, axis, indices):
    """``x`` indexed along ``axis`` by the static ``indices``: one slice per run of
    consecutive indices, reversed where they descend, broadcast where they repeat."""
    pieces = []
    for _, source, length, step in index_runs(indices):
        low = source - length + 1 if step == -1 else source
        count = 1 if step == 0 else length
        piece = _slice(x, shape, axis, low, low + count)
        if step == -1:
            piece = stablehlo.ReverseOp(piece, [axis]).result
        elif step == 0 and length > 1:
            target = (*shape[:axis], length, *shape[axis + 1 :])
            piece = hlo.broadcast_in_dim(piece, target, list(range(len(shape))))
        pieces.append(piece)
    return _concat(pieces, axis)


@rule("pad")
def _pad(ctx, x, *, pad_width, mode, value):
    (aval,), out = ctx.in_avals, ctx.out_aval
    if aval.shape == out.shape:
        return x
    if mode == "constant":
        low, high = [b for b, _ in pad_width], [a for _, a in pad_width]
        fill = hlo.constant(value, aval.dtype)
        return stablehlo.PadOp(x, fill, low, high, [0] * len(low)).result
    shape = list(aval.shape)
    for axis, (b, a) in enumerate(pad_width):
        if b or a:
            x = take_static(x, shape, axis, pad_indices(shape[axis], b, a, mode))
            shape[axis] += b + a
    return x


@rule("tile")
def _tile(ctx, x, *, reps):
    (aval,), out = ctx.in_avals, ctx.out_aval
    if aval.shape == out.shape:
        return x
    padded = tile_operand_shape(aval.shape, reps)
    lead = len(reps) - len(aval.shape)
    # Dims (r0, d0, r1, d1, ...): the whole tensor repeats, so each rep is the outer dim.
    pairs = [d for pair in zip(reps, padded, strict=True) for d in pair]
    dims = [2 * (lead + k) + 1 for k in range(len(aval.shape))]
    spread = hlo.broadcast_in_dim(x, pairs, dims)
    return hlo.reshape(spread, out.shape, out.dtype)


@rule("repeat")
def _repeat(ctx, x, *, repeats, axis):
    (aval,), out = ctx.in_avals, ctx.out_aval
    shape = (math.prod(aval.shape),) if axis is None else aval.shape
    if axis is None:
        x, axis = hlo.reshape(x, shape, aval.dtype), 0
    counts = repeats if isinstance(repeats, tuple) else (repeats,) * shape[axis]
    pieces = []
    for start, stop, count in repeat_groups(counts):
        if count == 0:
            continue
        piece = x if (start, stop) == (0, shape[axis]) else _slice(x, shape, axis, start, stop)
        n = stop - start
        # Dims (..., n, count, ...): each element repeats, so the count is the inner dim.
        spread_shape = (*shape[:axis], n, count, *shape[axis + 1 :])
        dims = [d if d <= axis else d + 1 for d in range(len(shape))]
        spread = hlo.broadcast_in_dim(piece, spread_shape, dims)
        pieces.append(hlo.reshape(spread, (*shape[:axis], n * count, *shape[axis + 1 :]), aval.dtype))
    if not pieces:
        return hlo.constant(0, out.dtype, out.shape)
    return _concat(pieces, axis)


def _triangle(direction):
    def lower(ctx, x, *, k):
        (aval,) = ctx.in_avals
        rank, matrix = len(aval.shape), aval.shape[-2:]
        rows = stablehlo.IotaOp(hlo.tensor_type(matrix, dt.int32), 0).result
        cols = stablehlo.IotaOp(hlo.tensor_type(matrix, dt.int32), 1).result
        diagonal = stablehlo.SubtractOp(cols, rows).result
        keep = hlo.compare(diagonal, hlo.constant(k, dt.int32, matrix), direction, dt.int32)
        keep = hlo.broadcast_in_dim(keep, aval.shape, [rank - 2, rank - 1])
        return hlo.select(keep, x, hlo.constant(0, aval.dtype, aval.shape))

    return lower


rule("tril")(_triangle("LE"))
rule("triu")(_triangle("GE"))
