"""The unary math ops: float functions, square, rounding, sign and the predicates
(semantics in :mod:`hlotrace.ops.math`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.elementwise import float_result_dtype
from hlotrace.ops.math.base import (
    FAMILY,
    _no_attrs,
    _zero_vjp,
    compute_dtype,
)
from hlotrace.ops.math.samples import (
    EXP_OVERFLOW,
    HALF_EXP_OVERFLOW,
    INVERSE_RANGES,
    inverse_sample,
    overflow_edge_sample,
    rounding_sample,
    sign_sample,
    small_values_sample,
    sometimes_other_dtypes,
    unary_sample,
)
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, OPS, Aval, OpDef, register_op

__all__ = [
    "acos",
    "acosh",
    "arctan",
    "asin",
    "asinh",
    "atanh",
    "ceil",
    "cosh",
    "erf",
    "expm1",
    "floor",
    "isfinite",
    "isinf",
    "isnan",
    "log1p",
    "reciprocal",
    "round",
    "sign",
    "sinh",
    "square",
    "tan",
]


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


def _as(x, out):
    """``x`` in ``out``'s (float) dtype, for VJPs that square it."""
    return x if x.dtype == out.dtype else F.astype(x, out.dtype)


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
        "asin",
        _float_reference(np.arcsin),
        # d asin(x) = 1 / sqrt(1 - x²); x² in the result dtype (an int operand would wrap)
        lambda ct, out, x: (F.multiply(ct, F.rsqrt(F.subtract(1.0, F.square(_as(x, out))))),),
        inverse_sample("asin", INVERSE_RANGES["asin"]),
        "inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1]",
    ),
    (
        "acos",
        _float_reference(np.arccos),
        lambda ct, out, x: (F.negative(F.multiply(ct, F.rsqrt(F.subtract(1.0, F.square(_as(x, out)))))),),
        inverse_sample("acos", INVERSE_RANGES["acos"]),
        "inverse cosine, in [0, pi]; NaN outside [-1, 1]",
    ),
    (
        "asinh",
        _float_reference(np.arcsinh),
        # d asinh(x) = 1 / sqrt(x² + 1) = 1 / cosh(asinh(x)): no x² to overflow
        lambda ct, out, x: (F.divide(ct, F.cosh(out)),),
        inverse_sample("asinh", INVERSE_RANGES["asinh"]),
        "inverse hyperbolic sine",
    ),
    (
        "acosh",
        _float_reference(np.arccosh),
        # d acosh(x) = 1 / sqrt(x² - 1) = 1 / sinh(acosh(x)): no x² to overflow
        lambda ct, out, x: (F.divide(ct, F.sinh(out)),),
        inverse_sample("acosh", INVERSE_RANGES["acosh"]),
        "inverse hyperbolic cosine, >= 0; NaN below 1",
    ),
    (
        "atanh",
        _float_reference(np.arctanh),
        lambda ct, out, x: (F.divide(ct, F.subtract(1.0, F.square(_as(x, out)))),),
        inverse_sample("atanh", INVERSE_RANGES["atanh"]),
        "inverse hyperbolic tangent; ±inf at ±1, NaN outside [-1, 1]",
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


def asin(x):
    """Inverse sine, in [-pi/2, pi/2] (NumPy's ``arcsin``); NaN outside [-1, 1]. Float result."""
    return apply(OPS["asin"], x)


def acos(x):
    """Inverse cosine, in [0, pi] (NumPy's ``arccos``); NaN outside [-1, 1]. Float result."""
    return apply(OPS["acos"], x)


def asinh(x):
    """Inverse hyperbolic sine (NumPy's ``arcsinh``). Float result."""
    return apply(OPS["asinh"], x)


def acosh(x):
    """Inverse hyperbolic cosine, >= 0 (NumPy's ``arccosh``); NaN below 1. Float result."""
    return apply(OPS["acosh"], x)


def atanh(x):
    """Inverse hyperbolic tangent (NumPy's ``arctanh``); ±inf at ±1, NaN outside [-1, 1]. Float result."""
    return apply(OPS["atanh"], x)


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
