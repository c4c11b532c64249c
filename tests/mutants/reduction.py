"""Mutants of hlotrace/lowering/rules/reduction/ and of the VJPs in hlotrace/ops/reduction/statistics.py
(see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/reduction/basic.py"
STATISTICS = "hlotrace/lowering/rules/reduction/statistics.py"
STATISTICS_OPS = "hlotrace/ops/reduction/statistics.py"
BUILDER = "hlotrace/lowering/builder.py"

MUTANTS = [
    Mutant(
        id="max-int-init-off-by-one",
        file=FILE,
        find='return info.min if op_name == "max" else info.max',
        replace='return -info.max if op_name == "max" else info.max',
        why="int32 max starts from -(2**31-1) instead of -2**31 (a slice of all -2**31 gives -2**31+1)",
        ops=("max",),
    ),
    Mutant(
        id="int-identities-swapped",
        file=FILE,
        find='return info.min if op_name == "max" else info.max',
        replace='return info.max if op_name == "max" else info.min',
        why="int32 max starts from INT_MAX and min from INT_MIN (identities swapped)",
        ops=("max", "min"),
    ),
    Mutant(
        id="float-init-lowest-finite",
        file=FILE,
        find='return -np.inf if op_name == "max" else np.inf',
        replace='return float(np.finfo(np.float32).min) if op_name == "max" else float(np.finfo(np.float32).max)',
        why="float max/min start from float32's lowest/highest finite value instead of -inf/+inf",
        ops=("max", "min"),
    ),
    Mutant(
        id="bool-max-as-and",
        file=FILE,
        find='"max": (stablehlo.MaxOp, stablehlo.OrOp),',
        replace='"max": (stablehlo.MaxOp, stablehlo.AndOp),',
        why="max over bool combines with AND (all) instead of OR (any)",
        ops=("max",),
    ),
    Mutant(
        id="bool-min-as-or",
        file=FILE,
        find='"min": (stablehlo.MinOp, stablehlo.AndOp),',
        replace='"min": (stablehlo.MinOp, stablehlo.OrOp),',
        why="min over bool combines with OR (any) instead of AND (all)",
        ops=("min",),
    ),
    Mutant(
        id="bool-identities-swapped",
        file=FILE,
        find='return op_name == "min"',
        replace='return op_name == "max"',
        why="bool max starts from True and min from False",
        ops=("max", "min"),
    ),
    Mutant(
        id="drop-any-nan-guard",
        file=FILE,
        find=(
            '        if op_name in ("max", "min") and acc in dt.FLOATING:\n'
            "            value = _propagate_nan(x, x_aval, axis, value, shape)\n"
        ),
        replace="",
        why="no any-NaN guard: XLA:CPU drops NaN from float max/min of 4096+ elements (YNNPACK)",
        ops=("max", "min"),
    ),
    Mutant(
        id="nan-guard-float32-only",
        file=FILE,
        find='if op_name in ("max", "min") and acc in dt.FLOATING:',
        replace='if op_name in ("max", "min") and acc == dt.float32:',
        why="the any-NaN guard is applied to float32 only, not float16/bfloat16",
        ops=("max", "min"),
    ),
    Mutant(
        id="nan-guard-all-not-any",
        file=FILE,
        find="any_nan = reduce(is_nan, Aval(x_aval.shape, dt.bool_), axis, False, stablehlo.OrOp)",
        replace="any_nan = reduce(is_nan, Aval(x_aval.shape, dt.bool_), axis, True, stablehlo.AndOp)",
        why="the NaN guard reduces with all() instead of any(): only all-NaN slices give NaN",
        ops=("max", "min"),
    ),
    Mutant(
        id="nan-guard-select-swapped",
        file=FILE,
        find="return hlo.select(any_nan, hlo.constant(np.nan, x_aval.dtype, shape), value)",
        replace="return hlo.select(any_nan, value, hlo.constant(np.nan, x_aval.dtype, shape))",
        why="the NaN guard's select has its branches swapped (NaN where there is none)",
        ops=("max", "min"),
    ),
    Mutant(
        id="nan-check-compare-type-signed",
        file=FILE,
        find='is_nan = hlo.compare(x, x, "NE", x_aval.dtype)',
        replace='is_nan = hlo.compare(x, x, "NE", dt.int32)',
        why="the any-NaN check passes the wrong dtype to compare, which then compares floats as SIGNED",
        ops=("max", "min"),
    ),
    Mutant(
        id="sum-accumulates-in-input-dtype",
        file=FILE,
        find="acc = accumulation_dtype(op_name, x_aval.dtype)",
        replace="acc = x_aval.dtype if x_aval.dtype in dt.FLOATING else accumulation_dtype(op_name, x_aval.dtype)",
        why="float16/bfloat16 sum and mean accumulate in their own dtype instead of float32",
        ops=("sum", "mean"),
    ),
    Mutant(
        id="mean-divides-by-total-size",
        file=FILE,
        find="count = math.prod(x_aval.shape[a] for a in axis)",
        replace="count = math.prod(x_aval.shape)",
        why="mean divides by the input's total size instead of the reduced slice's size",
        ops=("mean",),
    ),
    Mutant(
        id="keepdims-broadcast-leading-dims",
        file=FILE,
        find="value = hlo.reshape(value, out.shape, out.dtype)",
        replace="value = hlo.broadcast_in_dim(value, out.shape, list(range(len(shape))))",
        why="keepdims maps the kept dims onto the leading result dims instead of reshaping",
        ops=("sum", "max"),
    ),
    Mutant(
        id="sum-bool-combiner-or",
        file=FILE,
        find='"sum": (stablehlo.AddOp, None),',
        replace='"sum": (stablehlo.AddOp, stablehlo.OrOp),',
        why="sum gets OR as its bool combiner (copied from max)",
        ops=("sum",),
        equivalent="sum of bool accumulates in int32 (accumulation_dtype), so the bool combiner is never used",
    ),
    Mutant(
        id="sum-keeps-negative-zero",
        file=FILE,
        find='if op_name in ("sum", "mean") and acc in dt.FLOATING:',
        replace='if op_name in ("sum", "mean") and acc in dt.FLOATING and not axis:',
        why="float sums skip the +0 fix-up: XLA's one-element and constant-folded sums give -0.0 (NumPy: +0.0)",
        ops=("sum", "mean"),
    ),
    Mutant(
        id="float-identities-swapped",
        file=FILE,
        find='return -np.inf if op_name == "max" else np.inf',
        replace='return np.inf if op_name == "max" else -np.inf',
        why="float max starts from +inf and min from -inf (identities swapped)",
        ops=("max", "min"),
    ),
    # -- any, all, prod, var, logsumexp (hlotrace/ops/reduction/statistics.py and its rules) --
    Mutant(
        id="any-starts-true",
        file=STATISTICS,
        find='combiner, init = (stablehlo.OrOp, False) if name == "any" else (stablehlo.AndOp, True)',
        replace='combiner, init = (stablehlo.OrOp, True) if name == "any" else (stablehlo.AndOp, True)',
        why="any's OR-reduction starts from True: every slice (even of zeros, or empty) is true",
        ops=("any",),
    ),
    Mutant(
        id="all-as-or",
        file=STATISTICS,
        find='combiner, init = (stablehlo.OrOp, False) if name == "any" else (stablehlo.AndOp, True)',
        replace='combiner, init = (stablehlo.OrOp, False) if name == "any" else (stablehlo.OrOp, True)',
        why="all combines with OR (copied from any)",
        ops=("all",),
    ),
    Mutant(
        id="any-abs-greater-than-zero",
        file=STATISTICS,
        find="truth = hlo.convert(x, aval, dt.bool_)  # x != 0: NaN is true, -0.0 false",
        replace='truth = hlo.compare(stablehlo.AbsOp(x).result, hlo.constant(0, aval.dtype, aval.shape), "GT", aval.dtype)',
        why="truth as |x| > 0: NaN counts as false (and |INT_MIN| wraps to a negative value)",
        ops=("any", "all"),
    ),
    Mutant(
        id="prod-starts-at-zero",
        file=STATISTICS,
        find="value = reduce(hlo.convert(x, aval, acc), Aval(aval.shape, acc), axis, 1, stablehlo.MulOp)",
        replace="value = reduce(hlo.convert(x, aval, acc), Aval(aval.shape, acc), axis, 0, stablehlo.MulOp)",
        why="prod's reduction starts from 0 (copied from sum): every product is 0",
        ops=("prod",),
    ),
    Mutant(
        id="prod-half-in-own-dtype",
        file=STATISTICS,
        find='acc = compute_dtype("prod", aval.dtype)',
        replace='acc = aval.dtype if aval.dtype in dt.FLOATING else compute_dtype("prod", aval.dtype)',
        why="float16/bfloat16 products are rounded at every step instead of once from float32",
        ops=("prod",),
    ),
    Mutant(
        id="prod-int32-in-float32",
        file=STATISTICS,
        find='acc = compute_dtype("prod", aval.dtype)',
        replace='acc = dt.float32 if aval.dtype == dt.int32 else compute_dtype("prod", aval.dtype)',
        why="int32 products go through float32: they round and saturate instead of wrapping",
        ops=("prod",),
    ),
    Mutant(
        id="var-one-pass",
        file=STATISTICS,
        find=(
            "    deviation = stablehlo.SubtractOp(value, hlo.broadcast_in_dim(mean, aval.shape, kept)).result\n"
            "    squares = reduce(stablehlo.MulOp(deviation, deviation).result, wide, axis, 0, stablehlo.AddOp)\n"
        ),
        replace=(
            "    squares = reduce(stablehlo.MulOp(value, value).result, wide, axis, 0, stablehlo.AddOp)\n"
            "    squares = stablehlo.SubtractOp(squares, stablehlo.MulOp(total, mean).result).result\n"
        ),
        why="var as sum(x**2) - n * mean**2 in one pass: cancels catastrophically far from 0",
        ops=("var",),
    ),
    Mutant(
        id="var-ignores-ddof",
        file=STATISTICS,
        find="hlo.constant(max(count - ddof, 0), acc, shape)",
        replace="hlo.constant(count, acc, shape)",
        why="var always divides by n (ddof dropped)",
        ops=("var",),
    ),
    Mutant(
        id="logsumexp-unguarded-shift",
        file=STATISTICS,
        find="    peak = hlo.select(stablehlo.IsFiniteOp(peak).result, peak, hlo.constant(0, acc, shape))\n",
        replace="",
        why="logsumexp shifts by an infinite max: -inf - -inf and inf - inf give NaN (all -inf: -inf; +inf: inf)",
        ops=("logsumexp",),
    ),
    Mutant(
        id="logsumexp-max-starts-at-zero",
        file=STATISTICS,
        find="peak = reduce(value, wide, axis, -np.inf, stablehlo.MaxOp)",
        replace="peak = reduce(value, wide, axis, 0, stablehlo.MaxOp)",
        why="the max shift starts from 0: slices of large negative values underflow to log(0) = -inf",
        ops=("logsumexp",),
    ),
    # VJPs (killed by tests/test_gradients.py)
    Mutant(
        id="prod-vjp-naive-division",
        file=STATISTICS_OPS,
        find="    g = F.multiply(F.multiply(before, after), F.reshape(ct, (*lead, 1)))\n",
        replace="    g = F.multiply(F.divide(F.reshape(out, (*lead, 1)), flat), F.reshape(ct, (*lead, 1)))\n",
        why="prod's gradient as out / x: NaN at a zero (the product of the others is lost)",
        ops=("prod",),
    ),
    Mutant(
        id="var-vjp-missing-two",
        file=STATISTICS_OPS,
        find="half_denominator = max(count - ddof, 0) / 2",
        replace="half_denominator = max(count - ddof, 0)",
        why="d var / dx = 2 (x - mean) / (n - ddof) loses its factor 2",
        ops=("var",),
    ),
    Mutant(
        id="logsumexp-vjp-unnormalized",
        file=STATISTICS_OPS,
        find="F.exp(F.subtract(x, _spread(out, x, axis, keepdims)))",
        replace="F.exp(x)",
        why="logsumexp's gradient as exp(x) instead of the softmax exp(x - logsumexp(x))",
        ops=("logsumexp",),
    ),
    Mutant(
        id="empty-reduction-folded",
        file=BUILDER,
        find="    if in_avals and all(0 in a.shape for a in in_avals):\n",
        replace="    if False:\n",
        why="a sum or matmul over an empty axis reaches XLA as a foldable constant: 0 + (-0.0) gives -0.0",
        ops=("sum", "matmul"),
    ),
]
