"""Mutants of the SPMD code (issue 19): placing slices on devices, specs turned into per-dimension
axes, the plan's annotations and write-back layouts, the inherited placement of gradients and
optimizer state, the cache key, the partitioner workarounds and the layout check before every
execution (hlotrace/distributed/*.py, hlotrace/runtime/spmd.py and the slicing in
hlotrace/runtime/jaxlib_spmd.py).

Killed by tests/distributed/ (8 CPU devices): test_mesh_and_placement.py,
test_spmd_compile.py, test_spmd_training.py, test_partitioner_workarounds.py and the SPMD
differential; run with ``make mutation ARGS="--only sharding --columns suite"``, or one mutant
by hand against ``pytest -x tests/distributed`` in a scratch copy (TESTING.md).
"""

from hlotrace.testing.mutation import Mutant

MESH = "hlotrace/distributed/mesh.py"
PLACEMENT = "hlotrace/distributed/placement.py"
COMPILE = "hlotrace/distributed/compile.py"
RUNTIME = "hlotrace/runtime/spmd.py"
JAXLIB_SPMD = "hlotrace/runtime/jaxlib_spmd.py"

MUTANTS = [
    # -- placing slices and reading specs ----------------------------------------------------
    Mutant(
        id="slices-to-the-wrong-devices",
        file=JAXLIB_SPMD,
        find="    shards = [_contiguous(np.asarray(array[i])) for i in indices.values()]\n",
        replace="    shards = [_contiguous(np.asarray(array[i])) for i in reversed(list(indices.values()))]\n",
        why="each device is handed another device's slice (the index map read in the wrong order)",
    ),
    Mutant(
        id="spec-tuple-keeps-its-first-axis",
        file=MESH,
        find="        out = [() if e is None else ((e,) if isinstance(e, str) else tuple(e)) for e in self]\n",
        replace="        out = [() if e is None else ((e,) if isinstance(e, str) else tuple(e)[:1]) for e in self]\n",
        why="a dimension split over two axes, P(('data', 'model')), is split over the first one only",
    ),
    Mutant(
        id="divisibility-checked-as-fit",
        file=MESH,
        find="            if shape[d] % parts:\n",
        replace="            if shape[d] < parts:\n",
        why="a dimension the axes do not divide is accepted when it is at least as large as their size",
    ),
    Mutant(
        id="shard-module-last-pattern-wins",
        file=PLACEMENT,
        find="        pattern = next((p for p in plan if fnmatch.fnmatchcase(name, p)), None)\n",
        replace="        pattern = next((p for p in reversed(plan) if fnmatch.fnmatchcase(name, p)), None)\n",
        why="shard_module lets the last matching pattern win instead of the first",
    ),
    Mutant(
        id="shard-copies-a-parameter",
        file=PLACEMENT,
        find="    elif not isinstance(tensor, Parameter):\n",
        replace="    elif isinstance(tensor, Tensor):\n",
        why="dist.shard of a Parameter returns a new tensor: modules and optimizers keep the unplaced one",
    ),
    # -- what xla_trace compiles for a mesh ----------------------------------------------------
    Mutant(
        id="placements-not-in-the-key",
        file=COMPILE,
        find="    return (mesh, tuple(in_dims), tuple(grad_dims))\n",
        replace="    return (mesh, tuple(grad_dims))\n",
        why="the cache key holds the mesh but not each input's spec: another layout reuses the executable",
    ),
    Mutant(
        id="two-meshes-compared-by-shape",
        file=COMPILE,
        find="            elif sharding.mesh is not mesh and sharding.mesh != mesh:  # `is`: no __eq__ on the hot path\n",
        replace="            elif sharding.mesh is not mesh and sharding.mesh.shape != mesh.shape:\n",
        why="inputs on two meshes of the same shape (other devices) are taken as one mesh",
    ),
    Mutant(
        id="steady-call-ignores-its-arrays",
        file=COMPILE,
        find="    if last is not None and last[0] == _stamp(holders) and last[1] == _snapshot(inputs):\n",
        replace="    if last is not None and last[0] == _stamp(holders):\n",
        why="a call reuses its last call's layout work whatever arrays its inputs now hold (one swapped for "
        "another layout goes unseen until the executable's own check)",
    ),
    Mutant(
        id="optimizer-state-placed-once",
        file=COMPILE,
        find="    if registered(tensor) != wanted:\n",
        replace="    if registered(tensor) is None:\n",
        why="optimizer state keeps its first placement when its parameter is re-placed (onto another mesh: a TraceError)",
    ),
    Mutant(
        id="hyper-tensors-not-placed",
        file=COMPILE,
        find="            if mesh is not None:\n                for t in hyper.values():\n",
        replace="            if False:\n                for t in hyper.values():\n",
        why="an optimizer's hyper tensors stay on the mesh of the first call after the parameters move to another",
    ),
    Mutant(
        id="grad-not-placed-like-its-tensor",
        file=COMPILE,
        find="        grads.append(None if g is None else (sharding_of(g) or s))\n",
        replace="        grads.append(None if g is None else sharding_of(g))\n",
        why="the .grad of a placed parameter is replicated instead of taking the parameter's placement",
    ),
    Mutant(
        id="optimizer-state-first-tensor-only",
        file=COMPILE,
        find="            for t in tensors.values():\n",
        replace="            for t in list(tensors.values())[:1]:\n",
        why="only a parameter's first optimizer state tensor inherits its placement (Adam's second moment stays whole)",
    ),
    Mutant(
        id="written-state-left-open",
        file=COMPILE,
        find="        for i, o in io.writes:\n            out_dims[o] = in_dims[i]\n",
        replace="        for i, o in io.writes:\n            out_dims[o] = None\n",
        why="state written back is left open for the partitioner instead of keeping the layout it was read in",
    ),
    Mutant(
        id="arguments-annotated-replicated",
        file=COMPILE,
        find="        args = [{key: jaxlib_spmd.tensor_sharding(MESH_SYMBOL, dims)} for dims in self.in_dims]\n",
        replace="        args = [{key: jaxlib_spmd.tensor_sharding(MESH_SYMBOL, [()] * len(dims))} for dims in self.in_dims]\n",
        why="@main's arguments are annotated replicated whatever their placement",
    ),
    Mutant(
        id="convolution-spatial-dims-left-open",
        file=COMPILE,
        find='                open_dims = 1 if k == 0 or op == "conv2d_weight_grad" else 0\n',
        replace="                open_dims = rank\n",
        why="the convolution guard leaves every dimension open, so XLA may split spatial ones (wrong values)",
    ),
    # -- the runtime ------------------------------------------------------------------------
    Mutant(
        id="layout-check-global-shape-only",
        file=RUNTIME,
        find="            if actual != sharding or buffer.shape != shape or buffer.dtype != dtype:\n",
        replace="            if buffer.shape != shape or buffer.dtype != dtype:\n",
        why="the check before execution compares global shapes only: a buffer split otherwise reaches PJRT",
    ),
    Mutant(
        id="results-taken-as-replicated",
        file=RUNTIME,
        find="        out_shardings.append(jax_sharding(*mesh, dims))\n",
        replace="        out_shardings.append(jax_sharding(*mesh, ()))\n",
        why="results are read back as replicated whatever layout XLA chose for them",
    ),
]
