"""Lowering rules for hlotrace/ops/math/binary.py: atan2, logaddexp, mod, floor_divide.

logaddexp is ``max + log1p(exp(-|x - y|))`` (exp never overflows), with ``x + log(2)``
where ``x == y`` (NumPy's special case: equal infinities give NaN as a difference).

Float mod and floor_divide spell out NumPy's ``divmod`` (fmod, then the sign correction,
the snap to an integer and the signs of zero), in float32 for float16/bfloat16. Integer
division never meets a divisor of 0 or -1 (replaced by 1 first, their results selected
afterwards): XLA defines x / 0 = -1 and x % 0 = x, and x86 traps on INT_MIN / -1.
"""

from __future__ import annotations

import math

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.math import compute_dtype
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def operands_as(ctx, operands, dtype):
    """Every operand converted to ``dtype`` and broadcast to the output shape."""
    shape = ctx.out_aval.shape
    return [hlo.to_aval(v, a, Aval(shape, dtype)) for v, a in zip(operands, ctx.in_avals, strict=True)]


@rule("atan2")
def _atan2(ctx, x, y):
    out = ctx.out_aval
    wide = Aval(out.shape, compute_dtype(out.dtype))
    lhs, rhs = operands_as(ctx, (x, y), wide.dtype)
    return hlo.convert(stablehlo.Atan2Op(lhs, rhs).result, wide, out.dtype)


@rule("logaddexp")
def _logaddexp(ctx, x, y):
    out = ctx.out_aval
    wide = Aval(out.shape, compute_dtype(out.dtype))
    a, b = operands_as(ctx, (x, y), wide.dtype)
    larger = stablehlo.MaxOp(a, b).result
    gap = stablehlo.NegOp(stablehlo.AbsOp(stablehlo.SubtractOp(a, b).result).result).result
    shifted = stablehlo.AddOp(larger, stablehlo.Log1pOp(stablehlo.ExpOp(gap).result).result).result
    tie = stablehlo.AddOp(a, hlo.constant(math.log(2.0), wide.dtype, wide.shape)).result
    value = hlo.select(hlo.compare(a, b, "EQ", wide.dtype), tie, shifted)
    return hlo.convert(value, wide, out.dtype)


def _signbit(value, aval: Aval):
    """Whether the sign bit of the float32/float64 ``value`` is set (-0.0 included)."""
    bits = dt.int32 if aval.dtype == dt.float32 else dt.int64
    as_int = stablehlo.BitcastConvertOp(hlo.tensor_type(aval.shape, bits), value).result
    return hlo.compare(as_int, hlo.constant(0, bits, aval.shape), "LT", bits)


def _float_divmod(ctx, x, y, quotient: bool):
    out = ctx.out_aval
    aval = Aval(out.shape, compute_dtype(out.dtype))
    a, b = operands_as(ctx, (x, y), aval.dtype)

    def const(value):
        return hlo.constant(value, aval.dtype, aval.shape)

    def cmp(lhs, rhs, direction):
        return hlo.compare(lhs, rhs, direction, aval.dtype)

    zero = const(0.0)
    rem = stablehlo.RemOp(a, b).result  # fmod: the sign of a; NaN for b == 0 or a = ±inf
    b_negative = cmp(b, zero, "LT")
    # A nonzero (or NaN) remainder whose sign differs from b's moves one step: rem + b, div - 1.
    step = stablehlo.AndOp(cmp(rem, zero, "NE"), stablehlo.XorOp(cmp(rem, zero, "LT"), b_negative).result).result
    if not quotient:
        mod = hlo.select(step, stablehlo.AddOp(rem, b).result, rem)
        # A zero remainder takes b's sign.
        mod = hlo.select(cmp(rem, zero, "EQ"), hlo.select(b_negative, const(-0.0), zero), mod)
        return hlo.convert(mod, aval, out.dtype)
    div = stablehlo.DivOp(stablehlo.SubtractOp(a, rem).result, b).result
    div = hlo.select(step, stablehlo.SubtractOp(div, const(1.0)).result, div)
    # Snapped to the nearest integer (div is close to one already).
    floor = stablehlo.FloorOp(div).result
    above_half = cmp(stablehlo.SubtractOp(div, floor).result, const(0.5), "GT")
    floor = hlo.select(above_half, stablehlo.AddOp(floor, const(1.0)).result, floor)
    # A zero quotient takes the sign of a / b; division by zero is a / b itself.
    ratio = stablehlo.DivOp(a, b).result
    floor = hlo.select(cmp(div, zero, "EQ"), hlo.select(_signbit(ratio, aval), const(-0.0), zero), floor)
    floor = hlo.select(cmp(b, zero, "EQ"), ratio, floor)
    return hlo.convert(floor, aval, out.dtype)


def _integer_divmod(ctx, x, y, quotient: bool):
    out = ctx.out_aval
    a, b = operands_as(ctx, (x, y), out.dtype)

    def const(value):
        return hlo.constant(value, out.dtype, out.shape)

    def cmp(lhs, rhs, direction):
        return hlo.compare(lhs, rhs, direction, out.dtype)

    zero = const(0)
    by_zero, by_minus_one = cmp(b, zero, "EQ"), cmp(b, const(-1), "EQ")
    safe = hlo.select(stablehlo.OrOp(by_zero, by_minus_one).result, const(1), b)
    rem = stablehlo.RemOp(a, safe).result  # truncated: the sign of a
    step = stablehlo.AndOp(
        cmp(rem, zero, "NE"), stablehlo.XorOp(cmp(rem, zero, "LT"), cmp(safe, zero, "LT")).result
    ).result
    if quotient:
        div = stablehlo.DivOp(a, safe).result
        result = hlo.select(step, stablehlo.SubtractOp(div, const(1)).result, div)
        result = hlo.select(by_minus_one, stablehlo.NegOp(a).result, result)  # INT_MIN wraps to itself
    else:
        result = hlo.select(step, stablehlo.AddOp(rem, safe).result, rem)  # x % 1 is 0 for b == -1
    return hlo.select(by_zero, zero, result)


def _divmod(quotient: bool):
    def lower(ctx, x, y):
        if ctx.out_aval.dtype in dt.FLOATING:
            return _float_divmod(ctx, x, y, quotient)
        return _integer_divmod(ctx, x, y, quotient)

    return lower


rule("mod")(_divmod(quotient=False))
rule("floor_divide")(_divmod(quotient=True))
