"""``remat``: recompute forward activations in the backward pass instead of keeping them.

In a training-step module the forward ops come first and the ops of the backward pass
carry locations ``rec<i>:<op>:bwd`` (:mod:`hlotrace.passes.locations`). Every forward
value a backward op reads stays alive from the forward to its backward use: that is what
fills XLA's temp memory. The pass keeps only some of those values (checkpoints) and, for
each segment between two kept checkpoints, clones the forward ops computing the values
the backward needs right before their first backward use.

Layers. A *cut point* is a forward value that is, at the point it is computed, the only
forward value (function arguments and constants aside) still needed by later forward ops:
everything after it depends on the past through it alone. The layer boundaries are the
last cut point before each ``dot_general`` / ``convolution`` (a layer's input); the first
layer's input is a function argument. Segments run from one kept boundary to the next.
A control-flow op (``stablehlo.while``, ``stablehlo.case``) whose regions hold a matmul or a
convolution is one layer: the pass never looks inside it, so a loop of layers (``F.scan``,
``nn.Stacked``) is one segment, kept or recomputed whole (cloned with its regions).

Barriers. Each recomputed segment reads its inputs through one
``stablehlo.optimization_barrier`` over (the segment's checkpoint, the weights it reads, the
backward value computed just before the recomputation): its results are new values, so
CSE cannot merge the clones back into the forward ops, and the recomputation cannot be
scheduled before the backward reaches it. The runtime disables XLA:CPU's
``cse_barrier_expander`` for modules with barriers (it would strip them before CSE).

Policies (options): ``policy=none|every|sqrt|budget``; ``every=K`` keeps every K-th layer
boundary; ``sqrt`` keeps every round(sqrt(n))-th of n layers (Chen et al. 2016);
``budget=BYTES`` (``200MB``, ``1.5GiB``, ``4096``; kB/MB/GB are powers of 1000, KiB/MiB/GiB
of 1024) compiles candidates, from the least recomputation up, and keeps the first whose
compiled temp memory (XLA's memory stats) fits. Giving ``every=`` or ``budget=`` alone
implies its policy; the default is ``sqrt``. The recomputed ops are the same ops on the same
values, so results are bitwise those of the module without remat.
"""

from __future__ import annotations

import math
import re

from hlotrace import dtypes as dt
from hlotrace.errors import PassError
from hlotrace.ops.registry import Aval
from hlotrace.passes.ir_helpers import clone_module, main_function, top_level
from hlotrace.passes.locations import record_location
from hlotrace.passes.registry import register_pass
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

HEAVY = ("stablehlo.dot_general", "stablehlo.convolution")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_bytes(text: str) -> int:
    """``"200MB"`` → 200_000_000; ``"1.5GiB"``, ``"4096"``; PassError when malformed."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise PassError(
            f"pass 'remat': budget={text!r} is not a byte count (e.g. 200MB, 1.5GiB, 4096; units {', '.join(k for k in _UNITS if k)})"
        )
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value <= 0:
        raise PassError(f"pass 'remat': budget={text!r} must be positive")
    return int(value)


def _policy(options: dict) -> tuple[str, int | None]:
    """(policy, its value) of remat's options; PassError naming a bad one. Also the pass's
    ``validate``: parsing a pipeline (and ``hlotrace passes --check``) calls it."""
    policy = options.get("policy")
    if policy is None:
        policy = "every" if "every" in options else "budget" if "budget" in options else "sqrt"
    if policy not in ("none", "every", "sqrt", "budget"):
        raise PassError(f"pass 'remat': policy={policy!r} is not one of none, every, sqrt, budget")
    if policy == "every":
        try:
            k = int(options.get("every", "1"))
        except ValueError:
            raise PassError(
                f"pass 'remat': every={options.get('every')!r} is not an integer (expected K >= 1: keep every K-th layer boundary)"
            ) from None
        if k < 1:
            raise PassError(f"pass 'remat': every={k} must be >= 1")
        return policy, k
    if policy == "budget":
        if "budget" not in options:
            raise PassError("pass 'remat': policy=budget needs budget=BYTES")
        return policy, parse_bytes(options["budget"])
    return policy, None


# -- analysis ----------------------------------------------------------------------------------


class _Step:
    """The ops of @main split into forward and backward, and the forward's layer boundaries."""

    def __init__(self, module):
        self.block = main_function(module).regions[0].blocks[0]
        self.ops = [op.operation for op in self.block.operations]
        self.position = {op: i for i, op in enumerate(self.ops)}
        self.backward = [i for i, op in enumerate(self.ops) if _is_backward(op)]
        self.forward_end = self.backward[0] if self.backward else len(self.ops)
        self.boundaries = self._boundaries() if self.backward else []

    def defined_at(self, value) -> int:
        """Position of the op defining ``value`` in @main (-1 for an argument)."""
        owner = value.owner
        if not isinstance(owner, ir.Operation | ir.OpView):
            return -1
        return self.position.get(owner.operation, -1)

    def _boundaries(self) -> list:
        """The layer boundaries (values), in forward order."""
        end = self.forward_end
        last_use: dict = {}
        for i in range(end):
            for v in self.ops[i].operands:
                p = self.defined_at(v)
                if p >= 0 and self.ops[p].name != "stablehlo.constant":
                    last_use[p] = i
        live: set = set()
        cut_before_heavy = []
        latest_cut = None
        for i in range(end):
            op = self.ops[i]
            if _is_heavy(op) and latest_cut is not None:
                cut_before_heavy.append(latest_cut)
                latest_cut = None
            for v in op.operands:  # values whose last forward use is here die
                p = self.defined_at(v)
                if p in live and last_use.get(p) == i:
                    live.discard(p)
            if i in last_use:
                live.add(i)
            if live == {i}:
                latest_cut = i
        seen, result = set(), []
        for p in cut_before_heavy:
            if p not in seen:
                seen.add(p)
                result.append(p)
        return result


