"""``fuse-elementwise``: outline producer–consumer groups into named ``stablehlo.composite`` ops.

Groups (each becomes one composite whose decomposition is a private function):

- named patterns: every op recorded inside a :func:`hlotrace.trace.scope` instance —
  ``hlotrace.softmax``, ``hlotrace.attention``, ``hlotrace.layer_norm``, or a user's own —
  becomes one composite named after the scope, whatever the ops are (attention's
  ``dot_general`` included); the ops lowered from one ``log_softmax`` or ``gelu`` record
  become ``hlotrace.log_softmax`` / ``hlotrace.gelu``;
- the rest: maximal connected groups of elementwise ops (with the broadcasts, reshapes and
  converts feeding them, and a reduction consuming them, which ends the group) become
  ``hlotrace.fusion.N``. Ops of a backward pass are grouped apart from forward ones.

Each composite carries ``records`` (the trace records it was lowered from, ``"3:exp
4:sum"``) and ``lines`` (the user's source lines) as attributes; constants the group reads
are copied into the decomposition. A group is left alone when its results are used between
its first and last op (no single place for the composite), when it has one op, or when it
computes from constants only (XLA folds it at compile time; inside a composite it would be
computed at run time instead, and rounded as XLA's run-time rewrites round: x / 6 as x * (1/6)).

XLA inlines composites: the compiled program is the unfused one, results are bitwise
equal and steady-state time is unchanged (BENCHMARKS.md). What the composites are for is
the module itself: named, portable regions (``hlotrace export`` keeps them in VHLO) that
other compilers can match, and a readable structure when inspecting a lowered step.
"""

from __future__ import annotations

import itertools
import os

import hlotrace.runtime.jaxlib_compat as jaxlib_compat
from hlotrace.passes.ir_helpers import main_function, top_level
from hlotrace.passes.locations import record_location
from hlotrace.passes.registry import register_pass
from hlotrace.passes.rewrite import remove_dead_ops
from hlotrace.runtime.jaxlib_compat import func, ir

ELEMENTWISE = frozenset(
    "stablehlo." + name
    for name in (
        "add subtract multiply divide remainder power maximum minimum atan2 and or xor not negate abs sign "
        "exponential exponential_minus_one log log_plus_one logistic tanh sine cosine tan sqrt rsqrt cbrt "
        "floor ceil round_nearest_even round_nearest_afz is_finite compare select clamp convert "
        "shift_left shift_right_arithmetic shift_right_logical popcnt count_leading_zeros"
    ).split()
)
SHAPING = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape"})
NAMED_RECORDS = {"log_softmax": "hlotrace.log_softmax", "gelu": "hlotrace.gelu"}
_names = itertools.count()
_TAG = "hlotrace.fuse_group"  # temporary: which group an op belongs to


def _defining_op(value):
    owner = value.owner
    return owner.operation if isinstance(owner, ir.Operation | ir.OpView) else None


class _Groups:
    """Union-find over the positions of @main's ops."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def add(self, i: int) -> None:
        self.parent.setdefault(i, i)

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _groups(ops, position) -> list[tuple[str, list[int]]]:
    """(composite name or None, op positions) for every group, in program order."""
    named: dict[tuple, list[int]] = {}
    groups = _Groups()
    key_of: dict[int, tuple] = {}
    for i, op in enumerate(ops):
        if op.name in ("func.return", "stablehlo.constant"):
            continue
        found = record_location(op)
        if found is not None and found.scope is not None:
            named.setdefault((found.scope, found.instance, found.backward), []).append(i)
            continue
        if found is not None and found.op in NAMED_RECORDS:
            named.setdefault((NAMED_RECORDS[found.op], found.record, found.backward), []).append(i)
            continue
        if op.name in ELEMENTWISE or op.name in SHAPING or op.name == "stablehlo.reduce":
            backward = bool(found and found.backward)
            groups.add(i)
            key_of[i] = backward
            if op.name == "stablehlo.reduce":
                operands = list(op.operands)[: len(op.results)]
            else:
                operands = list(op.operands)
            for v in operands:
                p = position.get(_defining_op(v)) if _defining_op(v) is not None else None
                if p is None or p not in key_of or key_of[p] != backward:
                    continue
                if ops[p].name == "stablehlo.reduce":
                    continue  # a reduction ends its group
                groups.union(i, p)
    anonymous: dict[int, list[int]] = {}
    for i in key_of:
        anonymous.setdefault(groups.find(i), []).append(i)
    result = [(key[0], sorted(members)) for key, members in named.items()]
    for members in anonymous.values():
        if sum(ops[i].name in ELEMENTWISE or ops[i].name == "stablehlo.reduce" for i in members) >= 2:
            result.append((None, sorted(members)))
    return sorted(result, key=lambda g: g[1][0])


# Ops XLA does not fold however constant their operands (and that read no operand but are not
# constants themselves).
_NOT_FOLDED = frozenset(
    {"stablehlo.optimization_barrier", "stablehlo.custom_call", "stablehlo.rng", "stablehlo.rng_bit_generator"}
)


def _constant_only(ops, position) -> set[int]:
    """Positions of the ops computed from constants alone (constants, iotas, and pure ops of
    those): what XLA's constant folder computes at compile time."""
    folded: set[int] = set()
    for i, op in enumerate(ops):
        if op.name in _NOT_FOLDED or op.name == "func.return":
            continue
        operands = list(op.operands)
        if not operands:
            if op.name in ("stablehlo.constant", "stablehlo.iota"):
                folded.add(i)
            continue
        producers = [_defining_op(v) for v in operands]
        if all(p is not None and position.get(p) in folded for p in producers):
            folded.add(i)
    return folded


