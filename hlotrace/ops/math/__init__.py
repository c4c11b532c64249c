"""More elementwise math: float functions (log1p, expm1, erf, tan, arctan, sinh, cosh,
reciprocal, the inverse functions asin, acos, asinh, acosh, atanh), square, rounding (floor,
ceil, round, sign), atan2, logaddexp, mod, floor_divide and the predicates isnan, isinf,
isfinite.

Semantics are NumPy's (2.x) with hlotrace's dtype rules (:mod:`hlotrace.dtypes`): binary
ops promote and broadcast their operands, Python scalars are weak. Each reference below is
the definition the lowering rules must match. Differences from NumPy and PyTorch:

- Float-valued functions (``log1p expm1 erf tan arctan sinh cosh reciprocal atan2`` and
  ``asin acos asinh acosh atanh logaddexp``) of
  ``int32`` give ``float32`` (NumPy: float64), of ``int64`` ``float64``, of ``bool``
  ``float16`` (as NumPy). ``reciprocal`` is one of them: ``reciprocal(int)`` is a float
  ``1 / x`` as in PyTorch, where NumPy truncates it to an integer (0 for ``|x| > 1``).
  float16/bfloat16 are computed in float32 and rounded once, as NumPy's and ml_dtypes'
  half-precision loops do.
- ``asin``, ``acos``, ``asinh``, ``acosh``, ``atanh`` (MegEngine's and PyTorch's names;
  NumPy's ``arcsin`` ...): outside the real domain (``|x| > 1`` for asin/acos/atanh, ``x < 1``
  for acosh) the result is NaN, as NumPy's, so no ``OpDef.domain`` is declared (as for
  ``log``/``sqrt``: NaN there is the defined result, and the samples draw such values);
  ``atanh(±1) = ±inf``. Lowered through CHLO's ``asin``... ``atanh``, which XLA expands
  with the large-|x| and small-|x| branches (measured within 3.2e-7 relative in float32).
- ``logaddexp(x, y) = log(exp(x) + exp(y))`` as ``max(x, y) + log1p(exp(-|x - y|))``
  (never overflows), and ``x + log(2)`` where ``x == y`` (NumPy's special case:
  ``logaddexp(±inf, ±inf) = ±inf``, ``logaddexp(inf, -inf) = inf``). Its VJP is
  ``(ct * sigmoid(x - y), ct * sigmoid(y - x))``.
- ``erf``: NumPy has none; the reference is ``math.erf`` in float64, rounded to the result
  dtype (as ``scipy.special.erf`` and ``torch.erf``); the rule is ``chlo.erf``.
- ``sinh``/``cosh``: finite wherever NumPy's are, up to the overflow threshold
  (``sinh(89.4)`` in float32 is 3.4e38; ``jax.numpy.sinh`` gives inf there).
- ``square`` of an integer wraps (``46341**2`` in int32 is negative), as NumPy;
  ``square(bool)`` is refused (NumPy gives int8, which hlotrace lacks).
- ``floor``/``ceil``/``round`` of integers and bools return the input unchanged and keep
  its dtype (NumPy 2.x for floor/ceil; NumPy's ``round`` of bool gives float16). ``round`` is NumPy's ``round(x, decimals=0)``:
  halves go to the even neighbour (``round(2.5) == 2``, ``round(-0.5) == -0.0``), as
  ``torch.round``; Python's ``round`` agrees, C's ``round`` rounds half away from zero.
- ``sign``: -1, 0 or 1 in the input dtype; ``sign(NaN)`` is NaN and ``sign(-0.0)`` is
  ``+0.0`` for every float dtype (NumPy 2.x; ml_dtypes' bfloat16 ``sign``,
  ``jax.numpy.sign`` and ``stablehlo.sign`` give -0.0).
  ``sign(bool)`` is refused (as NumPy).
- ``mod(x, y)`` (NumPy's ``remainder``, Python's ``%``): the result has the sign of ``y``
  (``mod(-1, 3) == 2``; ``fmod`` / ``torch.fmod`` take ``x``'s sign). Floats follow NumPy's
  ``divmod`` exactly: a zero result carries ``y``'s sign (``mod(-0.0, 3) == +0.0``,
  ``mod(3, -3) == -0.0``), ``mod(x, ±0)``, ``mod(±inf, y)`` and NaN operands give NaN,
  ``mod(x, ±inf)`` is ``x`` when ``x`` has the sign of ``y`` and ``y`` otherwise
  (``mod(-3, inf) == inf``, Python's ``%`` too; a zero ``x`` gives a zero of ``y``'s sign). Integers: ``mod(x, 0) == 0`` (NumPy: 0
  and a warning; XLA's remainder gives ``x``), ``mod(INT_MIN, -1) == 0``.
- ``floor_divide(x, y)`` (``//``): floats as NumPy's ``divmod``: ``(x - fmod(x, y)) / y``
  corrected to the floor and snapped to the nearest integer, so
  ``floor_divide(x, ±0)`` is ``x / ±0`` (±inf, NaN for 0 and NaN), ``floor_divide(±inf,
  y)`` is NaN, ``floor_divide(-3, inf) == -1``, and a zero quotient takes
  the sign of ``x / y``. Integers: ``floor_divide(x, 0) == 0`` (NumPy: 0 and a warning;
  XLA's divide gives -1) and ``floor_divide(INT_MIN, -1) == INT_MIN`` (wraps, as NumPy).
  ``mod``/``floor_divide`` of two bools are refused (NumPy gives int8).
- ``atan2(x, y)`` is NumPy's ``arctan2(x, y)``, the angle of the point ``(y, x)``, with
  C99's special values (``atan2(±0, -0.0) == ±pi``, ``atan2(±inf, inf) == ±pi/4`` ...).
- ``isnan``/``isinf``/``isfinite``: every dtype; integers and bools are finite, never NaN
  nor infinite.

VJPs follow :mod:`hlotrace.autodiff`. floor, ceil, round, sign and floor_divide are
differentiable with a zero gradient (PyTorch's convention; NumPy has no gradients); mod's is
``(ct, -ct * floor_divide(x, y))``; the predicates are not differentiable.

The family is a package, each module importing only those before it: ``base`` (dtypes and
helpers shared with the rules), ``samples`` (the sample strategies), ``unary`` (the float
functions, rounding, square, predicates), ``binary`` (atan2, logaddexp, mod, floor_divide).
"""

from hlotrace.ops.math import base, samples, unary, binary  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.math.base import FAMILY, NUMERIC_DTYPES, SINH_COSH_SPLIT, compute_dtype  # noqa: F401
from hlotrace.ops.math.binary import __all__ as _binary_all
from hlotrace.ops.math.binary import *  # noqa: F403
from hlotrace.ops.math.unary import __all__ as _unary_all
from hlotrace.ops.math.unary import *  # noqa: F403

__all__ = sorted([*_unary_all, *_binary_all])
