"""Lowering rules for hlotrace/ops/pooling/backward.py.

- The max ops find each window's element as a (value, flat index) reduction with
  ``argmax_combine``; the gathers carry the payload along. The backward ops then give each
  input element the sum of the cotangents of the windows that hold it and selected it:
  for max_pool2d, k*k shifted slices of the selected indices and ``ct`` spread ``stride``
  apart (compares, selects and adds that XLA fuses, summed in window order as the
  reference), for the adaptive pool a gather of the windows holding each row and column.
  Not ``stablehlo.select_and_scatter``: XLA:CPU expands it into a reduce_window over its
  select comparator (not associative), and with padding along W that picks a later tied
  maximum (jaxlib 0.10.2: rows [-2, 2], [2, 0] under one 2x2 window selected the second
  row's 2). Nor ``stablehlo.scatter``, which compiled slower here.
- avg_pool2d_backward is a reduce_window over ``ct / divisor`` spread ``stride`` apart;
  adaptive_avg_pool2d_backward reduces, per input row (column), the windows holding it.
- Accumulation in float32 for float16/bfloat16 and a +0.0 start, as the references.
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.pooling.windows import (
    INDEX,
    NO_INDEX,
    _add,
    _reduce_dim,
    _take,
    adaptive_reduce,
    adaptive_windows,
    argmax_combine,
    empty_result,
    flat_index,
    reduce_window,
    window_geometry,
    window_reduce,
)
from hlotrace.ops.pooling import adaptive_counts, avg_divisors, lowest
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def _widen(value, aval: Aval):
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    return hlo.convert(value, aval, wide.dtype), wide


def _transposed_frame(value, aval: Aval, fill, input_size, kernel_size, stride, padding):
    """``value`` (N, C, OH, OW) spread ``stride`` apart and padded with ``fill``, so that the
    windows holding input element (h, w) sit at (h + a, w + b), 0 <= a, b < k, in window
    order (window i covers rows i*s - p .. i*s - p + k - 1). Returns (frame, its aval)."""
    low = [0, 0, *(k - 1 - p for k, p in zip(kernel_size, padding, strict=True))]
    high = [0, 0]
    high += [n + p - (m - 1) * s - 1 for n, p, m, s in zip(input_size, padding, aval.shape[2:], stride, strict=True)]
    interior = [0, 0, *(s - 1 for s in stride)]
    shape = tuple(lo + hi + d + (d - 1) * i for lo, hi, d, i in zip(low, high, aval.shape, interior, strict=True))
    frame = stablehlo.PadOp(value, hlo.constant(fill, aval.dtype), low, high, interior).result
    return frame, Aval(shape, aval.dtype)


@rule("max_pool2d_backward")
def _max_pool2d_backward(ctx, x, ct, *, kernel_size, stride, padding):
    (x_aval, ct_aval), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval)
    combine = argmax_combine(x_aval.dtype)
    (_, index), (_, index_aval) = reduce_window(
        operands, avals, inits, *window_geometry(kernel_size, stride, padding), combine
    )
    value, wide = _widen(ct, ct_aval)
    geometry = (out.shape[2:], kernel_size, stride, padding)
    index_frame, _ = _transposed_frame(index, index_aval, NO_INDEX, *geometry)
    ct_frame, _ = _transposed_frame(value, wide, 0, *geometry)
    position, zero = flat_index(out.shape), hlo.constant(0, wide.dtype, out.shape)
    n, c, h, w = out.shape
    total = None
    for a in range(kernel_size[0]):
        for b in range(kernel_size[1]):
            start, limit = [0, 0, a, b], [n, c, a + h, b + w]
            index_at, ct_at = (stablehlo.SliceOp(f, start, limit, [1] * 4).result for f in (index_frame, ct_frame))
            term = hlo.select(hlo.compare(index_at, position, "EQ", INDEX), ct_at, zero)
            total = term if total is None else stablehlo.AddOp(total, term).result
    return hlo.narrowed(total, wide.dtype, out, plus_zero_first=True)


def _selection_operands(x, x_aval: Aval, payload=None, payload_aval=None):
    operands = [x, flat_index(x_aval.shape)]
    avals = [x_aval, Aval(x_aval.shape, INDEX)]
    inits = [lowest(x_aval.dtype), NO_INDEX]
    if payload is not None:
        operands.append(payload)
        avals.append(payload_aval)
        inits.append(0)
    return operands, avals, inits


@rule("max_pool2d_gather")
def _max_pool2d_gather(ctx, x, g, *, kernel_size, stride, padding):
    (x_aval, g_aval) = ctx.in_avals
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval, g, g_aval)
    combine = argmax_combine(x_aval.dtype)
    results, _ = reduce_window(operands, avals, inits, *window_geometry(kernel_size, stride, padding), combine)
    return results[2]


@rule("avg_pool2d_backward")
def _avg_pool2d_backward(ctx, ct, *, input_size, kernel_size, stride, padding, count_include_pad):
    (ct_aval,), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    value, wide = _widen(ct, ct_aval)
    divisors = avg_divisors(input_size, kernel_size, stride, padding, count_include_pad)
    spread = hlo.broadcast_in_dim(hlo.constant(divisors, wide.dtype, divisors.shape), wide.shape, [2, 3])
    scaled = stablehlo.DivOp(value, spread).result
    frame, frame_aval = _transposed_frame(scaled, wide, 0, input_size, kernel_size, stride, padding)
    window = (1, 1, *kernel_size)
    (total,), (total_aval,) = reduce_window([frame], [frame_aval], [0.0], window, (1,) * 4, [(0, 0)] * 4, _add)
    return hlo.narrowed(total, total_aval.dtype, out, plus_zero_first=True)


def _covering(n: int, m: int) -> list[tuple[int, int]]:
    """For each of the ``n`` input rows, the range of the ``m`` adaptive windows holding it."""
    windows = adaptive_windows(n, m)
    covering = []
    for h in range(n):
        holding = [i for i, (start, end) in enumerate(windows) if start <= h < end]
        covering.append((holding[0], holding[-1] + 1))
    return covering


@rule("adaptive_avg_pool2d_backward")
def _adaptive_avg_pool2d_backward(ctx, ct, *, input_size):
    (ct_aval,), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    value, wide = _widen(ct, ct_aval)
    counts = adaptive_counts(input_size, ct_aval.shape[2:])
    spread = hlo.broadcast_in_dim(hlo.constant(counts, wide.dtype, counts.shape), wide.shape, [2, 3])
    operands, avals = [stablehlo.DivOp(value, spread).result], [wide]
    for dim, n in ((3, input_size[1]), (2, input_size[0])):
        operands, avals = window_reduce(operands, avals, dim, _covering(n, avals[0].shape[dim]), [0.0], _add)
    return hlo.narrowed(operands[0], avals[0].dtype, out, plus_zero_first=True)


@rule("adaptive_max_pool2d_backward")
def _adaptive_max_pool2d_backward(ctx, x, ct):
    (x_aval, ct_aval), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval)
    combine = argmax_combine(x_aval.dtype)
    (_, index), (_, index_aval) = adaptive_reduce(operands, avals, inits, ct_aval.shape[2:], combine)
    value, wide = _widen(ct, ct_aval)
    # Element (h, w) gathers the (index, ct) of the c_h x c_w windows that may hold it
    # (slots past the last holding window get NO_INDEX) and sums the ct of those that chose it.
    values, fills, shape = [index, value], [NO_INDEX, 0], index_aval.shape
    for dim, n in ((2, out.shape[2]), (4, out.shape[3])):
        covering = _covering(n, shape[dim])
        c = max(end - start for start, end in covering)
        rows = [min(start + t, end - 1) for start, end in covering for t in range(c)]
        inside = np.array([[start + t < end for t in range(c)] for start, end in covering])
        expanded = (*shape[:dim], n, c, *shape[dim + 1 :])
        mask = hlo.broadcast_in_dim(hlo.constant(inside, dt.bool_, inside.shape), expanded, [dim, dim + 1])
        gathered = []
        for v, d, fill in zip(values, (INDEX, wide.dtype), fills, strict=True):
            taken = hlo.reshape(_take(v, Aval(shape, d), dim, rows), expanded, d)
            gathered.append(hlo.select(mask, taken, hlo.constant(fill, d, expanded)))
        values, shape = gathered, expanded
    position = hlo.broadcast_in_dim(flat_index(out.shape), shape, [0, 1, 2, 4])
    hit = hlo.compare(values[0], position, "EQ", INDEX)
    terms = hlo.select(hit, values[1], hlo.constant(0, wide.dtype, shape))
    (total,) = _reduce_dim([terms], [Aval(shape, wide.dtype)], [0.0], (3, 5), _add)
    return hlo.narrowed(total, wide.dtype, out, plus_zero_first=True)


@rule("adaptive_max_pool2d_gather")
def _adaptive_max_pool2d_gather(ctx, x, g, *, output_size):
    (x_aval, g_aval) = ctx.in_avals
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval, g, g_aval)
    results, _ = adaptive_reduce(operands, avals, inits, output_size, argmax_combine(x_aval.dtype))
    return results[2]
