"""Mutants of the pooling family: hlotrace/lowering/rules/pooling/ (killed by the property
tests) and the VJPs in hlotrace/ops/pooling/forward.py and backward.py (killed by the
gradient tests; run with ``--columns gradient``)."""

from hlotrace.testing.mutation import Mutant

WINDOW_RULES = "hlotrace/lowering/rules/pooling/windows.py"
RULES = "hlotrace/lowering/rules/pooling/forward.py"
GRAD_RULES = "hlotrace/lowering/rules/pooling/backward.py"
OPS = "hlotrace/ops/pooling/forward.py"
GRAD_OPS = "hlotrace/ops/pooling/backward.py"
MUTANTS = [
    # -- forward rules ----------------------------------------------------------------------
    Mutant(
        id="max-pool-init-zero",
        file=WINDOW_RULES,
        find="    init = lowest(aval.dtype)\n    if aval.dtype not in dt.FLOATING:",
        replace="    init = 0\n    if aval.dtype not in dt.FLOATING:",
        why="the max starts (and pads) at 0 instead of -inf: windows of negative values give 0",
        ops=("max_pool2d", "adaptive_max_pool2d"),
    ),
    Mutant(
        id="max-pool-plain-max-for-floats",
        file=WINDOW_RULES,
        find="    if aval.dtype not in dt.FLOATING:\n        (value,), _ = reducer(",
        replace="    if True:\n        (value,), _ = reducer(",
        why="floats take a plain windowed max: XLA:CPU's vectorized path drops NaN in large windows",
        ops=("max_pool2d", "adaptive_max_pool2d"),
    ),
    Mutant(
        id="max-pool-nan-flag-dropped",
        file=WINDOW_RULES,
        find="    return hlo.select(any_nan, hlo.constant(np.nan, out.dtype, out.shape), value)",
        replace="    return value",
        why="the any-NaN flag is reduced but not used",
        ops=("max_pool2d", "adaptive_max_pool2d"),
        equivalent=(
            "XLA:CPU (jaxlib 0.10.2) keeps NaN in a variadic reduce_window (max, or): only the "
            "single-operand max goes to the vectorized path that drops it (checked on 64x64 planes, "
            "k = 2 and 4); the flag guards backends and versions that differ"
        ),
    ),
    Mutant(
        id="pool-padding-dims-swapped",
        file=WINDOW_RULES,
        find="((0, 0), (0, 0), *((p, p) for p in padding))",
        replace="((0, 0), (0, 0), *((p, p) for p in padding[::-1]))",
        why="the (h, w) padding is applied to (w, h)",
        ops=("max_pool2d", "avg_pool2d", "max_pool2d_gather"),
    ),
    Mutant(
        id="avg-pool-count-include-pad-ignored",
        file=RULES,
        find="divisors = avg_divisors(aval.shape[2:], kernel_size, stride, padding, count_include_pad)",
        replace="divisors = avg_divisors(aval.shape[2:], kernel_size, stride, padding, True)",
        why="avg_pool2d always divides by the kernel area",
        ops=("avg_pool2d",),
    ),
    Mutant(
        id="avg-pool-sums-in-half-precision",
        file=RULES,
        find=(
            "    wide = Aval(aval.shape, compute_dtype(aval.dtype))\n"
            "    window, strides, pads = window_geometry(kernel_size, stride, padding)"
        ),
        replace=(
            "    wide = Aval(aval.shape, aval.dtype)\n"
            "    window, strides, pads = window_geometry(kernel_size, stride, padding)"
        ),
        why="avg_pool2d sums float16/bfloat16 windows in their own dtype instead of float32",
        ops=("avg_pool2d",),
    ),
    Mutant(
        id="adaptive-window-end-floor",
        file=WINDOW_RULES,
        find="return [((i * n) // m, ((i + 1) * n + m - 1) // m) for i in range(m)]",
        replace="return [((i * n) // m, max((i + 1) * n // m, (i * n) // m + 1)) for i in range(m)]",
        why="adaptive windows end at floor((i + 1) * n / m) (kept non-empty) instead of the ceiling",
        ops=("adaptive_avg_pool2d", "adaptive_max_pool2d"),
    ),
    Mutant(
        id="adaptive-gathered-windows-unmasked",
        file=WINDOW_RULES,
        find="gathered.append(taken if min(sizes) == k else hlo.select(mask, taken, hlo.constant(init, aval.dtype, expanded)))",
        replace="gathered.append(taken)",
        why="shorter adaptive windows repeat their last row instead of padding with the start value",
        ops=("adaptive_avg_pool2d",),
    ),
    # -- selection and backward rules ---------------------------------------------------------
    Mutant(
        id="selection-ties-go-last",
        file=WINDOW_RULES,
        find='tie_first = stablehlo.AndOp(hlo.compare(bv, av, "EQ", dtype), stablehlo.NotOp(later).result).result',
        replace='tie_first = stablehlo.AndOp(hlo.compare(bv, av, "EQ", dtype), later).result',
        why="equal maxima go to the later element (select GT instead of GE in select_and_scatter terms)",
        ops=("max_pool2d_backward", "max_pool2d_gather", "adaptive_max_pool2d_backward"),
    ),
    Mutant(
        id="selection-first-nan",
        file=WINDOW_RULES,
        find="nan_wins = stablehlo.AndOp(b_nan, stablehlo.OrOp(stablehlo.NotOp(a_nan).result, later).result).result",
        replace="nan_wins = stablehlo.AndOp(b_nan, stablehlo.NotOp(a_nan).result).result",
        why="a window holding NaN sends its gradient to its first NaN instead of the last (PyTorch's)",
        ops=("max_pool2d_backward", "max_pool2d_gather", "adaptive_max_pool2d_gather"),
    ),
    Mutant(
        id="flat-index-transposed",
        file=WINDOW_RULES,
        find="stablehlo.MulOp(rows, hlo.constant(shape[3], INDEX, shape))",
        replace="stablehlo.MulOp(rows, hlo.constant(shape[2], INDEX, shape))",
        why="the flat spatial index is h * H + w instead of h * W + w",
        ops=("max_pool2d_backward", "adaptive_max_pool2d_backward"),
    ),
    Mutant(
        id="max-backward-overlaps-overwrite",
        file=GRAD_RULES,
        find="total = term if total is None else stablehlo.AddOp(total, term).result",
        replace=(
            'total = term if total is None else hlo.select(hlo.compare(index_at, position, "EQ", INDEX), ct_at, total)'
        ),
        why="an element selected by several overlapping windows keeps the last one's cotangent",
        ops=("max_pool2d_backward",),
    ),
    Mutant(
        id="backward-accumulates-in-half-precision",
        file=GRAD_RULES,
        find="    wide = Aval(aval.shape, compute_dtype(aval.dtype))\n    return hlo.convert(value, aval, wide.dtype), wide",
        replace="    wide = aval\n    return hlo.convert(value, aval, wide.dtype), wide",
        why="float16/bfloat16 cotangents are divided and summed in their own dtype",
        ops=("avg_pool2d_backward", "adaptive_avg_pool2d_backward", "max_pool2d_backward"),
    ),
    Mutant(
        id="avg-backward-count-include-pad-ignored",
        file=GRAD_RULES,
        find="divisors = avg_divisors(input_size, kernel_size, stride, padding, count_include_pad)",
        replace="divisors = avg_divisors(input_size, kernel_size, stride, padding, True)",
        why="avg_pool2d_backward always divides by the kernel area",
        ops=("avg_pool2d_backward",),
    ),
    Mutant(
        id="adaptive-covering-off-by-one",
        file=GRAD_RULES,
        find="if start <= h < end]",
        replace="if start <= h <= end]",
        why="a row counts as held by the adaptive window that ends just before it",
        ops=("adaptive_avg_pool2d_backward", "adaptive_max_pool2d_backward"),
    ),
    Mutant(
        id="adaptive-max-backward-unmasked",
        file=GRAD_RULES,
        find="gathered.append(hlo.select(mask, taken, hlo.constant(fill, d, expanded)))",
        replace="gathered.append(taken)",
        why="the repeated slots of rows held by fewer windows add their cotangent again",
        ops=("adaptive_max_pool2d_backward",),
    ),
    # -- VJPs (gradient column) --------------------------------------------------------------
    Mutant(
        id="vjp-max-pool-spread-evenly",
        file=OPS,
        find="return (F.max_pool2d_backward(x, ct, kernel_size, stride, padding),)",
        replace="return (F.avg_pool2d_backward(ct, x.shape[2:], kernel_size, stride, padding, True),)",
        why="max_pool2d's gradient is spread over the window like avg_pool2d's",
        ops=("max_pool2d",),
    ),
    Mutant(
        id="vjp-avg-pool-count-include-pad-ignored",
        file=OPS,
        find="return (F.avg_pool2d_backward(ct, x.shape[2:], kernel_size, stride, padding, count_include_pad),)",
        replace="return (F.avg_pool2d_backward(ct, x.shape[2:], kernel_size, stride, padding, True),)",
        why="avg_pool2d's VJP divides by the kernel area whatever count_include_pad says",
        ops=("avg_pool2d",),
    ),
    Mutant(
        id="vjp-adaptive-max-as-avg",
        file=OPS,
        find="return (F.adaptive_max_pool2d_backward(x, ct),)",
        replace="return (F.adaptive_avg_pool2d_backward(ct, x.shape[2:]),)",
        why="adaptive_max_pool2d's gradient is the average pool's",
        ops=("adaptive_max_pool2d",),
    ),
    Mutant(
        id="vjp-gather-selects-by-payload",
        file=GRAD_OPS,
        find="return (None, F.max_pool2d_backward(x, ct, kernel_size, stride, padding))",
        replace="return (None, F.max_pool2d_backward(g, ct, kernel_size, stride, padding))",
        why="max_pool2d_gather's transpose selects by the gathered tensor instead of x",
        ops=("max_pool2d_gather",),
    ),
    Mutant(
        id="vjp-adaptive-avg-backward-as-max",
        file=GRAD_OPS,
        find="(F.adaptive_avg_pool2d(ct, tuple(source.shape[2:])),)",
        replace="(F.adaptive_max_pool2d(ct, tuple(source.shape[2:])),)",
        why="adaptive_avg_pool2d_backward's VJP pools with max instead of the mean",
        ops=("adaptive_avg_pool2d_backward",),
    ),
]
