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

import contextlib
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hlotrace.config import MATMUL_PRECISIONS
from hlotrace.errors import argument_error
from hlotrace.ops.registry import Aval
from hlotrace.overrides import OVERRIDES, override_token  # noqa: F401  (re-exported)
from hlotrace.source import SourceLocation

# The SPMD plan of the module being lowered for many devices (set by the plan that
# hlotrace.distributed passes to lower_trace), else None: sharding_constraint's rule reads it
# to lower onto the module's ``sdy.mesh``, named MESH_SYMBOL.
SPMD_PLAN: contextvars.ContextVar = contextvars.ContextVar("hlotrace_spmd_plan", default=None)
MESH_SYMBOL = "mesh"

RULES: dict[str, Callable[..., Any]] = {}  # the default rule of each op
# platform ("cpu", "cuda", a plugin's name) -> op -> the rule used on that platform instead
PLATFORM_RULES: dict[str, dict[str, Callable[..., Any]]] = {}
_OVERRIDES = OVERRIDES  # active lowering.override() layers, innermost last (hlotrace.overrides)
# The platform the module being lowered will be compiled for (set by lower_trace).
_PLATFORM: contextvars.ContextVar[str | None] = contextvars.ContextVar("hlotrace_lowering_platform", default=None)
# The precision of the float32 dot_generals and convolutions of the module being lowered, one of
# config.MATMUL_PRECISIONS (set by lower_trace; read through hlo.precision_config by the rules).
MATMUL_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("hlotrace_matmul_precision", default="highest")


def rule(op_name: str, platform: str | None = None):
    """Register the decorated function as the lowering rule of ``op_name`` (once only), or,
    with ``platform``, as its rule on that platform only (the default rule elsewhere).

    >>> @rule("gelu", platform="cuda")
    ... def _gelu_cuda(ctx, x): ...
    """
    platform = None if platform is None else platform.lower()

    def register(fn):
        table = RULES if platform is None else PLATFORM_RULES.setdefault(platform, {})
        if op_name in table:
            where = "" if platform is None else f" on {platform}"
            raise ValueError(
                f"a lowering rule for {op_name!r}{where} is already registered ({table[op_name].__module__})"
            )
        table[op_name] = fn
        return fn

    return register


def rule_for(op_name: str, platform: str | None = None):
    """The rule that lowers ``op_name`` for ``platform`` (default: the platform of the module
    being lowered): an active override, else the platform's own rule, else the default."""
    for layer in reversed(_OVERRIDES):
        if op_name in layer:
            return layer[op_name]
    platform = platform or _PLATFORM.get()
    if platform is not None:
        scoped = PLATFORM_RULES.get(platform)
        if scoped is not None and op_name in scoped:
            return scoped[op_name]
    return RULES.get(op_name)


@contextlib.contextmanager
def override(rules: dict[str, Callable[..., Any]]):
    """Lower with other rules for some ops while the block runs (experiments):

    >>> with lowering.override({"exp": my_exp_rule}):
    ...     step(x)          # compiled with my_exp_rule; the registry is untouched

    Overrides win over platform and default rules, nest (the innermost wins) and are part of
    ``xla_trace``'s cache key, so a program compiled under one is not reused outside it.
    """
    for name, fn in rules.items():
        if not callable(fn):
            raise TypeError(f"lowering.override: the rule for {name!r} is a {type(fn).__name__}, not a function")
    layer = dict(rules)
    _OVERRIDES.append(layer)
    try:
        yield layer
    finally:
        _OVERRIDES.remove(layer)


@contextlib.contextmanager
def lowering_for(platform: str | None, precision: str = "highest"):
    """Select ``platform``'s rules, and ``precision`` for float32 matmuls and convolutions,
    for the lowering inside the block."""
    if precision not in MATMUL_PRECISIONS:
        raise argument_error("lower_trace", "precision", precision, " or ".join(map(repr, MATMUL_PRECISIONS)))
    token = _PLATFORM.set(None if platform is None else platform.lower())
    precision_token = MATMUL_PRECISION.set(precision)
    try:
        yield
    finally:
        MATMUL_PRECISION.reset(precision_token)
        _PLATFORM.reset(token)


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
