"""Mutants of hlotrace/passes/fuse_reductions.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/passes/fuse_reductions.py"

MUTANTS = [
    Mutant(
        id="sums-merged",
        file=FILE,
        find='MERGEABLE = ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.or", "stablehlo.and")',
        replace='MERGEABLE = ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.or", "stablehlo.and", "stablehlo.add")',
        why="the cost rule forgets that merged f32 sums run 3x slower (YNNPACK's tree sum is lost)",
    ),
    Mutant(
        id="dependency-ignored",
        file=FILE,
        find="                if any(_depends_on(v, first, position) for v in operands):",
        replace="                if False:",
        why="a reduction that reads the other's result is merged with it (an op using its own result)",
        equivalent=(
            "a path from the first reduction to the second's operand always runs through a user of the "
            "first placed before the second, which _users_before refuses, and hoisting stops at the first "
            "reduction: the check is defence in depth"
        ),
    ),
    Mutant(
        id="users-before-ignored",
        file=FILE,
        find="                if not _users_before(first, position[second], position):",
        replace="                if True:",
        why="the merged op is placed at the later reduction although the earlier one's result is used before it",
    ),
    Mutant(
        id="combiners-misaligned",
        file=FILE,
        find="    names = combiners(a) + combiners(b)",
        replace="    names = combiners(b) + combiners(a)",
        why="the merged body applies the second reduction's combiner to the first one's operand",
    ),
    Mutant(
        id="dimensions-not-in-key",
        file=FILE,
        find="    return (tuple(ir.RankedTensorType(operand.type).shape), _dimensions(op))",
        replace="    return (tuple(ir.RankedTensorType(operand.type).shape),)",
        why="reductions over different dimensions are treated as siblings",
    ),
    Mutant(
        id="body-check-skips-operands",
        file=FILE,
        find="        if {_index(owner.operands[0], args), _index(owner.operands[1], args)} != {i, n + i}:",
        replace="        if False:",
        why="a body combining the wrong block arguments (acc_i with x_j) is accepted as mergeable",
    ),
]
