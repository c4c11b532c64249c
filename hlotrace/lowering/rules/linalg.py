"""Lowering rules for hlotrace/ops/linalg.py (being written)."""
