"""``fuse-reductions``: sibling reductions become one variadic ``stablehlo.reduce``.

Two reductions are siblings when their operands have the same shape, they reduce the same
dimensions, and neither's operand depends on the other's result. Merged, XLA reads the
input once for both. Which reductions to merge follows what XLA:CPU (jaxlib 0.10.2) does
with them, measured on f32[64,100,1000] over the last axis (JAXLIB_NOTES.md, "Fusion
facts"; the softmax and layer-norm effect is re-measured by
``benchmarks/passes_reductions.py``, the pairs below were not re-measured):

=============================================  ==========================================
pair                                           merged vs separate
=============================================  ==========================================
max(x) + or(x != x)   (hlotrace's NaN-exact    0.60 ms vs 2.27 ms: the OR of a compare is
max: ``_propagate_nan``)                       not YNNPACK-eligible, so separately XLA
                                               materializes the compare and reads x twice
max(x) + min(x)                                1.5x faster merged
sum(x) + sum(x*x)                              3x SLOWER merged, and 10x larger error
                                               (YNNPACK's tree sum beats one loop)
=============================================  ==========================================

So the cost rule: merge reductions whose combiners are max, min, or, and (order-free,
exact in any association); never merge add or multiply reductions. Bodies must be one
binary op per result (``return comb(acc_i, x_i)``): anything else is left alone.
Results equal those of the separate reductions except for one thing: which zero the max
(or min) of a slice holding both +0.0 and -0.0 returns (XLA:CPU's YNNPACK reduction and
its loop order the two zeros differently, as NumPy's own SIMD and scalar loops do). The
pass is registered ``exact=False`` for that; the differential tests compare its results
bitwise up to the sign of zeros.
"""

from __future__ import annotations

from hlotrace.passes.ir_helpers import main_function, top_level
from hlotrace.passes.registry import register_pass
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

# Combiners whose reductions are merged (see the table above), by op name.
MERGEABLE = ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.or", "stablehlo.and")
_BUILDERS = {
    "stablehlo.maximum": stablehlo.MaxOp,
    "stablehlo.minimum": stablehlo.MinOp,
    "stablehlo.or": stablehlo.OrOp,
    "stablehlo.and": stablehlo.AndOp,
    "stablehlo.add": stablehlo.AddOp,
    "stablehlo.multiply": stablehlo.MulOp,
}


def combiners(op) -> list[str] | None:
    """The combiner of each result of a ``stablehlo.reduce`` whose body computes result i
    as ``comb_i(acc_i, x_i)`` with one binary op each; None for any other body."""
    n = len(op.operation.results)
    block = op.operation.regions[0].blocks[0]
    args = list(block.arguments)
    ops = list(block.operations)
    if len(args) != 2 * n or len(ops) != n + 1 or ops[-1].operation.name != "stablehlo.return":
        return None
    returned = list(ops[-1].operation.operands)
    names = []
    for i in range(n):
        owner = returned[i].owner
        if not isinstance(owner, ir.Operation | ir.OpView):
            return None
        owner = owner.operation
        if owner.name not in _BUILDERS or len(owner.operands) != 2:
            return None
        if {_index(owner.operands[0], args), _index(owner.operands[1], args)} != {i, n + i}:
            return None
        names.append(owner.name)
    return names


def _index(value, args) -> int:
    for k, arg in enumerate(args):
        if value == arg:
            return k
    return -1


def _dimensions(op) -> tuple[int, ...]:
    return tuple(ir.DenseI64ArrayAttr(op.operation.attributes["dimensions"]))


def _key(op):
    operand = op.operation.operands[0]
    return (tuple(ir.RankedTensorType(operand.type).shape), _dimensions(op))


def _depends_on(value, target, position: dict) -> bool:
    """Whether ``value`` is computed (transitively) from ``target``, an op of @main's body;
    ops before ``target`` cannot be on such a path, so the walk stops there."""
    floor = position[target]
    stack, seen = [value], set()
    while stack:
        owner = stack.pop().owner
        if not isinstance(owner, ir.Operation | ir.OpView):
            continue  # a block argument
        owner = owner.operation
        if owner == target:
            return True
        p = position.get(owner)
        if p is None or p <= floor or p in seen:
            continue
        seen.add(p)
        stack.extend(owner.operands)
    return False


