"""Lowering rules for hlotrace/ops/reduction/: ``basic`` (sum, max, min, mean and the
``reduce`` helper) and ``statistics`` (any, all, prod, var, logsumexp)."""

from hlotrace.lowering.rules.reduction import basic, statistics  # noqa: F401  (in dependency order)
