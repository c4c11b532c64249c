"""Reductions: sum, max, min, mean over ``axis`` (int, tuple or None = all), with ``keepdims``.
any, all, prod, var, std and logsumexp are in ``statistics``.

NumPy semantics with hlotrace's dtype rules (:mod:`hlotrace.dtypes`):

- ``sum`` of bool/int32 gives int32 and wraps on overflow (NumPy: int64), of int64 int64
  (wrapping too); float sums keep their dtype. ``sum`` over nothing is 0.
- ``mean`` of bool/int32 gives float32 (NumPy: float64), of int64 float64; floats keep
  their dtype. ``mean`` over nothing is NaN.
- ``max``/``min`` keep the dtype (on bool they are any/all), NaN propagates, and reducing an
  axis of length 0 is an error, as in NumPy (no identity).

float16/bfloat16 sums and means accumulate in float32 and round once at the end (NumPy
does this for float16 ``mean``; hlotrace does it for ``sum`` too so that accumulation order
rarely decides the last bit); float64 and int64 (and the mean of int64) accumulate in
64 bits. The lowering rules do the same.

The family is a package, each module importing only those before it: ``samples`` (the
sample strategies), ``basic`` (sum, max, min, mean and the helpers the others share),
``statistics`` (any, all, prod, var, std, logsumexp; semantics in its docstring).
"""

from hlotrace.ops.reduction import samples, basic, statistics  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.reduction.basic import FAMILY, accumulation_dtype, reduced_shape  # noqa: F401
from hlotrace.ops.reduction.statistics import __all__, all, any, logsumexp, prod, std, var  # noqa: A004, F401
