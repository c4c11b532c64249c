"""Mutants of hlotrace/lowering/rules/gather.py and of the gather family's VJPs
(hlotrace/ops/gather/take.py, scatter.py, writes.py); see TESTING.md.

The rule mutants are killed by the property tests; the VJP mutants by the gradient tests
(``--columns gradient``).
"""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/gather.py"
OPS = "hlotrace/ops/gather/take.py"
OPS_SCATTER = "hlotrace/ops/gather/scatter.py"
OPS_SET = "hlotrace/ops/gather/writes.py"
MUTANTS = [
    # -- rules ----------------------------------------------------------------------------
    Mutant(
        id="index-add-constant-source-folded",
        file=FILE,
        find="            source = hlo.hidden_from_folding(source)\n",
        replace="            pass\n",
        why="a constant index_add source is left to XLA, which drops a scatter-add of constant zeros "
        "(alpha=0.0 or a zero source): -0.0 + 0.0 stays -0.0",
        ops=("index_add",),
    ),
    Mutant(
        id="index-add-constant-operand-folded",
        file=FILE,
        find="            x = hlo.hidden_from_folding(x)\n",
        replace="            pass\n",
        why="a constant index_add operand is left to XLA, which turns a scatter-add onto constant zeros "
        "into the updates: +0.0 + -0.0 gives -0.0",
        ops=("index_add",),
    ),
    Mutant(
        id="negative-index-not-wrapped",
        file=FILE,
        find="    return hlo.select(negative, shifted, idx)\n",
        replace="    return idx\n",
        why="negative indices go to XLA as they are: gather clamps them to 0, scatter drops them",
        ops=("take", "take_along_axis", "scatter_add", "index_add", "index_copy"),
    ),
    Mutant(
        id="take-start-index-map-axis-0",
        file=FILE,
        find="        start_index_map=[axis],\n",
        replace="        start_index_map=[0],\n",
        why="take's index is mapped onto operand dim 0 whatever the axis (a gather copied from embedding)",
        ops=("take",),
    ),
    Mutant(
        id="take-along-iota-first-dim",
        file=FILE,
        find="            part = stablehlo.IotaOp(hlo.tensor_type(shape, aval.dtype), d).result\n",
        replace="            part = stablehlo.IotaOp(hlo.tensor_type(shape, aval.dtype), 0).result\n",
        why="the index vector's position along every other dim counts along dim 0",
        ops=("take_along_axis", "scatter_add"),
    ),
    Mutant(
        id="scatter-add-index-vector-reversed",
        file=FILE,
        find="    dims = _scatter_dims((), range(rank), range(rank), rank)\n",
        replace="    dims = _scatter_dims((), range(rank), range(rank - 1, -1, -1), rank)\n",
        why="scattered_dims_to_operand_dims reversed: index vector entries address the wrong dims",
        ops=("scatter_add",),
    ),
    Mutant(
        id="scatter-add-replaces",
        file=FILE,
        find='    result = _scatter(wide, x, vectors, src, dims, "add")\n',
        replace='    result = _scatter(wide, x, vectors, src, dims, "replace")\n',
        why="scatter_add overwrites x instead of adding to it (and duplicates do not accumulate)",
        ops=("scatter_add",),
    ),
    Mutant(
        id="scatter-add-half-in-half",
        file=FILE,
        find="    wide = Aval(aval.shape, compute_dtype(aval.dtype))\n",
        replace="    wide = aval\n",
        why="float16/bfloat16 scatter-adds round after every addition instead of once",
        ops=("scatter_add", "index_add"),
    ),
    Mutant(
        id="index-add-replaces",
        file=FILE,
        find='    result = _scatter(wide, x, _wrap(index, ia, xa.shape[axis]), source, dims, "add")\n',
        replace='    result = _scatter(wide, x, _wrap(index, ia, xa.shape[axis]), source, dims, "replace")\n',
        why="index_add overwrites the indexed rows instead of adding to them",
        ops=("index_add",),
    ),
    Mutant(
        id="index-add-alpha-ignored",
        file=FILE,
        find="    if alpha != 1:\n",
        replace="    if False:\n",
        why="index_add forgets to scale source by alpha",
        ops=("index_add",),
    ),
    Mutant(
        id="masked-fill-inverted",
        file=FILE,
        find="    return hlo.select(mask, hlo.constant(value, out.dtype, out.shape), x)\n",
        replace="    return hlo.select(mask, x, hlo.constant(value, out.dtype, out.shape))\n",
        why="masked_fill fills where the mask is false",
        ops=("masked_fill",),
    ),
    Mutant(
        id="setitem-stride-ignored",
        file="hlotrace/lowering/rules/indexing.py",
        find="        interior.append(step - 1)\n",
        replace="        interior.append(0)\n",
        why="setitem writes a strided slice as if it were contiguous",
        ops=("setitem",),
    ),
    Mutant(
        id="setitem-negative-step-not-reversed",
        file=FILE,
        find="    if reversed_dims:\n        value = stablehlo.ReverseOp(value, reversed_dims).result\n",
        replace="",
        why="a negative-step slice is written in increasing order (the value lands reversed)",
        ops=("setitem",),
    ),
    Mutant(
        id="index-copy-adds",
        file=FILE,
        find='    return _scatter(out, x, _wrap(index, ia, xa.shape[axis]), source, dims, "replace")\n',
        replace='    return _scatter(out, x, _wrap(index, ia, xa.shape[axis]), source, dims, "add")\n',
        why="index_copy adds the source to the indexed entries instead of replacing them",
        ops=("index_copy",),
    ),
    # -- VJPs -----------------------------------------------------------------------------
    Mutant(
        id="take-vjp-copies",
        file=OPS,
        find="    return F.index_add(F.zeros(x.shape, ct.dtype), axis, flat, source), None\n",
        replace="    return F.index_copy(F.zeros(x.shape, ct.dtype), axis, flat, source), None\n",
        why="take's gradient writes the cotangent instead of accumulating it: repeated indices lose all but one",
        ops=("take",),
    ),
    Mutant(
        id="scatter-add-vjp-axis-0",
        file=OPS_SCATTER,
        find="    return ct, None, gather(ct, axis, index)\n",
        replace="    return ct, None, gather(ct, 0, index)\n",
        why="scatter_add's gradient wrt src gathers along axis 0 whatever the axis",
        ops=("scatter_add",),
    ),
    Mutant(
        id="index-add-vjp-alpha-ignored",
        file=OPS_SCATTER,
        find="    return ct, None, g if alpha == 1 else g * alpha\n",
        replace="    return ct, None, g\n",
        why="index_add's gradient wrt source forgets the factor alpha",
        ops=("index_add",),
    ),
    Mutant(
        id="masked-fill-vjp-inverted",
        file=OPS_SET,
        find="vjp=lambda ct, out, x, mask, *, value: (masked_fill(ct, mask, 0), None),",
        replace="vjp=lambda ct, out, x, mask, *, value: (F.where(mask, ct, 0), None),",
        why="masked_fill's gradient flows to the filled positions instead of the kept ones",
        ops=("masked_fill",),
    ),
    Mutant(
        id="setitem-vjp-passes-overwritten",
        file=OPS_SET,
        find="vjp=lambda ct, out, x, value, *, index: (setitem(ct, 0, index), F.getitem(ct, index)),",
        replace="vjp=lambda ct, out, x, value, *, index: (ct, F.getitem(ct, index)),",
        why="setitem's gradient wrt x also reaches the overwritten entries",
        ops=("setitem",),
    ),
]