def _is_heavy(op) -> bool:
    """A matmul or a convolution, or a control-flow op whose regions hold one (one layer)."""
    if op.name in HEAVY:
        return True
    return any(_is_heavy(inner.operation) for region in op.regions for block in region for inner in block)


def _is_backward(op) -> bool:
    found = record_location(op)
    return found is not None and found.backward


# -- rewriting --------------------------------------------------------------------------------


def rematerialize(module, every: int) -> int:
    """Keep every ``every``-th layer boundary; recompute the rest in the backward pass.
    Returns how many forward ops were cloned (0: nothing to do)."""
    step = _Step(module)
    if not step.backward or every <= 0:
        return 0
    kept = [p for k, p in enumerate(step.boundaries, start=1) if k % every == 0]
    starts = [-1, *kept]  # each segment: positions (start, stop]
    stops = [*kept, step.forward_end - 1]
    cloned = 0
    for start, stop in reversed(list(zip(starts, stops, strict=True))):
        cloned += _recompute_segment(step, start, stop)
    return cloned


def _backward_uses(step: _Step, value) -> list:
    uses = []
    for use in value.uses:
        top = top_level(use.owner, step.position)
        if top is not None and step.position[top] >= step.forward_end:
            uses.append((step.position[top], use))
    return uses


def _recompute_segment(step: _Step, start: int, stop: int) -> int:
    ops = step.ops
    members = [i for i in range(start + 1, stop + 1) if ops[i].name != "stablehlo.constant"]
    saved = {}  # position -> backward uses of its results
    for i in members:
        if i == stop and stop != step.forward_end - 1:
            continue  # the next segment's checkpoint: kept
        for result in ops[i].results:
            uses = _backward_uses(step, result)
            if uses:
                saved.setdefault(i, []).extend((result, u) for u in uses)
    if not saved:
        return 0
    # The forward ops the saved values need, within the segment.
    needed: set = set()
    stack = list(saved)
    while stack:
        i = stack.pop()
        if i in needed:
            continue
        needed.add(i)
        for v in ops[i].operands:
            p = step.defined_at(v)
            if start < p <= stop and ops[p].name != "stablehlo.constant":
                stack.append(p)
    order = sorted(needed)
    # Inputs from outside the segment (checkpoint, weights): through the barrier.
    inputs, seen = [], set()
    for i in order:
        for v in ops[i].operands:
            p = step.defined_at(v)
            if (p <= start or p > stop) and (p < 0 or ops[p].name != "stablehlo.constant") and v not in seen:
                seen.add(v)
                inputs.append(v)
    first_use = min(pos for uses in saved.values() for _, (pos, _) in uses)
    anchor = _anchor(step, first_use)
    at = ops[first_use]
    barrier_inputs = [*inputs, *([anchor] if anchor is not None else [])]
    with ir.InsertionPoint(at), ops[order[0]].location:
        barrier = stablehlo.OptimizationBarrierOp(barrier_inputs)
    mapping = dict(zip(inputs, list(barrier.results)[: len(inputs)], strict=True))
    clones = {}
    for i in order:
        clone = ops[i].clone(ip=ir.InsertionPoint(at))
        for k, v in enumerate(ops[i].operands):
            p = step.defined_at(v)
            if p in clones:
                clone.operands[k] = clones[p].results[_result_index(ops[p], v)]
            elif v in mapping:
                clone.operands[k] = mapping[v]
        clones[i] = clone
    for i, uses in saved.items():
        for result, (_, use) in uses:
            new = clones[i].results[_result_index(ops[i], result)]
            use.owner.operands[use.operand_number] = new
    return len(order)


