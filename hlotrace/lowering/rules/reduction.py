"""Lowering rules for hlotrace/ops/reduction.py (being written)."""
