"""Mutants of hlotrace/lowering/rules/shape.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/shape.py"

MUTANTS = [
    Mutant(
        id="transpose-inverse-perm",
        file=FILE,
        find="return stablehlo.TransposeOp(x, list(perm)).result",
        replace="return stablehlo.TransposeOp(x, [perm.index(i) for i in range(len(perm))]).result",
        why="transpose applies the inverse permutation (same for rank <= 2 and for swaps)",
        ops=("transpose",),
    ),
    Mutant(
        id="concat-axis-zero",
        file=FILE,
        find="return stablehlo.ConcatenateOp(converted, axis).result",
        replace="return stablehlo.ConcatenateOp(converted, 0).result",
        why="concat always joins along axis 0",
        ops=("concat",),
    ),
    Mutant(
        id="concat-without-promotion",
        file=FILE,
        find="converted = [hlo.convert(v, a, dtype) for v, a in zip(operands, ctx.in_avals, strict=True)]",
        replace="converted = list(operands)",
        why="concat of mixed dtypes does not convert its operands to the promoted dtype",
        ops=("concat",),
    ),
    Mutant(
        id="broadcast-to-rule-leading-dims",
        file=FILE,
        find="return hlo.broadcast_to(x, ctx.in_avals[0], shape)",
        replace="return hlo.broadcast_in_dim(x, shape, list(range(len(ctx.in_avals[0].shape))))",
        why="broadcast_to maps the input's dims onto the leading result dims instead of the trailing ones",
        ops=("broadcast_to",),
    ),
    Mutant(
        id="reshape-skipped-at-same-rank",
        file=FILE,
        find="if ctx.in_avals[0].shape == out.shape:",
        replace="if len(ctx.in_avals[0].shape) == len(out.shape):",
        why="reshape/squeeze/expand_dims return the input unchanged when the rank does not change",
        ops=("reshape",),
    ),
]
