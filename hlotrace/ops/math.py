"""More elementwise math: float functions (log1p, expm1, erf, tan, arctan, sinh, cosh,
reciprocal), square, rounding (floor, ceil, round, sign), atan2, mod, floor_divide and the
predicates isnan, isinf, isfinite.

Semantics are NumPy's (2.x) with hlotrace's dtype rules (:mod:`hlotrace.dtypes`): binary
ops promote and broadcast their operands, Python scalars are weak. Each reference below is
the definition the lowering rules must match. Differences from NumPy and PyTorch:

- Float-valued functions (``log1p expm1 erf tan arctan sinh cosh reciprocal atan2``) of
  ``int32`` give ``float32`` (NumPy: float64), of ``int64`` ``float64``, of ``bool``
  ``float16`` (as NumPy). ``reciprocal`` is one of them: ``reciprocal(int)`` is a float
  ``1 / x`` as in PyTorch, where NumPy truncates it to an integer (0 for ``|x| > 1``).
  float16/bfloat16 are computed in float32 and rounded once, as NumPy's and ml_dtypes'
  half-precision loops do.
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
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.elementwise import float_result_dtype
from hlotrace.ops.math_samples import (
    EXP_OVERFLOW,
    HALF_EXP_OVERFLOW,
    overflow_edge_sample,
    rounding_sample,
    sign_sample,
    small_values_sample,
    sometimes_other_dtypes,
    unary_sample,
)
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, OPS, Aval, OpDef, register_op

FAMILY = "math"

__all__ = [
    "arctan",
    "atan2",
    "ceil",
    "cosh",
    "erf",
    "expm1",
    "floor",
    "floor_divide",
    "isfinite",
    "isinf",
    "isnan",
    "log1p",
    "mod",
    "reciprocal",
    "round",
    "sign",
    "sinh",
    "square",
    "tan",
]

NUMERIC_DTYPES = (*dt.INTEGER, *dt.FLOATING)
# |x| above which sinh and cosh are computed as exp(|x|/2)**2 / 2 (exp(-|x|) is below half
# an ulp of the result from here on, in float32 and float64).
SINH_COSH_SPLIT = 20.0


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype float results are computed in: float32 for float16/bfloat16."""
    return dt.promote_strong(dtype, dt.float32) if dtype in dt.FLOATING else dtype


def _no_attrs(avals, attrs):
    if attrs:
        raise ShapeDtypeError(f"takes no attributes, got {sorted(attrs)}")
    return {}


def _register(name, reference, infer, sample, vjp, doc):
    register_op(
        OpDef(
            name=name,
            family=FAMILY,
            reference=reference,
            infer=infer,
            canonicalize=_no_attrs,
            sample=sample,
            vjp=vjp,
            doc=doc,
        )
    )


# -- float-valued unary functions ------------------------------------------------------------


def _float_infer(x: Aval) -> Aval:
    return Aval(x.shape, float_result_dtype(x.dtype))


def _float_reference(fn):
    def reference(x):
        return fn(x.astype(float_result_dtype(x.dtype), copy=False))

    return reference


_erf_float64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf_reference(x):
    return _erf_float64(x.astype(np.float64)).astype(float_result_dtype(x.dtype))


