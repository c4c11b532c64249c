"""Lowering rules for hlotrace/ops/math/: ``unary`` (float functions, square, rounding, sign,
predicates) and ``binary`` (atan2, logaddexp, mod, floor_divide)."""

from hlotrace.lowering.rules.math import unary, binary  # noqa: F401, I001