def _merge(first, second, at) -> ir.Operation:
    """One reduce computing the results of ``first`` and then ``second``, built right
    before ``at`` (one of the two); every use of the old results is redirected."""
    a, b = first.operation, second.operation
    na, nb = len(a.results), len(b.results)
    inputs = [*list(a.operands)[:na], *list(b.operands)[:nb]]
    inits = [*list(a.operands)[na:], *list(b.operands)[nb:]]
    names = combiners(a) + combiners(b)
    with ir.InsertionPoint(at), a.location:
        merged = stablehlo.ReduceOp([r.type for r in (*a.results, *b.results)], inputs, inits, list(_dimensions(a)))
        scalars = [ir.RankedTensorType.get([], ir.RankedTensorType(v.type).element_type) for v in inits]
        block = merged.body.blocks.append(*scalars, *scalars)
        n = len(inits)
        with ir.InsertionPoint(block):
            stablehlo.ReturnOp(
                [_BUILDERS[name](block.arguments[i], block.arguments[n + i]).result for i, name in enumerate(names)]
            )
    for old, new in zip((*a.results, *b.results), merged.results, strict=True):
        old.replace_all_uses_with(new)
    a.erase()
    b.erase()
    return merged.operation


def _users_before(op, limit: int, position: dict) -> bool:
    """Whether a result of ``op`` is used by an op at a position before ``limit``."""
    for result in op.results:
        for use in result.uses:
            user = use.owner
            top = top_level(user, position)
            if top is not None and position[top] < limit:
                return True
    return False


def _one_round(block) -> int:
    ops = [op.operation for op in block.operations]
    position = {op: i for i, op in enumerate(ops)}
    candidates: dict[tuple, list] = {}
    for op in ops:
        if op.name != "stablehlo.reduce":
            continue
        names = combiners(op)
        if names is None or not all(n in MERGEABLE for n in names):
            continue
        candidates.setdefault(_key(op), []).append(op)
    for group in candidates.values():
        for i, first in enumerate(group):
            for second in group[i + 1 :]:
                operands = list(second.operands)
                if not _users_before(first, position[second], position):
                    at, plan = second, ()  # every use of first follows second: merge there
                else:
                    plan = _hoist_plan(operands, first, position)
                    if plan is None:
                        continue
                    at = first  # second's operands, hoisted, will precede first: merge there
                # A second computed from first has a user of first before it, and hoisting
                # stops at first, so both ways above refuse it; this walk (defence in depth)
                # runs once per merge, not per pair: per pair it grew as the fourth power of
                # an unrolled model's depth (239 s of a 48-layer transformer step).
                if any(_depends_on(v, first, position) for v in operands):
                    continue  # not siblings: second reads what first computes
                for op in plan:
                    op.move_before(first)
                _merge(first, second, at)
                return 1  # positions changed: start a new round
    return 0


# Ops moved above a reduce so that a sibling can join it there: cheap, region-free, pure.
_HOISTABLE = (
    "stablehlo.constant",
    "stablehlo.compare",
    "stablehlo.convert",
    "stablehlo.broadcast_in_dim",
    "stablehlo.reshape",
    "stablehlo.abs",
    "stablehlo.negate",
    "stablehlo.not",
)


def _hoist_plan(values, first, position: dict, depth: int = 3) -> list | None:
    """The cheap ops (in order) to move right before ``first`` so that every value in
    ``values`` is defined before it (up to ``depth`` levels of their operands' ops), or None
    when that is impossible. Moves nothing."""
    plan: list = []
    if not all(_plan_hoist(v, first, position, depth, plan) for v in values):
        return None
    return sorted(set(plan), key=lambda o: position[o])


def _plan_hoist(value, first, position: dict, depth: int, plan: list) -> bool:
    owner = value.owner
    if not isinstance(owner, ir.Operation | ir.OpView):
        return True  # a block argument: available everywhere
    owner = owner.operation
    p = position.get(owner)
    if p is None or p < position[first] or owner in plan:
        return True
    if owner == first or depth == 0 or owner.name not in _HOISTABLE or owner.regions:
        return False
    plan.append(owner)
    return all(_plan_hoist(v, first, position, depth - 1, plan) for v in owner.operands)


@register_pass("fuse-reductions", exact=False)
def fuse_reductions(module, options) -> None:
    """Sibling max/min/or/and reductions (same operand and dims) become one variadic reduce (zero signs may differ)."""
    block = main_function(module).regions[0].blocks[0]
    while _one_round(block):
        pass
