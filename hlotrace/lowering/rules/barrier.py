"""Lowering rule of hlotrace/ops/barrier.py: one ``stablehlo.optimization_barrier`` over
every operand, returning operand ``index`` (identical barriers are merged by CSE)."""

from __future__ import annotations

from hlotrace.lowering.registry import rule
from hlotrace.runtime.jaxlib_compat import stablehlo


@rule("optimization_barrier")
def _optimization_barrier(ctx, *operands, index):
    return stablehlo.OptimizationBarrierOp(list(operands)).results[index]
