"""Mutants of hlotrace/lowering/rules/sorting.py and of the sorting VJPs in
hlotrace/ops/sorting.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/sorting.py"
OPS_FILE = "hlotrace/ops/sorting.py"

MUTANTS = [
    Mutant(
        id="comparator-not-nan-aware",
        file=FILE,
        find='    return _or(less, _and(hlo.compare(a, a, "EQ", dtype), _is_nan(b, dtype)))\n',
        replace="    return less\n",
        why="the sort comparator is a plain IEEE a < b: NaN compares equal to everything and stays where it was",
        ops=("sort", "argsort", "sort_by_key"),
    ),
    Mutant(
        id="unstable-sort",
        file=FILE,
        find="op = stablehlo.SortOp(types, operands, dimension=axis, is_stable=True)",
        replace="op = stablehlo.SortOp(types, operands, dimension=axis, is_stable=False)",
        why="the sort is not marked stable: ties (and -0.0 vs 0.0) may come out in any order",
        ops=("argsort", "sort_by_key", "sort"),
    ),
    Mutant(
        id="descending-as-not-less",
        file=FILE,
        find="    if descending:\n        a, b = b, a\n",
        replace="    if descending:\n        return stablehlo.NotOp(_less(a, b, dtype)).result\n",
        why="descending compares with 'not less' (>=): not a strict order, a stable sort then reverses ties",
        ops=("argsort", "sort_by_key", "sort"),
    ),
    Mutant(
        id="argsort-iota-first-axis",
        file=FILE,
        find="    return sort_along([x, _iota(aval.shape, axis)], types, [aval.dtype, INDEX_DTYPE], axis, descending)[1]",
        replace="    return sort_along([x, _iota(aval.shape, 0)], types, [aval.dtype, INDEX_DTYPE], axis, descending)[1]",
        why="the index iota counts along the first dim instead of the sorted one",
        ops=("argsort", "sort_by_key"),
    ),
    Mutant(
        id="inverse-permutation-keeps-direction",
        file=FILE,
        find="    return sort_along([order, v], [index_type, v_type], [INDEX_DTYPE, v_aval.dtype], axis, False)[1]",
        replace="    return sort_along([order, v], [index_type, v_type], [INDEX_DTYPE, v_aval.dtype], axis, descending)[1]",
        why="the inverse permutation sorts the indices back in the keys' direction (descending un-sorts reversed)",
        ops=("sort_by_key",),
    ),
    Mutant(
        id="argmax-last-occurrence",
        file=FILE,
        find='first = _or(beats, _and(tie, hlo.compare(ia, ib, "LT", INDEX_DTYPE)))',
        replace='first = _or(beats, _and(tie, hlo.compare(ia, ib, "GT", INDEX_DTYPE)))',
        why="ties keep the higher index: argmax/argmin return the last occurrence (and the init's index)",
        ops=("argmax", "argmin"),
    ),
    Mutant(
        id="argmax-nan-not-extreme",
        file=FILE,
        find='                beats = _or(beats, _and(_is_nan(a, dtype), hlo.compare(b, b, "EQ", dtype)))\n',
        replace="",
        why="NaN does not beat numbers: argmax/argmin skip NaN (jnp.nanargmax) instead of returning its index",
        ops=("argmax", "argmin"),
    ),
    Mutant(
        id="argmax-int-init-inside-range",
        file=FILE,
        find='return info.min if name == "argmax" else info.max',
        replace='return info.min + 1 if name == "argmax" else info.max - 1',
        why="the integer start value is one step inside the range: slices of only INT_MIN (INT_MAX) lose to it",
        ops=("argmax", "argmin"),
    ),
    Mutant(
        id="argmin-bool-init-false",
        file=FILE,
        find='return name == "argmin"',
        replace="return False",
        why="bool argmin starts from False: an all-True slice keeps the start's index",
        ops=("argmin",),
    ),
    # -- VJPs (killed by tests/test_gradients.py) --
    Mutant(
        id="sort-vjp-permutes-forward",
        file=OPS_FILE,
        find="    return (F.sort_by_key(ct, x, axis=axis, descending=descending, inverse=True),)",
        replace="    return (F.sort_by_key(ct, x, axis=axis, descending=descending, inverse=False),)",
        why="sort's cotangent is permuted like the values again instead of sent back where they came from",
        ops=("sort",),
    ),
    Mutant(
        id="sort-by-key-vjp-same-direction",
        file=OPS_FILE,
        find="F.sort_by_key(ct, key, axis=axis, descending=descending, inverse=not inverse)",
        replace="F.sort_by_key(ct, key, axis=axis, descending=descending, inverse=inverse)",
        why="sort_by_key's VJP applies the same permutation instead of its inverse",
        ops=("sort_by_key",),
    ),
]
