"""Mutants of hlotrace/lowering/rules/linalg.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/linalg.py"

MUTANTS = [
    Mutant(
        id="transpose-a-ignored",
        file=FILE,
        find="lhs_contracting_dimensions=[rank_a - 2 if transpose_a else rank_a - 1],",
        replace="lhs_contracting_dimensions=[rank_a - 1],",
        why="matmul ignores transpose_a when choosing a's contracting dimension",
        ops=("matmul",),
    ),
    Mutant(
        id="rhs-contracting-swapped",
        file=FILE,
        find="rhs_contracting_dimensions=[rank_b - 1 if transpose_b else rank_b - 2],",
        replace="rhs_contracting_dimensions=[rank_b - 2 if transpose_b else rank_b - 1],",
        why="b's contracting dimension is chosen the wrong way round for transpose_b",
        ops=("matmul",),
    ),
    Mutant(
        id="transpose-b-free-dim",
        file=FILE,
        find="m = shape_b[-2] if transpose_b else shape_b[-1]",
        replace="m = shape_b[-1]",
        why="the result's column count ignores transpose_b",
        ops=("matmul",),
    ),
    Mutant(
        id="inverse-transpose-perm",
        file=FILE,
        find="result = stablehlo.TransposeOp(result, [layout.index(d) for d in order]).result",
        replace="result = stablehlo.TransposeOp(result, [order.index(d) for d in layout]).result",
        why="the transpose restoring NumPy's layout uses the inverse permutation",
        ops=("matmul",),
    ),
    Mutant(
        id="free-dims-layout-order",
        file=FILE,
        find='layout = shared + [j for j, r in enumerate(roles) if r == "a"] + ["n"]',
        replace='layout = shared + ["n"] + [j for j, r in enumerate(roles) if r == "a"]',
        why="dot_general's result layout is assumed to put a's row dim before a's own batch dims",
        ops=("matmul",),
    ),
    Mutant(
        id="size-one-batch-dim-shared",
        file=FILE,
        find="if size_a is not None and size_a == size_b:",
        replace="if size_a is not None and size_b is not None:",
        why="a batch dim present on both operands is a dot_general batch dim even when one side is 1",
        ops=("matmul",),
    ),
    Mutant(
        id="vector-a-as-column",
        file=FILE,
        find="a, shape_a = _as_matrix(a, aval_a, dot_dtype, (1, k))",
        replace="a, shape_a = _as_matrix(a, aval_a, dot_dtype, (k, 1))",
        why="a rank-1 left operand becomes a column instead of a row",
        ops=("matmul",),
    ),
    Mutant(
        id="vector-transpose-kept",
        file=FILE,
        find="    if len(aval_a.shape) == 1:\n        transpose_a = False\n",
        replace="",
        why="transpose_a is honored for a rank-1 a (NumPy: transposing a vector is a no-op)",
        ops=("matmul",),
    ),
    Mutant(
        id="float32-precision-default",
        file=FILE,
        find="precision_config=hlo.precision_config(dot_dtype)",
        replace="precision_config=None",
        why="float32 matmul without the HIGHEST precision config",
        ops=("matmul",),
        equivalent=(
            "XLA:CPU always computes float32 dots in float32; only GPUs (TF32) read the precision config, "
            "so no result changes without a CUDA run (tests/test_precision.py kills it by the module text)"
        ),
    ),
]
