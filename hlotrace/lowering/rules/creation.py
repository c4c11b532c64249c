"""Lowering rules for hlotrace/ops/creation.py: splat constants and iotas.

Float aranges are computed in float32 (float64 for float64): ``start + i * step`` with i
from an int32 iota, then rounded once to the result dtype, as the reference does. linspace computes NumPy's float64
values exactly: ``i * step`` as the sum of two exact products (see
:func:`hlotrace.ops.creation.linspace_step_parts`), so that no fused multiply-add can round
differently from NumPy's product-then-sum.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.ops.creation import linspace_float64, linspace_step_parts
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


@rule("zeros")
def _zeros(ctx, *, shape, dtype):
    return hlo.constant(0, dtype, shape)


@rule("ones")
def _ones(ctx, *, shape, dtype):
    return hlo.constant(1, dtype, shape)


@rule("full")
def _full(ctx, *, shape, value, dtype):
    return hlo.constant(value, dtype, shape)


@rule("arange")
def _arange(ctx, *, start, stop, step, dtype):
    shape = ctx.out_aval.shape
    index = stablehlo.IotaOp(hlo.tensor_type(shape, dt.int32), 0).result
    compute = dtype if dtype in dt.INTEGER else compute_dtype(dtype)
    value = hlo.convert(index, Aval(shape, dt.int32), compute)
    if compute in dt.INTEGER:
        # Integer arithmetic wraps, so a step beyond the dtype's range taken modulo 2**bits
        # still gives the right values (they all lie in the dtype's range).
        bits = 8 * compute.itemsize
        step = (step + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
    value = stablehlo.MulOp(value, hlo.constant(step, compute, shape)).result
    offset = hlo.constant(start, compute, shape)
    if compute in dt.FLOATING and hlo.is_zero_constant(offset):
        # XLA folds x + 0.0 to x, which keeps 0 * (negative step) = -0.0 (IEEE: +0.0).
        value = hlo.plus_zero(value, Aval(shape, compute))
    else:
        value = stablehlo.AddOp(value, offset).result
    return hlo.convert(value, Aval(shape, compute), dtype)


def _iotas(shape):
    """Row and column indices (int32) of a matrix of ``shape``."""
    rows = stablehlo.IotaOp(hlo.tensor_type(shape, dt.int32), 0).result
    cols = stablehlo.IotaOp(hlo.tensor_type(shape, dt.int32), 1).result
    return rows, cols


@rule("eye")
def _eye(ctx, *, n, m, k, dtype):
    rows, cols = _iotas((n, m))
    diagonal = stablehlo.SubtractOp(cols, rows).result
    hot = hlo.compare(diagonal, hlo.constant(k, dt.int32, (n, m)), "EQ", dt.int32)
    return hlo.convert(hot, Aval((n, m), dt.bool_), dtype)


@rule("linspace")
def _linspace(ctx, *, start, stop, num, endpoint, dtype):
    shape, wide = (num,), Aval((num,), dt.float64)
    div = num - 1 if endpoint else num
    if div <= 0 or start == stop:
        # NumPy's special cases (no step, or a zero one): the values are start and stop.
        values = linspace_float64(start, stop, num, endpoint)
        value = hlo.constant(values, dt.float64, shape)
    else:
        index = stablehlo.IotaOp(hlo.tensor_type(shape, dt.int32), 0).result
        i = hlo.convert(index, Aval(shape, dt.int32), dt.float64)
        hi, lo = linspace_step_parts((stop - start) / div)
        value = stablehlo.MulOp(i, hlo.constant(hi, dt.float64, shape)).result
        if lo:
            low_part = stablehlo.MulOp(i, hlo.constant(lo, dt.float64, shape)).result
            value = stablehlo.AddOp(value, low_part).result  # == i * step rounded once, as NumPy
        offset = hlo.constant(start, dt.float64, shape)
        if hlo.is_zero_constant(offset):
            value = hlo.plus_zero(value, wide)  # XLA folds x + 0.0, keeping -0.0
        else:
            value = stablehlo.AddOp(value, offset).result
        if endpoint:
            last = hlo.compare(index, hlo.constant(num - 1, dt.int32, shape), "EQ", dt.int32)
            value = hlo.select(last, hlo.constant(stop, dt.float64, shape), value)
    if dtype in dt.INTEGER:
        value = stablehlo.FloorOp(value).result
    return hlo.convert(value, wide, dtype)
