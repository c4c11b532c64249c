"""Lowering rules for hlotrace/ops/pooling_grad.py (imported by rules/pooling.py).

- The max backward ops find each window's element as a (value, flat index) reduction with
  ``argmax_combine`` and scatter-add ``ct`` there (``stablehlo.scatter``); the gathers
  reduce (value, flat index, payload) the same way. Not ``stablehlo.select_and_scatter``:
  XLA:CPU expands it into a reduce_window over its select comparator (not associative),
  and with padding along W that picks a later tied maximum (checked with jaxlib 0.10.2:
  rows [-2, 2], [2, 0] under one 2x2 window selected the second row's 2). avg_pool2d_backward spreads ``ct / divisor`` by a reduce_window over
  ``ct`` interior-padded by stride - 1, adaptive_avg_pool2d_backward by the windows of the
  input rows (columns) each output row (column) covers.
- Accumulation in float32 for float16/bfloat16 and a +0.0 start, as the references.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.lowering import hlo
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.pooling import (
    INDEX,
    NO_INDEX,
    _add,
    adaptive_reduce,
    argmax_combine,
    empty_result,
    flat_index,
    reduce_window,
    window_geometry,
    window_reduce,
)
from hlotrace.ops.pooling import adaptive_counts, adaptive_windows, avg_divisors, compute_dtype, lowest
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def _widen(value, aval: Aval):
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    return hlo.convert(value, aval, wide.dtype), wide


def _finish(value, wide: Aval, out: Aval):
    """+0.0 for -0.0 (the references' sums start at +0.0), rounded once to ``out``'s dtype."""
    return hlo.convert(hlo.plus_zero(value, wide), wide, out.dtype)


@rule("max_pool2d_backward")
def _max_pool2d_backward(ctx, x, ct, *, kernel_size, stride, padding):
    (x_aval, ct_aval), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval)
    window, strides, pads = window_geometry(kernel_size, stride, padding)
    (_, index), (_, index_aval) = reduce_window(
        operands, avals, inits, window, strides, pads, argmax_combine(x_aval.dtype)
    )
    return _scatter_add(index, index_aval, ct, ct_aval, out)


def _scatter_add(index, index_aval: Aval, ct, ct_aval: Aval, out: Aval):
    """Zeros of ``out`` with ``ct`` (N, C, OH, OW) added at the flat spatial positions
    ``index`` of each plane: one ``stablehlo.scatter`` over the flattened result."""
    n, c, h, w = out.shape
    size = n * c * h * w
    flat_dtype = INDEX if size < 2**31 else dt.int64
    shape = index_aval.shape
    index = hlo.convert(index, index_aval, flat_dtype)

    def iota(dim):
        return stablehlo.IotaOp(hlo.tensor_type(shape, flat_dtype), dim).result

    def times(value, factor):
        return stablehlo.MulOp(value, hlo.constant(factor, flat_dtype, shape)).result

    plane = stablehlo.AddOp(times(iota(0), c), iota(1)).result
    flat = stablehlo.AddOp(times(plane, h * w), index).result
    count = int(np.prod(shape))
    updates, wide = _widen(ct, ct_aval)
    scatter = stablehlo.ScatterOp(
        [hlo.tensor_type((size,), wide.dtype)],
        [hlo.constant(0, wide.dtype, (size,))],
        hlo.reshape(flat, (count, 1), flat_dtype),
        [hlo.reshape(updates, (count,), wide.dtype)],
        stablehlo.ScatterDimensionNumbers.get(
            update_window_dims=[],
            inserted_window_dims=[0],
            input_batching_dims=[],
            scatter_indices_batching_dims=[],
            scattered_dims_to_operand_dims=[0],
            index_vector_dim=1,
        ),
        indices_are_sorted=False,
        unique_indices=False,
    )
    scalar = hlo.tensor_type((), wide.dtype)
    block = scatter.update_computation.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp(_add([block.arguments[0]], [block.arguments[1]]))
    total = hlo.reshape(scatter.results[0], out.shape, wide.dtype)
    return _finish(total, Aval(out.shape, wide.dtype), out)


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
    window, strides, pads = window_geometry(kernel_size, stride, padding)
    results, _ = reduce_window(operands, avals, inits, window, strides, pads, argmax_combine(x_aval.dtype))
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
    # Window i covers input rows i*s - p .. i*s - p + k - 1: with ct's rows s apart, row h
    # sums the k entries ending at h + p, a stride-1 window over ct padded by k - 1 - p.
    low = [0, 0, *(k - 1 - p for k, p in zip(kernel_size, padding, strict=True))]
    high = [
        0,
        0,
        *(n + p - (m - 1) * s - 1 for n, p, m, s in zip(input_size, padding, ct_aval.shape[2:], stride, strict=True)),
    ]
    interior = [0, 0, *(s - 1 for s in stride)]
    padded = stablehlo.PadOp(scaled, hlo.constant(0, wide.dtype), low, high, interior).result
    padded_shape = tuple(
        lo + hi + d + (d - 1) * i for lo, hi, d, i in zip(low, high, wide.shape, interior, strict=True)
    )
    window = (1, 1, *kernel_size)
    (total,), (total_aval,) = reduce_window(
        [padded], [Aval(padded_shape, wide.dtype)], [0.0], window, (1, 1, 1, 1), [(0, 0)] * 4, _add
    )
    return _finish(total, total_aval, out)


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
    return _finish(operands[0], avals[0], out)


@rule("adaptive_max_pool2d_backward")
def _adaptive_max_pool2d_backward(ctx, x, ct):
    (x_aval, ct_aval), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval)
    (_, index), (_, index_aval) = adaptive_reduce(
        operands, avals, inits, ct_aval.shape[2:], argmax_combine(x_aval.dtype)
    )
    return _scatter_add(index, index_aval, ct, ct_aval, out)


@rule("adaptive_max_pool2d_gather")
def _adaptive_max_pool2d_gather(ctx, x, g, *, output_size):
    (x_aval, g_aval) = ctx.in_avals
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    operands, avals, inits = _selection_operands(x, x_aval, g, g_aval)
    results, _ = adaptive_reduce(operands, avals, inits, output_size, argmax_combine(x_aval.dtype))
    return results[2]
