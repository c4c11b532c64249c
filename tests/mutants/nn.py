"""Mutants of hlotrace/lowering/rules/nn.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/nn.py"

MUTANTS = [
    Mutant(
        id="relu-strict-compare",
        file=FILE,
        find='return hlo.select(hlo.compare(x, zero, "LE", aval.dtype), zero, x)',
        replace='return hlo.select(hlo.compare(x, zero, "LT", aval.dtype), zero, x)',
        why="relu zeroes only x < 0, so relu(-0.0) stays -0.0 (the reference gives +0.0)",
        ops=("relu",),
    ),
    Mutant(
        id="relu-drops-nan",
        file=FILE,
        find='return hlo.select(hlo.compare(x, zero, "LE", aval.dtype), zero, x)',
        replace='return hlo.select(hlo.compare(x, zero, "GT", aval.dtype), x, zero)',
        why="relu as select(x > 0, x, 0): NaN compares false and becomes 0 instead of propagating",
        ops=("relu",),
    ),
    Mutant(
        id="sigmoid-naive-exp-ratio",
        file=FILE,
        find="    value = stablehlo.LogisticOp(hlo.convert(x, aval, wide.dtype)).result\n",
        replace=(
            "    e = stablehlo.ExpOp(hlo.convert(x, aval, wide.dtype)).result\n"
            "    value = stablehlo.DivOp(e, stablehlo.AddOp(hlo.constant(1, wide.dtype, aval.shape), e).result).result\n"
        ),
        why="sigmoid as exp(x) / (1 + exp(x)): inf / inf = NaN for large x instead of 1",
        ops=("sigmoid",),
    ),
    Mutant(
        id="log-softmax-no-max-shift",
        file=FILE,
        find="shifted = stablehlo.SubtractOp(value, hlo.broadcast_in_dim(peak, aval.shape, keep)).result",
        replace="shifted = value",
        why="log_softmax without subtracting the max first: exp overflows to inf for large logits",
        ops=("log_softmax",),
    ),
    Mutant(
        id="log-softmax-assumes-last-axis",
        file=FILE,
        find="keep = [d for d in range(len(aval.shape)) if d != axis]",
        replace="keep = list(range(len(aval.shape) - 1))",
        why="the reduced max and sum are broadcast back as if the axis were the last one",
        ops=("log_softmax",),
    ),
    Mutant(
        id="log-softmax-max-starts-at-zero",
        file=FILE,
        find='peak = reduce(value, wide, (axis,), float("-inf"), stablehlo.MaxOp)',
        replace="peak = reduce(value, wide, (axis,), 0.0, stablehlo.MaxOp)",
        why="the max reduction starts from 0 (like the sum's): slices of only large negative logits underflow",
        ops=("log_softmax",),
    ),
    Mutant(
        id="one-hot-iota-first-dim",
        file=FILE,
        find="classes = stablehlo.IotaOp(hlo.tensor_type(out.shape, aval.dtype), rank).result",
        replace="classes = stablehlo.IotaOp(hlo.tensor_type(out.shape, aval.dtype), 0).result",
        why="the class index iota counts along the first dim instead of the new last one",
        ops=("one_hot",),
    ),
    Mutant(
        id="one-hot-labels-through-int32",
        file=FILE,
        find="    spread = hlo.broadcast_in_dim(labels, out.shape, list(range(rank)))\n",
        replace=(
            "    labels = hlo.convert(labels, aval, dt.int32)\n"
            "    aval = Aval(aval.shape, dt.int32)\n"
            "    spread = hlo.broadcast_in_dim(labels, out.shape, list(range(rank)))\n"
            "    classes = stablehlo.IotaOp(hlo.tensor_type(out.shape, dt.int32), rank).result\n"
        ),
        why="labels are converted to int32 first: an int64 label 2**32 + 1 wraps to class 1",
        ops=("one_hot",),
    ),
    Mutant(
        id="clip-min-inclusive",
        file=FILE,
        find='value = hlo.select(hlo.compare(value, lo, "LT", out.dtype), lo, value)',
        replace='value = hlo.select(hlo.compare(value, lo, "LE", out.dtype), lo, value)',
        why="clip replaces x <= min (not x < min) by min: -0.0 clipped at min=+0.0 becomes +0.0",
        ops=("clip",),
    ),
    Mutant(
        id="clip-as-clamp",
        file=FILE,
        find="    value = hlo.convert(x, aval, out.dtype)\n    if min is not None:",
        replace=(
            "    value = hlo.convert(x, aval, out.dtype)\n"
            "    if min is not None and max is not None:\n"
            "        lo, hi = hlo.constant(min, out.dtype, out.shape), hlo.constant(max, out.dtype, out.shape)\n"
            "        return stablehlo.ClampOp(lo, value, hi).result\n"
            "    if min is not None:"
        ),
        why="clip with both bounds as stablehlo.clamp, whose max/min order -0.0 below +0.0",
        ops=("clip",),
    ),
    Mutant(
        id="clip-max-applied-first",
        file=FILE,
        find=(
            "    if min is not None:\n"
            "        lo = hlo.constant(min, out.dtype, out.shape)\n"
            '        value = hlo.select(hlo.compare(value, lo, "LT", out.dtype), lo, value)\n'
            "    if max is not None:\n"
            "        hi = hlo.constant(max, out.dtype, out.shape)\n"
            '        value = hlo.select(hlo.compare(value, hi, "GT", out.dtype), hi, value)\n'
        ),
        replace=(
            "    if max is not None:\n"
            "        hi = hlo.constant(max, out.dtype, out.shape)\n"
            '        value = hlo.select(hlo.compare(value, hi, "GT", out.dtype), hi, value)\n'
            "    if min is not None:\n"
            "        lo = hlo.constant(min, out.dtype, out.shape)\n"
            '        value = hlo.select(hlo.compare(value, lo, "LT", out.dtype), lo, value)\n'
        ),
        why="clip applies max before min, so min > max gives min everywhere (NumPy: max)",
        ops=("clip",),
    ),
]
