"""Lowering rules for hlotrace/ops/pooling/ (the backward ops' in backward.py).

- max_pool2d / avg_pool2d are one ``stablehlo.reduce_window`` each. The max carries an
  any-NaN flag beside the maximum (one variadic reduce_window): XLA:CPU turns large
  non-overlapping windowed max reductions into vectorized reductions that drop NaN.
- The adaptive pools are separable: the windows along W, then along H. Along one dim,
  windows of equal size at a regular stride are one reduce_window, size-1 windows that
  repeat each row r times are a broadcast, and any others one gather of every window's
  rows (k per window, the start value past a shorter window's end) and one reduce.
- Sums run in float32 for float16/bfloat16 (as the references), start at +0.0 (a -0.0
  result is made +0.0, which XLA's folding of ``x + 0`` would not guarantee) and are
  divided by constant divisors once.
- Selections (the first maximum, the last NaN) reduce (value, flat index[, payload])
  tuples with :func:`argmax_combine`, a max under a strict total order: associative and
  commutative, so any reduction order of XLA's gives the same element.

Modules, each importing only those before it: ``windows`` (the reduce_window, adaptive
and selection helpers), ``forward`` (the four pools), ``backward`` (their backward primitives).
"""

from hlotrace.lowering.rules.pooling import windows, forward, backward  # noqa: F401, I001  (in dependency order)
