"""Mutants of hlotrace/passes/simplify.py and rewrite.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/passes/simplify.py"
REWRITE = "hlotrace/passes/rewrite.py"

MUTANTS = [
    Mutant(
        id="add-positive-zero-dropped",
        file=FILE,
        find="        if _float(x) and _is(c, 0, negative_zero=True):",
        replace="        if _float(x) and _is(c, 0):",
        why="x + 0.0 is treated as x, but IEEE turns -0.0 + 0.0 into +0.0",
    ),
    Mutant(
        id="subtract-negative-zero-dropped",
        file=FILE,
        find="    return x if _is(c, 0, negative_zero=False if _float(x) else None) else None",
        replace="    return x if _is(c, 0) else None",
        why="x - (-0.0) is treated as x, but -0.0 - (-0.0) is +0.0",
    ),
    Mutant(
        id="narrowing-round-trip-dropped",
        file=FILE,
        find='_EXACT_WIDENING = {("f16", "f32"),',
        replace='_EXACT_WIDENING = {("f64", "f32"), ("f16", "f32"),',
        why="f64 -> f32 -> f64 is treated as an identity although the f32 step rounds",
    ),
    Mutant(
        id="transposes-composed-backwards",
        file=FILE,
        find="    composed = [first[p] for p in perm]",
        replace="    composed = [perm[p] for p in first]",
        why="transpose(transpose(x, p), q) is composed as p after q",
    ),
    Mutant(
        id="sum-guard-on-any-sum",
        file=FILE,
        find="    return s if _never_negative_zero(reduce.operands[0]) else None",
        replace="    return s",
        why="the -0.0 guard of every sum is dropped, though a sum of -0.0s is -0.0 in XLA",
    ),
    Mutant(
        id="nan-guard-other-sums",
        file=FILE,
        find="        if row is None or not _sum_of(row, e, dims):",
        replace="        if row is None:",
        why="the NaN guard is dropped when the denominator is a sum of something else",
    ),
    Mutant(
        id="broadcast-dims-unchecked",
        file=FILE,
        find="    return x if x.type == m.results[0].type and dims == list(range(len(dims))) else None",
        replace="    return x if x.type == m.results[0].type else None",
        why="a same-shape broadcast_in_dim that permutes dimensions is taken for an identity",
    ),
    Mutant(
        id="dead-ops-kept-when-used",
        file=REWRITE,
        find="        if all(not list(r.uses) for r in op.results):",
        replace="        if any(not list(r.uses) for r in op.results):",
        why="an op with one unused result is erased although another result is still used",
    ),
]
