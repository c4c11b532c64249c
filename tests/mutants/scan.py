"""Mutants of hlotrace/lowering/rules/cumulative.py and of the scan VJPs in hlotrace/ops/cumulative.py
(see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/cumulative.py"
OPS_FILE = "hlotrace/ops/cumulative.py"

MUTANTS = [
    Mutant(
        id="window-off-by-one",
        file=FILE,
        find="padding[axis] = [0, n - 1] if reverse else [n - 1, 0]",
        replace="padding[axis] = [0, n - 1] if reverse else [n - 2, 1]",
        why="the window is padded one short before the axis: output i sums x[i - n + 2 .. i + 1]",
        ops=("cumsum", "cumprod"),
    ),
    Mutant(
        id="exclusive-scan",
        file=FILE,
        find="padding[axis] = [0, n - 1] if reverse else [n - 1, 0]",
        replace="padding[axis] = [0, n - 1] if reverse else [n, -1]",
        why="an exclusive scan: output i combines x[0 .. i - 1] (the start value for i = 0)",
        ops=("cumsum", "cumprod"),
    ),
    Mutant(
        id="reverse-ignored",
        file=FILE,
        find="padding[axis] = [0, n - 1] if reverse else [n - 1, 0]",
        replace="padding[axis] = [n - 1, 0]",
        why="reverse=True scans from the start like a forward scan",
        ops=("cumsum", "cumprod"),
    ),
    Mutant(
        id="float-sum-starts-at-plus-zero",
        file=FILE,
        find='init = (-0.0 if acc in dt.FLOATING else 0) if name == "cumsum" else 1',
        replace='init = 0 if name == "cumsum" else 1',
        why="float prefix sums start at +0.0: a leading -0.0 becomes +0.0 (NumPy keeps x[0] as it is)",
        ops=("cumsum",),
    ),
    Mutant(
        id="cumprod-starts-at-zero",
        file=FILE,
        find='init = (-0.0 if acc in dt.FLOATING else 0) if name == "cumsum" else 1',
        replace='init = (-0.0 if acc in dt.FLOATING else 0) if name == "cumsum" else 0',
        why="cumprod's start (and padding) value is copied from cumsum's: every product is 0",
        ops=("cumprod",),
    ),
    Mutant(
        id="half-scans-in-own-dtype",
        file=FILE,
        find="acc = accumulation_dtype(out.dtype)",
        replace="acc = out.dtype",
        why="float16/bfloat16 scans accumulate in their own dtype instead of float32 (rounding at every step)",
        ops=("cumsum", "cumprod"),
    ),
    # -- VJPs (killed by tests/test_gradients.py) --
    Mutant(
        id="cumsum-vjp-not-reversed",
        file=OPS_FILE,
        find="g = F.cumsum(ct, axis=0 if axis is None else axis, reverse=not reverse)",
        replace="g = F.cumsum(ct, axis=0 if axis is None else axis, reverse=reverse)",
        why="cumsum's cotangent is scanned in the forward direction instead of reversed",
        ops=("cumsum",),
    ),
    Mutant(
        id="cumprod-vjp-naive-division",
        file=OPS_FILE,
        find="    g = F.where(before, g_before, F.where(first, g_first, 0))\n",
        replace="    g = F.divide(tail(F.multiply(ct, out)), x)\n",
        why="cumprod's gradient as reverse_cumsum(ct * out) / x: NaN/inf at zeros, 0 where a zero came earlier",
        ops=("cumprod",),
    ),
    Mutant(
        id="cumprod-vjp-zero-after-first",
        file=OPS_FILE,
        find="    g = F.where(before, g_before, F.where(first, g_first, 0))\n",
        replace="    g = F.where(before, g_before, 0)\n",
        why="the first zero of a slice gets no gradient (the product of the others is lost)",
        ops=("cumprod",),
    ),
]
