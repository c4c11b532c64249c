"""Lowering rules for hlotrace/ops/shape.py (being written)."""
