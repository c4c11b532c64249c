"""Lowering rules, one module per op family (mirrors hlotrace/ops/)."""

from hlotrace.lowering.rules import elementwise, indexing, linalg, reduction, shape  # noqa: F401