_FLOAT_UNARY = [
    # name, reference, vjp, sample, doc
    (
        "log1p",
        _float_reference(np.log1p),
        lambda ct, out, x: (F.divide(ct, F.add(x, 1.0)),),
        small_values_sample("log1p"),
        "log(1 + x), accurate for small |x|",
    ),
    (
        "expm1",
        _float_reference(np.expm1),
        lambda ct, out, x: (F.multiply(ct, F.exp(x)),),  # not out + 1: it cancels for x << 0
        lambda s: s.st.one_of(small_values_sample("expm1")(s), overflow_edge_sample("expm1", EXP_OVERFLOW)(s)),
        "exp(x) - 1, accurate for small |x|",
    ),
    (
        "erf",
        _erf_reference,
        # d erf(x) = 2 / sqrt(pi) * exp(-x²)
        lambda ct, out, x: (F.multiply(F.multiply(ct, 2.0 / math.sqrt(math.pi)), F.exp(F.negative(F.square(x)))),),
        unary_sample("erf"),
        "the error function 2/sqrt(pi) * integral of exp(-t²) from 0 to x",
    ),
    (
        "tan",
        _float_reference(np.tan),
        lambda ct, out, x: (F.multiply(ct, F.add(F.square(out), 1.0)),),
        unary_sample("tan"),
        "tangent",
    ),
    (
        "arctan",
        _float_reference(np.arctan),
        lambda ct, out, x: (F.divide(ct, F.add(F.square(x), 1.0)),),
        unary_sample("arctan"),
        "inverse tangent, in [-pi/2, pi/2]",
    ),
    (
        "sinh",
        _float_reference(np.sinh),
        lambda ct, out, x: (F.multiply(ct, F.cosh(x)),),
        overflow_edge_sample("sinh", HALF_EXP_OVERFLOW),
        "hyperbolic sine, finite up to NumPy's overflow threshold",
    ),
    (
        "cosh",
        _float_reference(np.cosh),
        lambda ct, out, x: (F.multiply(ct, F.sinh(x)),),
        overflow_edge_sample("cosh", HALF_EXP_OVERFLOW),
        "hyperbolic cosine, finite up to NumPy's overflow threshold",
    ),
    (
        "reciprocal",
        _float_reference(np.reciprocal),
        # d(1/x) = -1/x² = -out²
        lambda ct, out, x: (F.negative(F.multiply(ct, F.square(out))),),
        unary_sample("reciprocal"),
        "1 / x as a float (integers give float32/float64, unlike NumPy's integer reciprocal)",
    ),
]

for _name, _reference, _vjp, _sample, _doc in _FLOAT_UNARY:
    _register(_name, _reference, _float_infer, sometimes_other_dtypes(_sample), _vjp, _doc)


# -- square and rounding ------------------------------------------------------------------------


def _square_infer(x: Aval) -> Aval:
    if x.dtype == dt.bool_:
        raise ShapeDtypeError("is not defined for bool tensors (NumPy gives int8, which hlotrace lacks)")
    return x


def _sign_infer(x: Aval) -> Aval:
    if x.dtype == dt.bool_:
        raise ShapeDtypeError("is not defined for bool tensors (NumPy refuses it too)")
    return x


def _rounding_reference(ufunc):
    def reference(x):
        # Integers and bools are already integral: unchanged (NumPy 1.x would give float64).
        return ufunc(x) if x.dtype in dt.FLOATING else x

    return reference


def _sign_reference(x):
    if x.dtype in dt.INTEGER:
        return np.sign(x)
    wide = x.astype(compute_dtype(x.dtype))
    # NumPy 2's definition, spelled out: NaN stays NaN, ±0.0 gives +0.0.
    return np.where(wide > 0, 1.0, np.where(wide < 0, -1.0, np.where(wide == 0, 0.0, wide))).astype(x.dtype)


def _square_vjp(ct, out, x):
    return (F.multiply(F.multiply(ct, 2.0), x),)


def _zero_vjp(ct, out, *inputs):
    return (None,) * len(inputs)


_register(
    "square",
    np.square,
    _square_infer,
    sometimes_other_dtypes(lambda s: s.elementwise(1, s.FLOATS), dt.INTEGER),
    _square_vjp,
    "x * x; integers wrap; bool refused",
)
_register(
    "floor",
    _rounding_reference(np.floor),
    lambda x: x,
    sometimes_other_dtypes(rounding_sample),
    _zero_vjp,
    "largest integer <= x; integers and bools unchanged; zero gradient",
)
_register(
    "ceil",
    _rounding_reference(np.ceil),
    lambda x: x,
    sometimes_other_dtypes(rounding_sample),
    _zero_vjp,
    "smallest integer >= x; integers and bools unchanged; zero gradient",
)
_register(
    "round",
    _rounding_reference(np.rint),
    lambda x: x,
    sometimes_other_dtypes(rounding_sample),
    _zero_vjp,
    "nearest integer, halves to even (NumPy's round, decimals=0); zero gradient",
)
_register(
    "sign",
    _sign_reference,
    _sign_infer,
    sometimes_other_dtypes(sign_sample, dt.INTEGER),
    _zero_vjp,
    "-1, 0 or 1 in x's dtype; sign(NaN) is NaN, sign(-0.0) is +0.0; zero gradient",
)