def _result_index(op, value) -> int:
    for k, r in enumerate(op.results):
        if r == value:
            return k
    raise ValueError("value is not a result of op")


def _anchor(step: _Step, position: int):
    """The latest value a backward op computed before ``position`` (the incoming cotangent),
    so the recomputation cannot start before the backward gets there; None if none."""
    for i in range(position - 1, step.forward_end - 1, -1):
        op = step.ops[i]
        if op.name != "stablehlo.constant" and len(op.results) == 1 and _is_backward(op):
            return op.results[0]
    return None


# -- the pass ---------------------------------------------------------------------------------


def layer_count(module) -> int:
    """Layers the pass sees in a training-step module (0: no backward pass)."""
    step = _Step(module)
    return len(step.boundaries) + 1 if step.backward else 0


def compiled_temp_bytes(module) -> int:
    """XLA's temp memory for ``module`` compiled as it is (barriers kept on CPU)."""
    from hlotrace import runtime  # lazy: runtime is a layer above passes (ALLOWED_UPWARD); only policy=budget compiles

    main = main_function(module)
    ftype = main.type
    in_avals = [_aval(t, Aval) for t in ftype.inputs]
    out_avals = [_aval(t, Aval) for t in ftype.results]
    exe = runtime.compile(module.operation.get_asm(enable_debug_info=True), in_avals, out_avals)
    return exe.memory_stats()["temp"]


_DTYPES = {
    "f32": "float32",
    "f64": "float64",
    "f16": "float16",
    "bf16": "bfloat16",
    "i32": "int32",
    "i64": "int64",
    "i1": "bool",
}


def _aval(t, aval_cls):
    import numpy as np

    tensor = ir.RankedTensorType(t)
    name = _DTYPES.get(str(tensor.element_type))
    if name is None:
        raise PassError(f"remat: cannot compile a module with element type {tensor.element_type}")
    return aval_cls(tuple(tensor.shape), np.dtype(dt.canonicalize(name)))


@register_pass(
    "remat",
    options={
        "policy": "none | every | sqrt (default) | budget",
        "every": "K: keep every K-th layer boundary (implies policy=every)",
        "budget": "BYTES: the least recomputation whose compiled temp memory fits (e.g. 200MB; implies policy=budget)",
    },
    validate=_policy,
)
def remat(module, options) -> None:
    """Recompute forward activations in the backward pass (barriers keep XLA from undoing it)."""
    policy, value = _policy(options)
    if policy == "none":
        return
    layers = layer_count(module)
    if layers < 2:
        return  # no backward pass, or nothing to keep fewer of
    if policy == "every":
        rematerialize(module, value)
    elif policy == "sqrt":
        rematerialize(module, max(1, round(math.sqrt(layers))))
    else:
        _within_budget(module, value, layers)


def _within_budget(module, budget: int, layers: int) -> None:
    """Smallest ``every`` (least recomputation) whose compiled temp memory fits ``budget``."""
    tried = []
    if compiled_temp_bytes(module) <= budget:
        return
    # Temp memory falls as segments grow up to about sqrt(n), then rises again.
    limit = max(2, math.ceil(math.sqrt(layers)) + 2)
    for every in range(1, min(layers, limit) + 1):
        candidate = clone_module(module)
        if not rematerialize(candidate, every):
            continue
        temp = compiled_temp_bytes(candidate)
        tried.append((every, temp))
        if temp <= budget:
            rematerialize(module, every)
            return
    best = min(tried, key=lambda t: t[1]) if tried else None
    reached = f"; the smallest reached was {best[1]:,} bytes (every={best[0]})" if best else ""
    raise PassError(f"remat: no candidate fits budget={budget:,} bytes of temp memory{reached}")
