"""Lowering: Trace → StableHLO through the per-op rule registry."""

from hlotrace.lowering.builder import LoweredModule, lower_trace
from hlotrace.lowering.registry import RULES, LoweringRuleContext, rule

lower = lower_trace

__all__ = ["RULES", "LoweredModule", "LoweringRuleContext", "lower", "lower_trace", "rule"]
