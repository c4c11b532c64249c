"""Mutants of hlotrace/lowering/rules/control_flow.py, of the control-flow references in
hlotrace/ops/control_flow.py, of their VJPs in hlotrace/ops/control_flow_grad.py and of the
tape's handling of ops with several results and refused VJPs in hlotrace/autodiff.py (see
TESTING.md). Killed by tests/test_control_flow.py, tests/test_control_flow_grad.py and the
generated property and gradient tests of switch, while_loop and scan."""

from hlotrace.testing.mutation import Mutant

RULES = "hlotrace/lowering/rules/control_flow.py"
OPS = "hlotrace/ops/control_flow.py"
VJPS = "hlotrace/ops/control_flow_grad.py"
TAPE = "hlotrace/autodiff.py"

MUTANTS = [
    Mutant(
        id="switch-index-not-clamped",
        file=RULES,
        find="    index = stablehlo.ClampOp(_scalar(0), index, _scalar(last)).result\n",
        replace="",
        why="an index out of range runs XLA's default (the last branch) instead of the clamped one",
        ops=("switch",),
    ),
    Mutant(
        id="switch-branches-reversed",
        file=RULES,
        find='stablehlo.ReturnOp(lower_region(branch, f"branch{i}", operands))',
        replace='stablehlo.ReturnOp(lower_region(branches[last - i], f"branch{i}", operands))',
        why="branch regions are emitted in reverse order (cond's false and true swapped)",
        ops=("switch",),
    ),
    Mutant(
        id="loop-constants-foldable",
        file=RULES,
        find="        hlo.hidden_from_folding(v) if a.dtype in dt.FLOATING and hlo.is_constant(v) else v\n",
        replace="        v\n",
        why="float constants enter a loop visible to XLA's folder: x + (slice of zeros) keeps -0.0",
        ops=("scan", "while_loop"),
    ),
    Mutant(
        id="scan-reverse-ignored",
        file=RULES,
        find="t = stablehlo.SubtractOp(_scalar(length - 1), i).result if reverse else i",
        replace="t = i",
        why="reverse=True scans from the start",
        ops=("scan",),
    ),
    Mutant(
        id="scan-one-step-too-many",
        file=RULES,
        find='stablehlo.ReturnOp([hlo.compare(counter, _scalar(trips), "LT", dt.int32)])',
        replace='stablehlo.ReturnOp([hlo.compare(counter, _scalar(trips), "LE", dt.int32)])',
        why="the loop runs one iteration too many (dynamic_slice clamps the extra x[t] to the last one)",
        ops=("scan",),
    ),
    Mutant(
        id="scan-ys-written-at-the-counter",
        file=RULES,
        find="new_ys = [_update_at(s, y, a, t) for s, y, a in",
        replace="new_ys = [_update_at(s, y, a, i) for s, y, a in",
        why="a reversed scan stacks its ys in step order instead of index order",
        ops=("scan",),
    ),
    Mutant(
        id="unrolled-copies-at-one-index",
        file=RULES,
        find="i = stablehlo.AddOp(first, _scalar(j)).result if j else first",
        replace="i = first",
        why="the unrolled copies of the body all run at the iteration's first index",
        ops=("scan",),
    ),
    Mutant(
        id="unroll-remainder-skips-a-step",
        file=RULES,
        find="for i in range(trips * unroll, length):",
        replace="for i in range(trips * unroll + 1, length):",
        why="the steps left after the unrolled loop start one too late",
        ops=("scan",),
    ),
    Mutant(
        id="while-body-sees-stale-captures",
        file=RULES,
        find='stablehlo.ReturnOp(lower_region(body, "body", args) + args[num_carry:])',
        replace='stablehlo.ReturnOp(lower_region(body, "body", args) + list(operands[num_carry:]))',
        why="the body returns the captures from outside the loop instead of its block arguments",
        equivalent="the captures never change inside the loop: outer values and block arguments are equal",
    ),
    Mutant(
        id="reference-scan-reverse-ignored",
        file=OPS,
        find="for t in reversed(range(length)) if reverse else range(length):",
        replace="for t in range(length):",
        why="the eager scan ignores reverse=True",
        ops=("scan",),
    ),
    Mutant(
        id="scan-vjp-captures-not-accumulated",
        file=VJPS,
        find="return (g_c, [a + g for a, g in zip(acc, g_k, strict=True)]), g_x",
        replace="return (g_c, list(g_k)), g_x",
        why="a closed-over tensor gets only one step's gradient (pytorch/pytorch#184528's kind of bug)",
        ops=("scan",),
    ),
    Mutant(
        id="scan-vjp-same-direction",
        file=VJPS,
        find="reverse=not reverse,",
        replace="reverse=reverse,",
        why="the backward scan runs in the forward's direction",
        ops=("scan",),
    ),
    Mutant(
        id="scan-vjp-carries-after-the-step",
        file=VJPS,
        find="return call_region(body, [*c, *x, *consts])[:nc], list(c)",
        replace="return (lambda new: (new, new))(call_region(body, [*c, *x, *consts])[:nc])",
        why="the stacked carries are those after each step, not those each step started from",
        ops=("scan",),
    ),
    Mutant(
        id="scan-saves-carries-after-the-step",
        file=OPS,
        find="saved = region.params[: len(carry)]",
        replace="saved = region.results[: len(carry)]",
        why="under autodiff the forward scan saves the carry each step ends with, not the one it started from",
        ops=("scan",),
    ),
    Mutant(
        id="switch-vjp-ones-for-unused-operands",
        file=VJPS,
        find="return [g if g is not None else F.zeros_like(operands[i]) for g, i in zip(grads, watched, strict=True)]",
        replace="return [g if g is not None else F.ones_like(operands[i]) for g, i in zip(grads, watched, strict=True)]",
        why="an operand a branch does not use gets ones instead of zeros",
        ops=("switch",),
    ),
    Mutant(
        id="scan-vjp-ignores-saved-carries",
        file=VJPS,
        find="n_saved = nc if saved_carries else 0",
        replace="n_saved = 0",
        why="the VJP recomputes the carries the forward scan already output: a third scan in every compiled step",
        ops=("scan",),
    ),
    Mutant(
        id="tape-missing-result-cotangent-ones",
        file=TAPE,
        find="ct = tuple(c if c is not None else F.zeros_like(o) for c, o in zip(outs, node.out, strict=True))",
        replace="ct = tuple(c if c is not None else F.ones_like(o) for c, o in zip(outs, node.out, strict=True))",
        why="a result of a control-flow op that no cotangent reached counts as ones, not zeros",
        ops=("scan", "switch"),
    ),
    Mutant(
        id="tape-refused-vjp-gives-no-gradient",
        file=TAPE,
        find="        raise OpError(node.op.vjp.message(node.op.name, node.location))\n",
        replace="        return None\n",
        why="a while_loop under reverse mode silently gives no gradient instead of the OpError",
    ),
]
