"""Lowering rules for hlotrace/ops/shape.py.

Attributes arrive canonical (resolved shapes, non-negative explicit axes and perm), so
each rule is one StableHLO op or less.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace.lowering.registry import rule
from hlotrace.runtime.jaxlib_compat import stablehlo


def _reshape_to_output(ctx, x, **_attrs):
    out = ctx.out_aval
    if ctx.in_avals[0].shape == out.shape:
        return x
    return hlo.reshape(x, out.shape, out.dtype)


# expand_dims and squeeze only add or drop size-1 dims: a reshape keeps the element order.
rule("reshape")(_reshape_to_output)
rule("expand_dims")(_reshape_to_output)
rule("squeeze")(_reshape_to_output)


@rule("transpose")
def _transpose(ctx, x, *, perm):
    if perm == tuple(range(len(perm))):
        return x
    return stablehlo.TransposeOp(x, list(perm)).result


@rule("broadcast_to")
def _broadcast_to(ctx, x, *, shape):
    return hlo.broadcast_to(x, ctx.in_avals[0], shape)


@rule("concat")
def _concat(ctx, *operands, axis):
    dtype = ctx.out_aval.dtype
    converted = [hlo.convert(v, a, dtype) for v, a in zip(operands, ctx.in_avals, strict=True)]
    if len(converted) == 1:
        return converted[0]
    return stablehlo.ConcatenateOp(converted, axis).result
