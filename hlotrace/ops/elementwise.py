"""Elementwise ops: binary arithmetic, comparisons, logic, unary math, where, astype.

Semantics follow NumPy with hlotrace's dtype rules (:mod:`hlotrace.dtypes`): operands are
promoted to a common dtype and broadcast; the reference computes in the promoted dtype.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import broadcast_shapes, refuse_bool
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "elementwise"


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
    # True division: integer and bool operands give float32 (NumPy: float64).
    return out if out.dtype in dt.FLOATING else Aval(out.shape, dt.float32)


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
    out = out if out in dt.FLOATING else dt.float32
    return np.true_divide(a.astype(out, copy=False), b.astype(out, copy=False))


def _power_reference(a, b):
    common = dt.promote(a.dtype, b.dtype)
    a, b = a.astype(common, copy=False), b.astype(common, copy=False)
    if common == dt.int32 and np.any(b < 0):
        raise ValueError("integers to negative integer powers are not allowed (NumPy refuses them too)")
    return np.power(a, b)


def _binary(name, reference, infer, sample, doc):
    register_op(OpDef(name=name, family=FAMILY, reference=reference, infer=infer, sample=sample, doc=doc))


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
    "true division x / y; integer operands give float32",
)
_binary(
    "power",
    _power_reference,
    _arith_infer("power"),
    lambda s: s.power_sample(),
    "x ** y; integer x to a negative integer power is an error",
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
    return dt.float16 if dtype == dt.bool_ else dt.float32


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
    register_op(OpDef(name=name, family=FAMILY, reference=reference, infer=infer, sample=sample, doc=doc))


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


register_op(
    OpDef(
        name="astype",
        family=FAMILY,
        reference=_astype_reference,
        infer=_astype_infer,
        canonicalize=_astype_canonicalize,
        sample=lambda s: s.astype_sample(),
        doc="cast to dtype; float→int truncates toward zero (NaN/inf/out of range: undefined, as in NumPy)",
    )
)
