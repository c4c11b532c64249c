"""Mutants of hlotrace/lowering/rules/elementwise.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/elementwise.py"

MUTANTS = [
    Mutant(
        id="arith-swapped-operands",
        file=FILE,
        find="            return bool_op_class(lhs, rhs).result\n        return op_class(lhs, rhs).result",
        replace="            return bool_op_class(lhs, rhs).result\n        return op_class(rhs, lhs).result",
        why="the shared binary-arithmetic helper passes its operands in the wrong order (y - x, y / x)",
        ops=("subtract", "divide"),
    ),
    Mutant(
        id="power-swapped-operands",
        file=FILE,
        find="return stablehlo.PowOp(lhs, rhs).result",
        replace="return stablehlo.PowOp(rhs, lhs).result",
        why="power computes y ** x",
        ops=("power",),
    ),
    Mutant(
        id="less-wrong-direction",
        file=FILE,
        find='("less", "LT"),',
        replace='("less", "GT"),',
        why="less uses the GT comparison direction",
        ops=("less",),
    ),
    Mutant(
        id="less-equal-strict",
        file=FILE,
        find='("less_equal", "LE"),',
        replace='("less_equal", "LT"),',
        why="less_equal uses LT: equal elements compare False",
        ops=("less_equal",),
    ),
    Mutant(
        id="greater-equal-strict",
        file=FILE,
        find='("greater_equal", "GE"),',
        replace='("greater_equal", "GT"),',
        why="greater_equal uses GT: equal elements compare False",
        ops=("greater_equal",),
    ),
    Mutant(
        id="comparison-in-result-dtype",
        file=FILE,
        find="dtype = _common_dtype(ctx)",
        replace="dtype = ctx.out_aval.dtype",
        why="comparisons convert their operands to the result dtype (bool) instead of the promoted one",
        ops=("less", "equal"),
    ),
    Mutant(
        id="comparison-int32-in-float32",
        file=FILE,
        find="dtype = _common_dtype(ctx)",
        replace="dtype = dt.promote(_common_dtype(ctx), dt.float32)",
        why="comparisons are done in float32, so int32 operands above 2**24 round before comparing",
        ops=("equal", "less", "greater"),
    ),
    Mutant(
        id="logical-bitwise-on-int32",
        file=FILE,
        find="        lhs, rhs = _operands_as(ctx, (x, y), dt.bool_)\n        return op_class(lhs, rhs).result",
        replace=(
            "        dtype = _common_dtype(ctx) if _common_dtype(ctx) == dt.int32 else dt.bool_\n"
            "        lhs, rhs = _operands_as(ctx, (x, y), dtype)\n"
            "        return hlo.convert(op_class(lhs, rhs).result, Aval(ctx.out_aval.shape, dtype), dt.bool_)"
        ),
        why="logical_and/or of int32 operands is a bitwise and/or followed by != 0 (1 and 2 gives False)",
        ops=("logical_and", "logical_or"),
    ),
    Mutant(
        id="logical-not-bitwise",
        file=FILE,
        find="return stablehlo.NotOp(hlo.convert(x, ctx.in_avals[0], dt.bool_)).result",
        replace="return hlo.convert(stablehlo.NotOp(x).result, ctx.in_avals[0], dt.bool_)",
        why="logical_not applies stablehlo.not before converting to bool (bitwise not of int32)",
        ops=("logical_not",),
    ),
    Mutant(
        id="negative-as-zero-minus",
        file=FILE,
        find="return stablehlo.NegOp(x).result",
        replace="return stablehlo.SubtractOp(hlo.constant(0, ctx.in_avals[0].dtype, ctx.in_avals[0].shape), x).result",
        why="negative lowered as 0 - x: the negative of 0.0 comes out +0.0 instead of -0.0",
        ops=("negative",),
    ),
    Mutant(
        id="abs-int-via-float32",
        file=FILE,
        find="    return stablehlo.AbsOp(x).result",
        replace=(
            "    if ctx.in_avals[0].dtype == dt.int32:\n"
            "        wide = hlo.convert(x, ctx.in_avals[0], dt.float32)\n"
            "        wide = stablehlo.AbsOp(wide).result\n"
            "        return hlo.convert(wide, Aval(ctx.in_avals[0].shape, dt.float32), dt.int32)\n"
            "    return stablehlo.AbsOp(x).result"
        ),
        why="abs of int32 goes through float32 (wrong above 2**24 and for -2**31)",
        ops=("abs",),
    ),
    Mutant(
        id="rsqrt-wired-to-sqrt",
        file=FILE,
        find='rule("rsqrt")(_float_unary(stablehlo.RsqrtOp))',
        replace='rule("rsqrt")(_float_unary(stablehlo.SqrtOp))',
        why="rsqrt registered with the sqrt op class (copy-paste of the line above)",
        ops=("rsqrt",),
    ),
    Mutant(
        id="rsqrt-as-reciprocal-sqrt",
        file=FILE,
        find='rule("rsqrt")(_float_unary(stablehlo.RsqrtOp))\n',
        replace=(
            '@rule("rsqrt")\n'
            "def _rsqrt(ctx, x):\n"
            "    x = hlo.convert(x, ctx.in_avals[0], ctx.out_aval.dtype)\n"
            "    one = hlo.constant(1, ctx.out_aval.dtype, ctx.out_aval.shape)\n"
            "    return stablehlo.DivOp(one, stablehlo.SqrtOp(x).result).result\n"
        ),
        why="rsqrt lowered as 1 / sqrt(x)",
        ops=("rsqrt",),
        equivalent=(
            "NumPy's reference is reciprocal(sqrt(x)) itself; the two roundings differ from one rsqrt "
            "by at most an ulp, inside the tolerance, and 0, -0.0, inf and NaN map alike"
        ),
    ),
    Mutant(
        id="float-unary-without-convert",
        file=FILE,
        find="return op_class(hlo.convert(x, ctx.in_avals[0], ctx.out_aval.dtype)).result",
        replace="return op_class(x).result",
        why="exp/log/sqrt/... apply the float op to int32 and bool inputs without converting them first",
        ops=("exp", "sqrt"),
    ),
    Mutant(
        id="log-as-log1p",
        file=FILE,
        find='rule("log")(_float_unary(stablehlo.LogOp))',
        replace='rule("log")(_float_unary(stablehlo.Log1pOp))',
        why="log registered with stablehlo.log_plus_one",
        ops=("log",),
    ),
    Mutant(
        id="where-branches-swapped",
        file=FILE,
        find="return hlo.select(pred, on_true, on_false)",
        replace="return hlo.select(pred, on_false, on_true)",
        why="where selects y where the condition holds",
        ops=("where",),
    ),
    Mutant(
        id="where-mask-arithmetic",
        file=FILE,
        find="    return hlo.select(pred, on_true, on_false)",
        replace=(
            "    mask = hlo.convert(pred, Aval(out.shape, dt.bool_), out.dtype)\n"
            "    inverse = stablehlo.SubtractOp(hlo.constant(1, out.dtype, out.shape), mask).result\n"
            "    kept = stablehlo.MulOp(mask, on_true).result\n"
            "    return stablehlo.AddOp(kept, stablehlo.MulOp(inverse, on_false).result).result"
        ),
        why="where computed as mask*x + (1-mask)*y: inf or NaN in the unselected branch leaks in as NaN",
        ops=("where",),
    ),
    Mutant(
        id="bool-add-as-xor",
        file=FILE,
        find="return stablehlo.OrOp(lhs, rhs).result",
        replace="return stablehlo.XorOp(lhs, rhs).result",
        why="add on bool is XOR (wrapping 1-bit addition) instead of OR",
        ops=("add",),
    ),
    Mutant(
        id="bool-maximum-as-and",
        file=FILE,
        find='rule("maximum")(_arith(stablehlo.MaxOp, stablehlo.OrOp))',
        replace='rule("maximum")(_arith(stablehlo.MaxOp, stablehlo.AndOp))',
        why="maximum on bool uses AND (the minimum's combiner)",
        ops=("maximum",),
    ),
    Mutant(
        id="maximum-select-drops-nan",
        file=FILE,
        find='rule("maximum")(_arith(stablehlo.MaxOp, stablehlo.OrOp))',
        replace=(
            'rule("maximum")(_arith(lambda a, b: stablehlo.SelectOp('
            'stablehlo.CompareOp(a, b, stablehlo.ComparisonDirectionAttr.get("GT")).result, a, b), stablehlo.OrOp))'
        ),
        why="maximum as select(x > y, x, y): a NaN in x is dropped instead of propagated",
        ops=("maximum",),
    ),
    Mutant(
        id="astype-bool-through-int32",
        file=FILE,
        find="def _astype(ctx, x, *, dtype):\n    return hlo.convert(x, ctx.in_avals[0], dtype)",
        replace=(
            "def _astype(ctx, x, *, dtype):\n"
            "    if dtype == dt.bool_ and ctx.in_avals[0].dtype in dt.FLOATING:\n"
            "        x = hlo.convert(x, ctx.in_avals[0], dt.int32)\n"
            "        return hlo.convert(x, Aval(ctx.in_avals[0].shape, dt.int32), dtype)\n"
            "    return hlo.convert(x, ctx.in_avals[0], dtype)"
        ),
        why="astype(bool) of floats truncates to int32 first, so 0.5 becomes False (NumPy: x != 0)",
        ops=("astype",),
    ),
    Mutant(
        id="astype-int-rounds",
        file=FILE,
        find="def _astype(ctx, x, *, dtype):\n    return hlo.convert(x, ctx.in_avals[0], dtype)",
        replace=(
            "def _astype(ctx, x, *, dtype):\n"
            "    if dtype == dt.int32 and ctx.in_avals[0].dtype in dt.FLOATING:\n"
            "        x = stablehlo.RoundNearestEvenOp(x).result\n"
            "    return hlo.convert(x, ctx.in_avals[0], dtype)"
        ),
        why="float -> int32 rounds to nearest instead of truncating toward zero",
        ops=("astype",),
    ),
    Mutant(
        id="add-zero-constant-left-to-xla",
        file=FILE,
        find="""        if hlo.is_zero_constant(y):
            return hlo.plus_zero(lhs, out)""",
        replace="""        if False:
            return hlo.plus_zero(lhs, out)""",
        why="x + 0.0 is emitted as a plain add, which XLA folds to x (keeping -0.0, IEEE gives +0.0)",
        ops=("add",),
    ),
    Mutant(
        id="subtract-negative-zero-left-to-xla",
        file=FILE,
        find="if out.dtype in dt.FLOATING and hlo.is_zero_constant(y, -1.0):",
        replace="if out.dtype in dt.FLOATING and hlo.is_zero_constant(y, 1.0):",
        why="the x - (-0.0) fix-up checks for +0 instead, so XLA folds x - (-0.0) to x (keeping -0.0)",
        ops=("subtract",),
    ),
]