def _outline(module, ops, position, name: str, members: list[int]) -> bool:
    inside = set(members)
    first, last = members[0], members[-1]
    inputs, seen = [], set()
    constants = {}
    for i in members:
        for v in ops[i].operands:
            producer = _defining_op(v)
            p = position.get(producer) if producer is not None else None
            if p in inside:
                continue
            if producer is not None and producer.name == "stablehlo.constant":
                constants[p] = producer
                continue
            if v not in seen:
                seen.add(v)
                inputs.append(v)
    outputs = []
    for i in members:
        for r in ops[i].results:
            users = [position.get(top_level(u.owner, position)) for u in r.uses]
            outside = [p for p in users if p not in inside]
            if any(p is None or p <= last for p in outside):
                return False  # used before the composite could be placed
            if outside:
                outputs.append(r)
    if not outputs:
        return False
    callee = f"{name.replace('.', '_')}_{next(_names)}"
    records, lines = [], []
    for i in members:
        found = record_location(ops[i])
        if found is None:
            continue
        tag = f"{found.record}:{found.op}"
        if tag not in records:
            records.append(tag)
        if found.file is not None:
            where = f"{os.path.basename(found.file)}:{found.line}"
            if where not in lines:
                lines.append(where)
    with ir.InsertionPoint(module.body), ops[first].location:
        fn = func.FuncOp(callee, ir.FunctionType.get([v.type for v in inputs], [r.type for r in outputs]))
        fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
        block = fn.add_entry_block()
    mapping = dict(zip(inputs, block.arguments, strict=True))
    with ir.InsertionPoint(block), ops[first].location:
        for _, const in sorted(constants.items()):
            clone = const.clone()
            mapping[const.results[0]] = clone.results[0]
        for i in members:
            clone = ops[i].clone()
            del clone.attributes[_TAG]
            for k, v in enumerate(ops[i].operands):
                if v in mapping:
                    clone.operands[k] = mapping[v]
            for old, new in zip(ops[i].results, clone.results, strict=True):
                mapping[old] = new
        func.ReturnOp([mapping[r] for r in outputs])
    attributes = {"records": " ".join(records), "lines": " ".join(lines)}
    with ir.InsertionPoint(ops[last]), ops[first].location:
        composite = jaxlib_compat.composite_op([r.type for r in outputs], inputs, name, callee, attributes, 0)
    # composite_op inserted before ops[last]: move it after, then rewire and erase the group.
    composite.operation.move_after(ops[last])
    for old, new in zip(outputs, composite.results, strict=True):
        old.replace_all_uses_with(new)
    for i in reversed(members):
        ops[i].erase()
    return True


@register_pass("fuse-elementwise")
def fuse_elementwise(module, options) -> None:
    """Outline elementwise groups and named patterns (softmax, attention, ...) into stablehlo.composite ops."""
    block = main_function(module).regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    position = {op: i for i, op in enumerate(ops)}
    fusion = itertools.count()
    folded = _constant_only(ops, position)
    groups = [
        (name or f"hlotrace.fusion.{next(fusion)}", members)
        for name, members in _groups(ops, position)
        if name is not None or not folded.issuperset(members)
    ]
    # Groups may interleave, so positions change as they are outlined: each member op is
    # tagged with its group's number and found again by the tag.
    for k, (_, members) in enumerate(groups):
        for i in members:
            ops[i].attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), k)
    for k, (name, _) in reversed(list(enumerate(groups))):
        ops = [op.operation for op in block.operations]
        members = [
            i for i, op in enumerate(ops) if _TAG in op.attributes and ir.IntegerAttr(op.attributes[_TAG]).value == k
        ]
        _outline(module, ops, {op: i for i, op in enumerate(ops)}, name, members)
    for op in block.operations:  # groups that could not be outlined keep their ops
        if _TAG in op.operation.attributes:
            del op.operation.attributes[_TAG]
    remove_dead_ops(block)  # constants only the outlined ops read