# -- predicates -------------------------------------------------------------------------------------


def _predicate_infer(x: Aval) -> Aval:
    return Aval(x.shape, dt.bool_)


def _predicate_reference(ufunc, integer_value: bool):
    def reference(x):
        return ufunc(x) if x.dtype in dt.FLOATING else np.full(x.shape, integer_value)

    return reference


for _name, _ufunc, _integer_value, _doc in [
    ("isnan", np.isnan, False, "x is NaN (False for integers and bools)"),
    ("isinf", np.isinf, False, "x is +inf or -inf (False for integers and bools)"),
    ("isfinite", np.isfinite, True, "x is neither NaN nor ±inf (True for integers and bools)"),
]:
    _register(
        _name,
        _predicate_reference(_ufunc, _integer_value),
        _predicate_infer,
        sometimes_other_dtypes(lambda s: s.elementwise(1, s.FLOATS)),
        NOT_DIFFERENTIABLE,
        _doc,
    )


# -- public functions -----------------------------------------------------------------------------


def log1p(x):
    """log(1 + x), accurate for small |x|. Float result (int32 gives float32, int64 float64)."""
    return apply(OPS["log1p"], x)


def expm1(x):
    """exp(x) - 1, accurate for small |x|. Float result."""
    return apply(OPS["expm1"], x)


def erf(x):
    """The error function. Float result."""
    return apply(OPS["erf"], x)


def tan(x):
    """Tangent. Float result."""
    return apply(OPS["tan"], x)


def arctan(x):
    """Inverse tangent, in [-pi/2, pi/2]. Float result."""
    return apply(OPS["arctan"], x)


def sinh(x):
    """Hyperbolic sine. Float result."""
    return apply(OPS["sinh"], x)


def cosh(x):
    """Hyperbolic cosine. Float result."""
    return apply(OPS["cosh"], x)


def reciprocal(x):
    """1 / x as a float (integers give float32/float64, unlike NumPy's integer reciprocal)."""
    return apply(OPS["reciprocal"], x)


def square(x):
    """x * x in x's dtype (integers wrap; bool is refused)."""
    return apply(OPS["square"], x)


def floor(x):
    """Largest integer <= x (integers and bools unchanged). Zero gradient."""
    return apply(OPS["floor"], x)


def ceil(x):
    """Smallest integer >= x (integers and bools unchanged). Zero gradient."""
    return apply(OPS["ceil"], x)


def round(x):  # noqa: A001  (NumPy's name)
    """Nearest integer, halves to even: NumPy's ``round(x)`` with ``decimals=0``. Zero gradient."""
    return apply(OPS["round"], x)


def sign(x):
    """-1, 0 or 1 in x's dtype; sign(NaN) is NaN, sign(-0.0) is +0.0 (NumPy 2). Zero gradient."""
    return apply(OPS["sign"], x)


def isnan(x):
    """Whether x is NaN (False for integers and bools)."""
    return apply(OPS["isnan"], x)


def isinf(x):
    """Whether x is +inf or -inf (False for integers and bools)."""
    return apply(OPS["isinf"], x)


def isfinite(x):
    """Whether x is neither NaN nor infinite (True for integers and bools)."""
    return apply(OPS["isfinite"], x)


# atan2, mod and floor_divide live in math_binary.py; imported here so that they register.
from hlotrace.ops.math_binary import atan2, floor_divide, mod  # noqa: E402
