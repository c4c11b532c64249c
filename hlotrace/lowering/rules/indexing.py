"""Lowering rules for hlotrace/ops/indexing.py (being written)."""
