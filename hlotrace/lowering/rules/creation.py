"""Lowering rules for hlotrace/ops/creation.py: splat constants and an iota.

Float aranges are computed in float32 (float64 for float64): ``start + i * step`` with i
from an int32 iota, then rounded once to the result dtype, as the reference does.
"""

from __future__ import annotations

from hlotrace import dtypes as dt
from hlotrace.lowering import hlo
from hlotrace.lowering.registry import rule
from hlotrace.ops.creation import compute_dtype
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
