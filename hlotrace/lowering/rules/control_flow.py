"""Lowering rules for hlotrace/ops/control_flow.py.

A region's records are lowered into an MLIR block by the builder's ``lower_region``
(the same rules, the same result-type checks); their locations nest under the control-flow
record's: ``rec12:scan/body/rec3:add``. Constants a region reads are emitted inside it.

- switch -> ``stablehlo.case`` on the index clamped to ``[0, n - 1]`` (XLA would run the
  last branch for any index out of range); branch blocks take no arguments and use the
  operands from outside (``case`` admits no block arguments).
- while_loop -> ``stablehlo.while`` over (carry, captures); the body returns the captures
  unchanged (XLA hoists them out of the loop).
- scan -> ``stablehlo.while`` over (counter, carry, xs, captures, ys): step ``i`` runs at
  index ``t = i`` (``length - 1 - i`` when reversed), slices ``x[t]`` with ``dynamic_slice``
  and writes ``y[t]`` with ``dynamic_update_slice`` into ys that start as zeros. With
  ``unroll=k`` each iteration runs k steps and the ``length % k`` left run after the loop
  (``unroll >= length``: no loop at all).
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.builder import lower_region
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

_INDEX = Aval((), dt.int32)


def _scalar(value: int, dtype=dt.int32) -> ir.Value:
    return hlo.constant(value, dtype)


@rule("switch")
def _switch(ctx, index, *operands, branches):
    index = hlo.convert(index, ctx.in_avals[0], dt.int32)
    last = len(branches) - 1
    index = stablehlo.ClampOp(_scalar(0), index, _scalar(last)).result
    case = stablehlo.CaseOp([hlo.aval_type(a) for a in ctx.out_avals], index, len(branches))
    for i, branch in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            stablehlo.ReturnOp(lower_region(branch, f"branch{i}", operands))
    return list(case.results)


def _opaque_constants(operands, avals) -> list:
    """The operands, with float constants (captured arrays, literals) behind a barrier. A
    loop's body does not see them as constants, so the rules' guards for folded constants
    (``x + 0.0`` -> ``x``) cannot apply there, but XLA still folds through the loop (a slice
    of captured zeros added to a -0.0 carry kept -0.0 where IEEE gives +0.0: seed
    3086529418, scan-float64)."""
    return [
        hlo.hidden_from_folding(v) if a.dtype in dt.FLOATING and hlo.is_constant(v) else v
        for v, a in zip(operands, avals, strict=True)
    ]


@rule("while_loop")
def _while_loop(ctx, *operands, cond, body, num_carry):
    operands = _opaque_constants(operands, ctx.in_avals)
    types = [hlo.aval_type(a) for a in ctx.in_avals]
    loop = stablehlo.WhileOp(types, list(operands))
    cond_block = loop.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        stablehlo.ReturnOp(lower_region(cond, "cond", list(cond_block.arguments)))
    body_block = loop.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body_block):
        args = list(body_block.arguments)
        stablehlo.ReturnOp(lower_region(body, "body", args) + args[num_carry:])
    return list(loop.results[:num_carry])


def _slice_at(x, aval: Aval, t) -> ir.Value:
    """``x[t]`` of ``x`` (of ``aval``) at the scalar index ``t``."""
    zeros = [_scalar(0) for _ in aval.shape[1:]]
    piece = stablehlo.DynamicSliceOp(x, [t, *zeros], [1, *aval.shape[1:]]).result
    return hlo.reshape(piece, aval.shape[1:], aval.dtype)


def _update_at(ys, y, aval: Aval, t) -> ir.Value:
    """``ys`` (of ``aval``) with ``ys[t] = y``."""
    zeros = [_scalar(0) for _ in aval.shape[1:]]
    piece = hlo.reshape(y, (1, *aval.shape[1:]), aval.dtype)
    return stablehlo.DynamicUpdateSliceOp(ys, piece, [t, *zeros]).result


@rule("scan")
def _scan(ctx, *operands, body, num_carry, num_xs, length, reverse, saved_carries=False, unroll=1):
    operands = _opaque_constants(operands, ctx.in_avals)
    n_in = len(operands)
    x_avals = ctx.in_avals[num_carry : num_carry + num_xs]
    y_avals = ctx.out_avals[num_carry:]

    def step(i, carry, xs, captures, ys):
        """Step ``i`` (a scalar i32 value): the new carry and ys."""
        t = stablehlo.SubtractOp(_scalar(length - 1), i).result if reverse else i
        x_t = [_slice_at(x, a, t) for x, a in zip(xs, x_avals, strict=True)]
        results = lower_region(body, "body", [*carry, *x_t, *captures])
        new_ys = [_update_at(s, y, a, t) for s, y, a in zip(ys, results[num_carry:], y_avals, strict=True)]
        return results[:num_carry], new_ys

    carry, xs = list(operands[:num_carry]), list(operands[num_carry : num_carry + num_xs])
    captures = list(operands[num_carry + num_xs :])
    ys = [hlo.constant(0, a.dtype, a.shape) for a in y_avals]
    # While iterations of ``unroll`` steps each, the rest after the loop; no loop when one
    # iteration would cover every step.
    trips = length // unroll if unroll < length else 0
    if trips:
        types = [hlo.aval_type(a) for a in (_INDEX, *ctx.in_avals, *y_avals)]
        loop = stablehlo.WhileOp(types, [_scalar(0), *operands, *ys])
        cond_block = loop.regions[0].blocks.append(*types)
        with ir.InsertionPoint(cond_block):
            counter = cond_block.arguments[0]
            stablehlo.ReturnOp([hlo.compare(counter, _scalar(trips), "LT", dt.int32)])
        body_block = loop.regions[1].blocks.append(*types)
        with ir.InsertionPoint(body_block):
            counter, *inner = body_block.arguments
            c, x, k, y = (
                inner[:num_carry],
                inner[num_carry : num_carry + num_xs],
                inner[num_carry + num_xs : n_in],
                inner[n_in:],
            )
            first = stablehlo.MulOp(counter, _scalar(unroll)).result if unroll > 1 else counter
            for j in range(unroll):
                i = stablehlo.AddOp(first, _scalar(j)).result if j else first
                c, y = step(i, c, x, k, y)
            stablehlo.ReturnOp([stablehlo.AddOp(counter, _scalar(1)).result, *c, *x, *k, *y])
        carry, ys = list(loop.results[1 : 1 + num_carry]), list(loop.results[1 + n_in :])
    for i in range(trips * unroll, length):
        carry, ys = step(_scalar(i), carry, xs, captures, ys)
    return [*carry, *ys]
