"""Mutants of hlotrace/lowering/rules/creation.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/creation.py"

MUTANTS = [
    Mutant(
        id="ones-copied-from-zeros",
        file=FILE,
        find="    return hlo.constant(1, dtype, shape)",
        replace="    return hlo.constant(0, dtype, shape)",
        why="the ones rule was copied from zeros and still fills with 0",
        ops=("ones",),
    ),
    Mutant(
        id="full-value-through-float",
        file=FILE,
        find="    return hlo.constant(value, dtype, shape)",
        replace="    return hlo.constant(float(value), dtype, shape)",
        why="full builds its constant from float(value): int64 values above 2**53 are rounded",
        ops=("full",),
    ),
    Mutant(
        id="arange-computed-in-result-dtype",
        file=FILE,
        find="compute = dtype if dtype in dt.INTEGER else compute_dtype(dtype)",
        replace="compute = dtype",
        why="float16/bfloat16 aranges multiply and add in their own dtype, rounding twice",
        ops=("arange",),
    ),
    Mutant(
        id="arange-computed-in-int32",
        file=FILE,
        find="compute = dtype if dtype in dt.INTEGER else compute_dtype(dtype)",
        replace="compute = dt.int32",
        why="aranges are computed in int32 and converted at the end: float steps are truncated",
        ops=("arange",),
    ),
    Mutant(
        id="arange-plus-zero-dropped",
        file=FILE,
        find="    if compute in dt.FLOATING and hlo.is_zero_constant(offset):",
        replace="    if False:",
        why="start 0.0 is added as x + 0.0, which XLA folds away: 0 * (negative step) stays -0.0",
        ops=("arange",),
    ),
    Mutant(
        id="arange-step-not-wrapped",
        file=FILE,
        find="        step = (step + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)\n",
        replace="",
        why="a step beyond the integer dtype's range is not wrapped, so its constant cannot be built",
        ops=("arange",),
    ),
]

MUTANTS += [
    Mutant(
        id="eye-row-minus-column",
        file=FILE,
        find="    diagonal = stablehlo.SubtractOp(cols, rows).result\n    hot = ",
        replace="    diagonal = stablehlo.SubtractOp(rows, cols).result\n    hot = ",
        why="eye measures the diagonal as row - column: k above the diagonal lands below it",
        ops=("eye",),
    ),
    Mutant(
        id="linspace-one-product",
        file=FILE,
        find="        hi, lo = linspace_step_parts((stop - start) / div)\n",
        replace="        hi, lo = (stop - start) / div, 0.0\n",
        why="i * step is one product, which XLA fuses with + start: one rounding instead of NumPy's two",
        ops=("linspace",),
    ),
    Mutant(
        id="linspace-no-endpoint",
        file=FILE,
        find="        if endpoint:\n            last = ",
        replace="        if False:\n            last = ",
        why="the last value is start + (num - 1) * step, not stop itself (NumPy sets it to stop)",
        ops=("linspace",),
    ),
    Mutant(
        id="linspace-truncates",
        file=FILE,
        find="        value = stablehlo.FloorOp(value).result\n",
        replace="        pass\n",
        why="integer linspace converts (truncating toward zero) instead of flooring first",
        ops=("linspace",),
    ),
    Mutant(
        id="linspace-plus-zero-dropped",
        file=FILE,
        find="        if hlo.is_zero_constant(offset):\n            value = hlo.plus_zero(value, wide)",
        replace="        if False:\n            value = hlo.plus_zero(value, wide)",
        why="start 0.0 is added as x + 0.0, which XLA folds away: 0 * (negative step) stays -0.0",
        ops=("linspace",),
    ),
]
