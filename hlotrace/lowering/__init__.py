"""Lowering: Trace → StableHLO through the per-op rule registry."""

import hlotrace.lowering.rules  # noqa: F401  (fills RULES: every op family's rules)
from hlotrace.lowering.builder import LoweredModule, lower_region, lower_trace
from hlotrace.lowering.registry import PLATFORM_RULES, RULES, LoweringRuleContext, override, rule, rule_for

lower = lower_trace

__all__ = [
    "PLATFORM_RULES",
    "RULES",
    "LoweredModule",
    "LoweringRuleContext",
    "lower",
    "lower_region",
    "lower_trace",
    "override",
    "rule",
    "rule_for",
]
