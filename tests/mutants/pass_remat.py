"""Mutants of hlotrace/passes/remat.py, hlotrace/ops/barrier.py and its rule (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/passes/remat.py"

MUTANTS = [
    Mutant(
        id="no-barrier-inputs",
        file=FILE,
        find="            elif v in mapping:\n                clone.operands[k] = mapping[v]",
        replace="            elif False:\n                clone.operands[k] = mapping[v]",
        why="the clones read the checkpoint directly, not through the barrier: CSE merges them back, no memory saved",
    ),
    Mutant(
        id="checkpoint-recomputed-too",
        file=FILE,
        find="        if i == stop and stop != step.forward_end - 1:\n            continue",
        replace="        if False:\n            continue",
        why="the next segment's checkpoint is recomputed as well although it is kept",
    ),
    Mutant(
        id="every-off-by-one",
        file=FILE,
        find="    kept = [p for k, p in enumerate(step.boundaries, start=1) if k % every == 0]",
        replace="    kept = [p for k, p in enumerate(step.boundaries) if k % every == 0]",
        why="every=K keeps boundaries 0, K, 2K, ... (one too many, the first layer's output)",
    ),
    Mutant(
        id="uses-in-forward-replaced",
        file=FILE,
        find="        if top is not None and step.position[top] >= step.forward_end:",
        replace="        if top is not None:",
        why="forward uses of a saved value are redirected to its recomputation, which comes later",
    ),
    Mutant(
        id="budget-ignored",
        file=FILE,
        find="        if temp <= budget:",
        replace="        if True:",
        why="the budget search takes the first candidate whether or not it fits",
    ),
    Mutant(
        id="sqrt-is-every-layer",
        file=FILE,
        find="        rematerialize(module, max(1, round(math.sqrt(layers))))",
        replace="        rematerialize(module, 1)",
        why="policy=sqrt keeps every layer boundary, so nothing is recomputed",
    ),
    Mutant(
        id="loop-not-a-layer",
        file=FILE,
        find="    return any(_is_heavy(inner.operation) for region in op.regions for block in region for inner in block)",
        replace="    return False",
        why="a loop of matmuls is not a layer: no boundary before it, it joins the next layer's segment",
    ),
    Mutant(
        id="barrier-rule-returns-first",
        file="hlotrace/lowering/rules/barrier.py",
        find="    return stablehlo.OptimizationBarrierOp(list(operands)).results[index]",
        replace="    return stablehlo.OptimizationBarrierOp(list(operands)).results[0]",
        why="every application of the barrier returns its first operand",
        ops=("optimization_barrier",),
    ),
    Mutant(
        id="barrier-vjp-to-first",
        file="hlotrace/ops/barrier.py",
        find="    return tuple(optimization_barrier(ct) if i == index else None for i in range(len(inputs)))",
        replace="    return tuple(optimization_barrier(ct) if i == 0 else None for i in range(len(inputs)))",
        why="the cotangent of every output flows to the first operand",
        ops=("optimization_barrier",),
    ),
]
