"""The lowering rule registry.

A rule turns one recorded op into StableHLO::

    @rule("exp")
    def _exp(ctx, x):
        return hlo.exponential(hlo.convert(x, ctx.in_avals[0], ctx.out_aval.dtype))

``ctx`` is a :class:`LoweringRuleContext`; operands are MLIR values in the op's input order
and attributes arrive as keyword arguments, exactly as recorded. A rule returns one MLIR
value (or a list, one per output). The builder checks each result's type against the
recorded output aval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hlotrace.ops.registry import Aval
from hlotrace.source import SourceLocation

RULES: dict[str, Callable[..., Any]] = {}


def rule(op_name: str):
    """Register the decorated function as the lowering rule of ``op_name`` (once only)."""

    def register(fn):
        if op_name in RULES:
            raise ValueError(f"a lowering rule for {op_name!r} is already registered ({RULES[op_name].__module__})")
        RULES[op_name] = fn
        return fn

    return register


@dataclass(frozen=True, slots=True)
class LoweringRuleContext:
    in_avals: tuple[Aval, ...]  # shape/dtype of each operand, in order
    out_avals: tuple[Aval, ...]  # recorded shape/dtype of each result
    op_name: str  # registry name of the op being lowered
    record_index: int  # position of the OpRecord in the trace
    location: SourceLocation | None  # the user's source line that applied the op

    @property
    def out_aval(self) -> Aval:
        """The single output's aval (most ops have one)."""
        return self.out_avals[0]
