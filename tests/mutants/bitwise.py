"""Mutants of hlotrace/lowering/rules/bitwise.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/bitwise.py"

MUTANTS = [
    Mutant(
        id="right-shift-logical",
        file=FILE,
        find="        shifted = stablehlo.ShiftRightArithmeticOp(value, count).result\n",
        replace="        shifted = stablehlo.ShiftRightLogicalOp(value, count).result\n",
        why="right_shift of signed integers is logical: -8 >> 1 fills in a 0 bit instead of the sign",
        ops=("right_shift",),
    ),
    Mutant(
        id="right-shift-out-of-range-gives-zero",
        file=FILE,
        find="        return hlo.select(in_range, shifted, sign_fill)",
        replace="        return hlo.select(in_range, shifted, hlo.constant(0, out.dtype, out.shape))",
        why="a right shift by the width or more gives 0 for negative x too (NumPy: -1)",
        ops=("right_shift",),
    ),
    Mutant(
        id="left-shift-count-left-to-xla",
        file=FILE,
        find="            return hlo.select(in_range, shifted, hlo.constant(0, out.dtype, out.shape))",
        replace="            return shifted",
        why="the count of a left shift is not checked: out-of-range counts get the backend's behaviour",
        ops=("left_shift",),
        equivalent=(
            "XLA itself gives 0 for left shifts by a count outside [0, bits) (it compares the count "
            "unsigned, so negative ones too); StableHLO leaves it to the backend, hence the explicit check"
        ),
    ),
    Mutant(
        id="shift-negative-count-unchecked",
        file=FILE,
        find='            hlo.compare(count, hlo.constant(0, out.dtype, out.shape), "GE", out.dtype),\n',
        replace='            hlo.compare(count, count, "EQ", out.dtype),\n',
        why="only counts >= the width are out of range: a negative count reaches the shift itself",
        ops=("right_shift", "left_shift"),
        equivalent=(
            "XLA treats a negative count as an out-of-range one (an unsigned compare with the width): "
            "0 for left shifts, the sign for arithmetic right shifts, as the explicit check does"
        ),
    ),
    Mutant(
        id="shift-count-range-in-int32",
        file=FILE,
        find="        bits = np.iinfo(out.dtype).bits\n",
        replace="        bits = 32\n",
        why="the width is taken as 32 for every dtype: int64 shifts by 32..63 give 0",
        ops=("left_shift", "right_shift"),
    ),
    Mutant(
        id="logical-xor-bitwise",
        file=FILE,
        find="    lhs, rhs = operands_as(ctx, (x, y), dt.bool_)\n    return stablehlo.XorOp(lhs, rhs).result",
        replace=(
            "    dtype = dt.promote(*(a.dtype for a in ctx.in_avals))\n"
            "    lhs, rhs = operands_as(ctx, (x, y), dtype)\n"
            "    return hlo.convert(stablehlo.XorOp(lhs, rhs).result, Aval(ctx.out_aval.shape, dtype), dt.bool_)"
        ),
        why="logical_xor as a bitwise xor of the promoted operands then != 0 (1 xor 2 gives True)",
        ops=("logical_xor",),
    ),
    Mutant(
        id="bitwise-or-as-xor",
        file=FILE,
        find='rule("bitwise_or")(_bitwise(stablehlo.OrOp))',
        replace='rule("bitwise_or")(_bitwise(stablehlo.XorOp))',
        why="bitwise_or registered with the xor op (copy of the line below)",
        ops=("bitwise_or",),
    ),
    Mutant(
        id="bitwise-and-in-int32",
        file=FILE,
        find="        lhs, rhs = operands_as(ctx, (x, y), ctx.out_aval.dtype)\n        return op_class(lhs, rhs).result",
        replace=(
            "        out = ctx.out_aval\n"
            "        if out.dtype == dt.int64:\n"
            "            lhs, rhs = operands_as(ctx, (x, y), dt.int32)\n"
            "            return hlo.convert(op_class(lhs, rhs).result, Aval(out.shape, dt.int32), dt.int64)\n"
            "        lhs, rhs = operands_as(ctx, (x, y), out.dtype)\n"
            "        return op_class(lhs, rhs).result"
        ),
        why="and/or/xor of int64 computed in int32: the high 32 bits are lost",
        ops=("bitwise_and", "bitwise_xor"),
    ),
    Mutant(
        id="bitwise-not-as-negation",
        file=FILE,
        find="    return stablehlo.NotOp(x).result",
        replace=(
            "    if ctx.out_aval.dtype == dt.bool_:\n"
            "        return stablehlo.NotOp(x).result\n"
            "    return stablehlo.NegOp(x).result"
        ),
        why="bitwise_not of integers as -x (two's complement ~x is -x - 1)",
        ops=("bitwise_not",),
    ),
]
