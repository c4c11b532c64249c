"""Lowering rules for hlotrace/ops/bitwise.py.

Shift counts are checked explicitly (0 <= n < width) rather than left to the backend: StableHLO does not define shifts by
the width or more, and NumPy 2 does (0, or the sign for an arithmetic right shift).
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def operands_as(ctx, operands, dtype):
    """Every operand converted to ``dtype`` and broadcast to the output shape."""
    shape = ctx.out_aval.shape
    return [hlo.to_aval(v, a, Aval(shape, dtype)) for v, a in zip(operands, ctx.in_avals, strict=True)]


@rule("logical_xor")
def _logical_xor(ctx, x, y):
    lhs, rhs = operands_as(ctx, (x, y), dt.bool_)
    return stablehlo.XorOp(lhs, rhs).result


def _bitwise(op_class):
    def lower(ctx, x, y):
        lhs, rhs = operands_as(ctx, (x, y), ctx.out_aval.dtype)
        return op_class(lhs, rhs).result

    return lower


rule("bitwise_and")(_bitwise(stablehlo.AndOp))
rule("bitwise_or")(_bitwise(stablehlo.OrOp))
rule("bitwise_xor")(_bitwise(stablehlo.XorOp))


@rule("bitwise_not")
def _bitwise_not(ctx, x):
    return stablehlo.NotOp(x).result


def _shift(left: bool):
    def lower(ctx, x, count):
        out = ctx.out_aval
        value, count = operands_as(ctx, (x, count), out.dtype)
        bits = np.iinfo(out.dtype).bits
        in_range = stablehlo.AndOp(
            hlo.compare(count, hlo.constant(0, out.dtype, out.shape), "GE", out.dtype),
            hlo.compare(count, hlo.constant(bits, out.dtype, out.shape), "LT", out.dtype),
        ).result
        if left:
            shifted = stablehlo.ShiftLeftOp(value, count).result
            return hlo.select(in_range, shifted, hlo.constant(0, out.dtype, out.shape))
        shifted = stablehlo.ShiftRightArithmeticOp(value, count).result
        sign_fill = stablehlo.ShiftRightArithmeticOp(value, hlo.constant(bits - 1, out.dtype, out.shape)).result
        return hlo.select(in_range, shifted, sign_fill)

    return lower


rule("left_shift")(_shift(left=True))
rule("right_shift")(_shift(left=False))
