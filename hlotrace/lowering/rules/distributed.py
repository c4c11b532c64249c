"""Lowering rule of hlotrace/ops/distributed.py: ``sdy.sharding_constraint`` on the mesh of
the module being lowered for many devices; the identity in a one-device module."""

from __future__ import annotations

import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd
from hlotrace.errors import LoweringError
from hlotrace.lowering.registry import MESH_SYMBOL, SPMD_PLAN, rule


@rule("sharding_constraint")
def _sharding_constraint(ctx, x, *, spec):
    plan = SPMD_PLAN.get()
    if plan is None:
        return x
    shape = ctx.in_avals[0].shape
    dims = tuple(spec) + ((),) * (len(shape) - len(spec))
    sizes = dict(zip(plan.axis_names, plan.mesh_shape, strict=True))
    # A dimension the axes do not divide is fine here: XLA pads the intermediate (the
    # SPMD differential covers it); inputs and results must divide (dist.shard says so).
    for axes in dims:
        unknown = [a for a in axes if a not in sizes]
        if unknown:
            raise LoweringError(
                f"dist.constraint names mesh axis {unknown[0]!r}, but the call's mesh has axes {plan.axis_names}"
                f"{' at ' + str(ctx.location) if ctx.location else ''}"
            )
    return jaxlib_spmd.sharding_constraint(x, jaxlib_spmd.tensor_sharding(MESH_SYMBOL, dims))
