"""Lowering rules for hlotrace/ops/elementwise.py.

Operands are promoted and broadcast explicitly (StableHLO elementwise ops need equal
shapes and types); XLA fuses the broadcasts away.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def _operands_as(ctx, operands, dtype):
    """Convert every operand to ``dtype`` and broadcast it to the output shape."""
    shape = ctx.out_aval.shape
    return [hlo.to_aval(v, a, Aval(shape, dtype)) for v, a in zip(operands, ctx.in_avals, strict=True)]


def _common_dtype(ctx):
    return dt.promote(*(a.dtype for a in ctx.in_avals))


def _arith(op_class, bool_op_class=None):
    def lower(ctx, x, y):
        dtype = ctx.out_aval.dtype
        lhs, rhs = _operands_as(ctx, (x, y), dtype)
        if dtype == dt.bool_ and bool_op_class is not None:
            return bool_op_class(lhs, rhs).result
        return op_class(lhs, rhs).result

    return lower


@rule("add")
def _add(ctx, x, y):
    out = ctx.out_aval
    lhs, rhs = _operands_as(ctx, (x, y), out.dtype)
    if out.dtype == dt.bool_:
        return stablehlo.OrOp(lhs, rhs).result
    if out.dtype in dt.FLOATING:
        # XLA folds x + 0 to x, which keeps -0.0 (IEEE and NumPy give +0.0).
        if hlo.is_zero_constant(y):
            return hlo.plus_zero(lhs, out)
        if hlo.is_zero_constant(x):
            return hlo.plus_zero(rhs, out)
    return stablehlo.AddOp(lhs, rhs).result


@rule("subtract")
def _subtract(ctx, x, y):
    out = ctx.out_aval
    lhs, rhs = _operands_as(ctx, (x, y), out.dtype)
    if out.dtype in dt.FLOATING and hlo.is_zero_constant(y, -1.0):
        return hlo.plus_zero(lhs, out)  # x - (-0.0) is x + 0.0, which XLA folds to x as well
    return stablehlo.SubtractOp(lhs, rhs).result


rule("multiply")(_arith(stablehlo.MulOp, stablehlo.AndOp))
rule("divide")(_arith(stablehlo.DivOp))
rule("maximum")(_arith(stablehlo.MaxOp, stablehlo.OrOp))
rule("minimum")(_arith(stablehlo.MinOp, stablehlo.AndOp))


@rule("power")
def _power(ctx, x, y):
    lhs, rhs = _operands_as(ctx, (x, y), ctx.out_aval.dtype)
    return stablehlo.PowOp(lhs, rhs).result


def _comparison(direction):
    def lower(ctx, x, y):
        dtype = _common_dtype(ctx)
        lhs, rhs = _operands_as(ctx, (x, y), dtype)
        return hlo.compare(lhs, rhs, direction, dtype)

    return lower


for _name, _direction in [
    ("equal", "EQ"),
    ("not_equal", "NE"),
    ("less", "LT"),
    ("less_equal", "LE"),
    ("greater", "GT"),
    ("greater_equal", "GE"),
]:
    rule(_name)(_comparison(_direction))


def _logical(op_class):
    def lower(ctx, x, y):
        lhs, rhs = _operands_as(ctx, (x, y), dt.bool_)
        return op_class(lhs, rhs).result

    return lower


rule("logical_and")(_logical(stablehlo.AndOp))
rule("logical_or")(_logical(stablehlo.OrOp))


@rule("logical_not")
def _logical_not(ctx, x):
    return stablehlo.NotOp(hlo.convert(x, ctx.in_avals[0], dt.bool_)).result


@rule("negative")
def _negative(ctx, x):
    return stablehlo.NegOp(x).result


@rule("abs")
def _abs(ctx, x):
    if ctx.in_avals[0].dtype == dt.bool_:
        return x
    return stablehlo.AbsOp(x).result


def _float_unary(op_class):
    def lower(ctx, x):
        return op_class(hlo.convert(x, ctx.in_avals[0], ctx.out_aval.dtype)).result

    return lower


rule("exp")(_float_unary(stablehlo.ExpOp))
rule("log")(_float_unary(stablehlo.LogOp))
rule("sqrt")(_float_unary(stablehlo.SqrtOp))
rule("rsqrt")(_float_unary(stablehlo.RsqrtOp))
rule("tanh")(_float_unary(stablehlo.TanhOp))
rule("sin")(_float_unary(stablehlo.SineOp))
rule("cos")(_float_unary(stablehlo.CosineOp))


@rule("where")
def _where(ctx, cond, x, y):
    out = ctx.out_aval
    pred = hlo.to_aval(cond, ctx.in_avals[0], Aval(out.shape, dt.bool_))
    on_true = hlo.to_aval(x, ctx.in_avals[1], out)
    on_false = hlo.to_aval(y, ctx.in_avals[2], out)
    # select never evaluates arithmetic on the unselected branch, so inf there stays out
    # of the result (unlike mask*x + (1-mask)*y).
    return hlo.select(pred, on_true, on_false)


@rule("astype")
def _astype(ctx, x, *, dtype):
    return hlo.convert(x, ctx.in_avals[0], dtype)
