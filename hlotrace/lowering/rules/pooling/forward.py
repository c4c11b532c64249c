"""Rules of max_pool2d, avg_pool2d, adaptive_avg_pool2d and adaptive_max_pool2d."""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.lowering.rules.pooling.windows import (
    _add,
    adaptive_reduce,
    divide_by,
    empty_result,
    nan_max,
    reduce_window,
    window_geometry,
)
from hlotrace.ops.pooling import adaptive_counts, avg_divisors
from hlotrace.ops.registry import Aval


@rule("max_pool2d")
def _max_pool2d(ctx, x, *, kernel_size, stride, padding):
    (aval,) = ctx.in_avals
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    window, strides, pads = window_geometry(kernel_size, stride, padding)
    return nan_max(x, aval, lambda ops, avals, inits, f: reduce_window(ops, avals, inits, window, strides, pads, f))


@rule("avg_pool2d")
def _avg_pool2d(ctx, x, *, kernel_size, stride, padding, count_include_pad):
    (aval,), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    window, strides, pads = window_geometry(kernel_size, stride, padding)
    (total,), (total_aval,) = reduce_window(
        [hlo.convert(x, aval, wide.dtype)], [wide], [0.0], window, strides, pads, _add
    )
    divisors = avg_divisors(aval.shape[2:], kernel_size, stride, padding, count_include_pad)
    return hlo.convert(divide_by(total, total_aval, divisors), total_aval, out.dtype)


@rule("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(ctx, x, *, output_size):
    (aval,), out = ctx.in_avals, ctx.out_aval
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    wide = Aval(aval.shape, compute_dtype(aval.dtype))
    (total,), (total_aval,) = adaptive_reduce([hlo.convert(x, aval, wide.dtype)], [wide], [0.0], output_size, _add)
    result = divide_by(total, total_aval, adaptive_counts(aval.shape[2:], output_size))
    return hlo.convert(result, total_aval, out.dtype)


@rule("adaptive_max_pool2d")
def _adaptive_max_pool2d(ctx, x, *, output_size):
    (aval,) = ctx.in_avals
    if (zeros := empty_result(ctx)) is not None:
        return zeros
    return nan_max(x, aval, lambda ops, avals, inits, f: adaptive_reduce(ops, avals, inits, output_size, f))
