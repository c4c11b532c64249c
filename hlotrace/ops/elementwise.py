"""Elementwise ops: binary arithmetic, comparisons, logic, unary math, where, astype.

Semantics follow NumPy with hlotrace's dtype rules (:mod:`hlotrace.dtypes`): operands are
promoted to a common dtype and broadcast; the reference computes in the promoted dtype.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, broadcast_shapes, refuse_bool
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, register_op

FAMILY = "elementwise"


# -- VJPs (contract: hlotrace.autodiff; broadcasting and dtype casts are the engine's) ----


def _chooser_vjp(first_wins):
    """VJP of maximum/minimum: the chosen operand gets ct, ties split it evenly (as JAX and
    PyTorch do), positions where the result is NaN give none to the non-NaN operand."""

    def vjp(ct, out, x, y):
        half = F.where(F.equal(x, y), F.multiply(ct, 0.5), 0.0)
        return F.where(first_wins(x, y), ct, half), F.where(first_wins(y, x), ct, half)

    return vjp


def _power_vjp(ct, out, x, y):
    # In the dtype the op computed in: y - 1 rounded to a narrower operand dtype (bfloat16)
    # is not what XLA computes (it keeps the excess precision), and not the derivative either.
    x = x if x.dtype == out.dtype else F.astype(x, out.dtype)
    y = y if y.dtype == out.dtype else F.astype(y, out.dtype)
    # d/dx x**y = y * x**(y-1) (0 where y == 0, also at x == 0); d/dy = x**y * log(x) (0 at x == 0).
    dx = F.where(F.equal(y, 0), 0.0, F.multiply(y, F.power(x, F.subtract(y, 1))))
    dy = F.where(F.equal(x, 0), 0.0, F.multiply(out, F.log(x)))
    return F.multiply(ct, dx), F.multiply(ct, dy)


VJPS = {
    "add": lambda ct, out, x, y: (ct, ct),
    "subtract": lambda ct, out, x, y: (ct, F.negative(ct)),
    "multiply": lambda ct, out, x, y: (F.multiply(ct, y), F.multiply(ct, x)),
    # d(x/y)/dy = -x/y² = -out/y
    "divide": lambda ct, out, x, y: (F.divide(ct, y), F.negative(F.divide(F.multiply(ct, out), y))),
    "power": _power_vjp,
    "maximum": _chooser_vjp(lambda a, b: F.greater(a, b)),
    "minimum": _chooser_vjp(lambda a, b: F.less(a, b)),
    "negative": lambda ct, out, x: (F.negative(ct),),
    # sign(x) * ct, with 0 at x == 0 (and NaN at NaN)
    "abs": lambda ct, out, x: (F.where(F.greater(x, 0), ct, F.where(F.less(x, 0), F.negative(ct), F.multiply(ct, x))),),
    "exp": lambda ct, out, x: (F.multiply(ct, out),),
    "log": lambda ct, out, x: (F.divide(ct, x),),
    "sqrt": lambda ct, out, x: (F.divide(F.multiply(ct, 0.5), out),),
    # d x^(-1/2) = -1/2 x^(-3/2) = -out / (2x)
    "rsqrt": lambda ct, out, x: (F.divide(F.multiply(F.multiply(ct, -0.5), out), x),),
    "tanh": lambda ct, out, x: (F.multiply(ct, F.subtract(1.0, F.multiply(out, out))),),
    "sin": lambda ct, out, x: (F.multiply(ct, F.cos(x)),),
    "cos": lambda ct, out, x: (F.negative(F.multiply(ct, F.sin(x))),),
    "where": lambda ct, out, cond, x, y: (None, F.where(cond, ct, 0.0), F.where(cond, 0.0, ct)),
    "astype": lambda ct, out, x, *, dtype: (ct,),  # the engine casts ct back to x's dtype
}


# -- binary ---------------------------------------------------------------------------


def _promoted(a: Aval, b: Aval) -> Aval:
    return Aval(broadcast_shapes(a.shape, b.shape), dt.promote(a.dtype, b.dtype))


def _arith_infer(bool_meaning: str | None):
    def infer(a: Aval, b: Aval) -> Aval:
        out = _promoted(a, b)
        if bool_meaning is not None:
            refuse_bool(out.dtype, bool_meaning)
        return out

    return infer


def _divide_infer(a: Aval, b: Aval) -> Aval:
    out = _promoted(a, b)
    # True division: int32 and bool operands give float32 (NumPy: float64), int64 float64.
    return Aval(out.shape, dt.true_divide_dtype(out.dtype))


def _compare_infer(a: Aval, b: Aval) -> Aval:
    return Aval(_promoted(a, b).shape, dt.bool_)


def _logical_infer(a: Aval, b: Aval) -> Aval:
    return Aval(broadcast_shapes(a.shape, b.shape), dt.bool_)


def _in_dtype(dtype, ufunc):
    """Reference that casts both operands to ``dtype`` (the promoted one), then applies ufunc."""

    def reference(a, b):
        common = dt.promote(a.dtype, b.dtype) if dtype is None else dtype
        return ufunc(a.astype(common, copy=False), b.astype(common, copy=False))

    return reference


def _divide_reference(a, b):
    out = dt.promote(a.dtype, b.dtype)
    out = dt.true_divide_dtype(out)
    return np.true_divide(a.astype(out, copy=False), b.astype(out, copy=False))


_NEGATIVE_POWER = "integers to negative integer powers are not allowed (NumPy refuses them too)"


def _power_host_check(avals, hosts):
    """The device engine's check of an integer power's exponent, when it is on the host."""
    exponent = hosts[1]
    if exponent is not None and dt.promote(avals[0].dtype, avals[1].dtype) in dt.INTEGER and np.any(exponent < 0):
        return _NEGATIVE_POWER
    return None


def _power_reference(a, b):
    common = dt.promote(a.dtype, b.dtype)
    a, b = a.astype(common, copy=False), b.astype(common, copy=False)
    if common in dt.INTEGER and np.any(b < 0):
        raise ValueError(_NEGATIVE_POWER)
    out = np.power(a, b)
    if common in dt.FLOATING:
        # NumPy computes x ** 0.5 as sqrt(x) when the exponent is a broadcast scalar, which
        # gives NaN for -inf and -0.0 for -0.0; pow (C99, XLA) gives +inf and +0.0.
        fix = (b == 0.5) & ((a == -np.inf) | (a == 0))
        if np.any(fix):
            out = np.where(fix, np.abs(a), out)
    return out


def _binary(name, reference, infer, sample, doc, host_check=None):
    vjp = VJPS.get(name, NOT_DIFFERENTIABLE)
    register_op(
        OpDef(
            name=name,
            family=FAMILY,
            reference=reference,
            infer=infer,
            sample=sample,
            doc=doc,
            vjp=vjp,
            host_check=host_check,
        )
    )


_binary(
    "add", _in_dtype(None, np.add), _arith_infer(None), lambda s: s.elementwise(2, s.ALL), "x + y (logical or on bool)"
)
_binary(
    "subtract", _in_dtype(None, np.subtract), _arith_infer("subtract"), lambda s: s.elementwise(2, s.NUMERIC), "x - y"
)
_binary(
    "multiply",
    _in_dtype(None, np.multiply),
    _arith_infer(None),
    lambda s: s.elementwise(2, s.ALL),
    "x * y (logical and on bool)",
)
_binary(
    "divide",
    _divide_reference,
    _divide_infer,
    lambda s: s.elementwise(2, s.ALL),
    "true division x / y; int32/bool operands give float32, int64 float64",
)
_binary(
    "power",
    _power_reference,
    _arith_infer("power"),
    lambda s: s.power_sample(),
    "x ** y; integer x to a negative integer power is an error",
    _power_host_check,
)
_binary(
    "maximum",
    _in_dtype(None, np.maximum),
    _arith_infer(None),
    lambda s: s.elementwise(2, s.ALL),
    "elementwise max, NaN-propagating",
)
_binary(
    "minimum",
    _in_dtype(None, np.minimum),
    _arith_infer(None),
    lambda s: s.elementwise(2, s.ALL),
    "elementwise min, NaN-propagating",
)

for _name, _ufunc in [
    ("equal", np.equal),
    ("not_equal", np.not_equal),
    ("less", np.less),
    ("less_equal", np.less_equal),
    ("greater", np.greater),
    ("greater_equal", np.greater_equal),
]:
    _binary(
        _name,
        _in_dtype(None, _ufunc),
        _compare_infer,
        lambda s: s.elementwise(2, s.ALL),
        f"comparison ({_name}); IEEE semantics for NaN",
    )

_binary(
    "logical_and",
    np.logical_and,
    _logical_infer,
    lambda s: s.elementwise(2, s.ALL),
    "truth of x and y (nonzero is true)",
)
_binary(
    "logical_or", np.logical_or, _logical_infer, lambda s: s.elementwise(2, s.ALL), "truth of x or y (nonzero is true)"
)


# -- unary ----------------------------------------------------------------------------


def _same_infer(bool_meaning: str | None):
    def infer(x: Aval) -> Aval:
        if bool_meaning is not None:
            refuse_bool(x.dtype, bool_meaning)
        return x

    return infer


def float_result_dtype(dtype: np.dtype) -> np.dtype:
    """dtype of a float-valued unary function of ``dtype`` (NumPy: bool→float16, int→float)."""
    if dtype in dt.FLOATING:
        return dtype
    return dt.float16 if dtype == dt.bool_ else dt.true_divide_dtype(dtype)


def _float_infer(x: Aval) -> Aval:
    return Aval(x.shape, float_result_dtype(x.dtype))


def _float_reference(ufunc):
    def reference(x):
        return ufunc(x.astype(float_result_dtype(x.dtype), copy=False))

    return reference


def _rsqrt(x):
    x = x.astype(float_result_dtype(x.dtype), copy=False)
    return np.reciprocal(np.sqrt(x))


def _unary(name, reference, infer, sample, doc):
    vjp = VJPS.get(name, NOT_DIFFERENTIABLE)
    register_op(OpDef(name=name, family=FAMILY, reference=reference, infer=infer, sample=sample, doc=doc, vjp=vjp))


_unary("negative", np.negative, _same_infer("negative"), lambda s: s.elementwise(1, s.NUMERIC), "-x")
_unary("abs", np.abs, _same_infer(None), lambda s: s.elementwise(1, s.ALL), "|x|")
for _name, _ufunc in [
    ("exp", np.exp),
    ("log", np.log),
    ("sqrt", np.sqrt),
    ("tanh", np.tanh),
    ("sin", np.sin),
    ("cos", np.cos),
]:
    _unary(
        _name,
        _float_reference(_ufunc),
        _float_infer,
        lambda s, _n=_name: s.elementwise(1, s.ALL, ranges=s.unary_range(_n)),
        f"{_name}(x)",
    )
_unary("rsqrt", _rsqrt, _float_infer, lambda s: s.elementwise(1, s.ALL), "1 / sqrt(x)")
_unary(
    "logical_not",
    np.logical_not,
    lambda x: Aval(x.shape, dt.bool_),
    lambda s: s.elementwise(1, s.ALL),
    "not x (nonzero is true)",
)


# -- where, astype ----------------------------------------------------------------------


def _where_infer(cond: Aval, x: Aval, y: Aval) -> Aval:
    return Aval(broadcast_shapes(cond.shape, x.shape, y.shape), dt.promote(x.dtype, y.dtype))


def _where_reference(cond, x, y):
    common = dt.promote(x.dtype, y.dtype)
    return np.where(cond.astype(bool, copy=False), x.astype(common, copy=False), y.astype(common, copy=False))


register_op(
    OpDef(
        name="where",
        family=FAMILY,
        reference=_where_reference,
        infer=_where_infer,
        sample=lambda s: s.where_sample(),
        promote_inputs=(1, 2),
        vjp=VJPS["where"],
        doc="x where cond is true (nonzero), else y; the unselected branch never leaks NaN/inf",
    )
)


def _astype_canonicalize(avals, attrs):
    try:
        return {"dtype": dt.canonicalize(attrs["dtype"])}
    except KeyError:
        raise ShapeDtypeError("astype needs dtype=") from None


def _astype_infer(x: Aval, *, dtype) -> Aval:
    return Aval(x.shape, dtype)


def _astype_reference(x, *, dtype):
    if dtype == dt.bool_:
        return x != 0
    return x.astype(dtype)


def _astype_domain(x, *, dtype):
    """Float to integer is defined for finite values inside the target's range."""
    if not (np.dtype(x.dtype).kind == "f" or x.dtype == dt.bfloat16) or dtype not in dt.INTEGER or x.size == 0:
        return None
    wide = x.astype(np.float64)
    info = np.iinfo(dtype)
    if not np.isfinite(wide).all() or wide.min() <= info.min or wide.max() >= info.max:
        return f"float to {np.dtype(dtype).name} of NaN, inf or out-of-range values is undefined"
    return None


register_op(
    OpDef(
        name="astype",
        family=FAMILY,
        reference=_astype_reference,
        infer=_astype_infer,
        canonicalize=_astype_canonicalize,
        sample=lambda s: s.astype_sample(),
        vjp=VJPS["astype"],
        domain=_astype_domain,
        doc="cast to dtype; float→int truncates toward zero (NaN/inf/out of range: undefined, as in NumPy)",
    )
)
