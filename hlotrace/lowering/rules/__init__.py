"""Lowering rules, one module per op family (mirrors hlotrace/ops/)."""

from hlotrace.lowering.rules import creation, elementwise, indexing, linalg, nn, reduction, shape  # noqa: F401
