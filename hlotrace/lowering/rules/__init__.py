"""Lowering rules, one module per op family (mirrors hlotrace/ops/)."""

from hlotrace.lowering.rules import elementwise  # noqa: F401
