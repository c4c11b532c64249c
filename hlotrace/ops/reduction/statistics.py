"""More reductions: any, all, prod, var, logsumexp (primitives) and std (a composite),
over ``axis`` (int, tuple or None = all) with ``keepdims``, like sum's (:mod:`hlotrace.ops.reduction`).

Semantics (each op's reference below is the definition the lowering rules must match):

- ``any``/``all``: bool results for every input dtype; an element counts as true when it
  is ``!= 0`` (NaN is true, -0.0 false), as NumPy. Over nothing: False / True.
- ``prod``: dtypes as hlotrace's ``sum``: bool and int32 give **int32** (NumPy: int64),
  int64 int64, integers wrap on overflow; floats keep their dtype, float16/bfloat16
  multiply in float32 and round once (NumPy multiplies in float16). Over nothing: 1.
- ``var(x, axis=None, ddof=0, keepdims=False)``: ``sum((x - mean)**2) / max(n - ddof, 0)``
  computed in two passes (the mean first, so large offsets do not cancel), in float32 for
  bool/int32/float16/bfloat16 (results: float32 for bool/int32, as ``mean``; NumPy:
  float64) and float64 for int64/float64. ``n - ddof <= 0`` gives inf (NaN where the
  squared deviations sum to 0, so over nothing NaN), as NumPy, without its warning.
  ``ddof`` is a non-negative int.
- ``std(x, axis=None, ddof=0, keepdims=False)``: the composite ``sqrt(var(...))`` (float16
  and bfloat16 results are therefore rounded twice). Its gradient is NaN where the spread
  is 0 (as PyTorch's and JAX's).
- ``logsumexp(x, axis=None, keepdims=False)``: ``m + log(sum(exp(x - m)))`` with ``m`` the
  slice's maximum (0 where that is not finite), in float32 for float16/bfloat16. A slice
  holding NaN gives NaN; one holding +inf (and no NaN) +inf; one of nothing but -inf, or
  an empty slice, -inf (scipy's ``logsumexp``; PyTorch gives NaN over nothing). Float
  tensors only.

VJPs: prod's is zero-safe without division (each element gets the product of the others,
from exclusive prefix and suffix products); var's is ``2 (x - mean) / (n - ddof)``;
logsumexp's is ``exp(x - out)`` (softmax), 0 over slices of nothing but -inf. any and all
are not differentiable.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes
from hlotrace.ops.reduction.basic import FAMILY, _spread, accumulation_dtype, reduced_shape
from hlotrace.ops.reduction.samples import statistics_sample
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, get_op, register_op

__all__ = ["all", "any", "logsumexp", "prod", "std", "var"]


def _canonicalize(name):
    allowed = ("axis", "ddof", "keepdims") if name == "var" else ("axis", "keepdims")

    def canonicalize(avals, attrs):
        unknown = set(attrs) - set(allowed)
        if unknown:
            raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({name} takes {', '.join(allowed)})")
        return _canonical(avals, attrs, name == "var")

    return canonicalize


def _canonical(avals, attrs, with_ddof):
    """``axis`` as a sorted tuple of non-negative ints, ``keepdims`` a bool (var: ``ddof``)."""
    keepdims = attrs.get("keepdims", False)
    if not isinstance(keepdims, bool | np.bool_):
        raise ShapeDtypeError(f"keepdims must be a bool, got {keepdims!r}")
    axis = attrs.get("axis")
    if isinstance(axis, np.integer):
        axis = int(axis)
    out = {"axis": normalize_axes(axis, len(avals[0].shape)), "keepdims": bool(keepdims)}
    if with_ddof:
        ddof = attrs.get("ddof", 0)
        if isinstance(ddof, bool | np.bool_) or not isinstance(ddof, int | np.integer) or ddof < 0:
            raise ShapeDtypeError(f"ddof must be a non-negative int, got {ddof!r}")
        out["ddof"] = int(ddof)
    return out


def result_dtype(name: str, dtype: np.dtype) -> np.dtype:
    if name in ("any", "all"):
        return dt.bool_
    if dtype in dt.FLOATING:
        return dtype
    if name == "prod":
        return dt.int64 if dtype == dt.int64 else dt.int32
    return dt.true_divide_dtype(dtype)  # var


def compute_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``name`` computes in (shared with the lowering rules)."""
    if name == "prod":
        return accumulation_dtype("sum", dtype)
    if name == "var":
        return accumulation_dtype("mean", dtype)
    return dt.promote_strong(dtype, dt.float32)  # logsumexp


def _infer(name):
    def infer(x: Aval, *, axis, keepdims, ddof=None) -> Aval:
        if name == "logsumexp" and x.dtype not in dt.FLOATING:
            raise ShapeDtypeError(f"defined for float tensors only, got {x.dtype}")
        return Aval(reduced_shape(x.shape, axis, keepdims), result_dtype(name, x.dtype))

    return infer


def _any_reference(x, *, axis, keepdims):
    return np.any(x != 0, axis=axis, keepdims=keepdims)


def _all_reference(x, *, axis, keepdims):
    return np.all(x != 0, axis=axis, keepdims=keepdims)


def _prod_reference(x, *, axis, keepdims):
    # Integers multiply in int64: its wraparound keeps the low 32 bits of int32 products.
    acc = np.int64 if x.dtype in (dt.bool_, dt.int32, dt.int64) else compute_dtype("prod", x.dtype)
    return np.prod(x.astype(acc), axis=axis, keepdims=keepdims)


def _var_reference(x, *, axis, ddof, keepdims):
    acc = compute_dtype("var", x.dtype)
    x = x.astype(acc)
    count = math.prod(x.shape[a] for a in axis)
    mean = np.sum(x, axis=axis, keepdims=True) / acc.type(count)
    deviation = x - mean
    total = np.sum(deviation * deviation, axis=axis, keepdims=keepdims)
    return total / acc.type(max(count - ddof, 0))


def _logsumexp_reference(x, *, axis, keepdims):
    x = x.astype(compute_dtype("logsumexp", x.dtype))
    peak = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, np.zeros((), x.dtype))
    total = np.sum(np.exp(x - peak), axis=axis, keepdims=True)
    out = np.log(total) + peak
    return out if keepdims else np.squeeze(out, axis=axis)


# -- VJPs -----------------------------------------------------------------------------------


def _prod_vjp(ct, out, x, *, axis, keepdims):
    if not axis:
        return (ct,)
    if 0 in x.shape:
        return (F.zeros_like(x),)
    # Reduced dims last and flattened into one of length m: (*kept, m).
    kept = [d for d in range(len(x.shape)) if d not in axis]
    perm = kept + list(axis)
    lead = tuple(x.shape[d] for d in kept)
    m = math.prod(x.shape[a] for a in axis)
    flat = F.reshape(F.transpose(x, perm), (*lead, m))
    last = len(lead)
    one = F.ones((*lead, 1), x.dtype)
    head = (slice(None),) * last
    # The product of the others = (product of those before) * (product of those after).
    before = F.concat([one, F.getitem(F.cumprod(flat, axis=last), (*head, slice(0, m - 1)))], axis=last)
    after = F.concat([F.getitem(F.cumprod(flat, axis=last, reverse=True), (*head, slice(1, m))), one], axis=last)
    g = F.multiply(F.multiply(before, after), F.reshape(ct, (*lead, 1)))
    g = F.reshape(g, tuple(x.shape[d] for d in perm))
    return (F.transpose(g, tuple(int(i) for i in np.argsort(perm))),)


def _var_vjp(ct, out, x, *, axis, ddof, keepdims):
    count = math.prod(x.shape[a] for a in axis)
    deviation = F.subtract(x, F.mean(x, axis=axis, keepdims=True))
    half_denominator = max(count - ddof, 0) / 2  # 0 gives inf/NaN, as var itself does
    return (F.divide(F.multiply(_spread(ct, x, axis, keepdims), deviation), float(half_denominator)),)


def _logsumexp_vjp(ct, out, x, *, axis, keepdims):
    # exp(x - out) is the softmax of the slice; over nothing but -inf, 0 (not exp(NaN)).
    out = F.where(F.equal(out, float("-inf")), 0.0, out)
    return (F.multiply(_spread(ct, x, axis, keepdims), F.exp(F.subtract(x, _spread(out, x, axis, keepdims)))),)


_OPS = {
    "any": (_any_reference, NOT_DIFFERENTIABLE, "whether any element along axis is != 0 (NaN counts); bool"),
    "all": (_all_reference, NOT_DIFFERENTIABLE, "whether every element along axis is != 0 (NaN counts); bool"),
    "prod": (
        _prod_reference,
        _prod_vjp,
        "product over axis; bool/int32 give int32, int64 int64 (wrapping); float16/bfloat16 in float32; empty: 1",
    ),
    "var": (
        _var_reference,
        _var_vjp,
        "variance sum((x - mean)**2) / (n - ddof), two-pass; dtypes as mean; n <= ddof gives inf/NaN",
    ),
    "logsumexp": (
        _logsumexp_reference,
        _logsumexp_vjp,
        "log(sum(exp(x))) over axis, max-shifted; NaN -> NaN, +inf -> inf, all -inf or empty -> -inf; floats",
    ),
}

for _name, (_reference, _vjp, _doc) in _OPS.items():
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_reference,
            infer=_infer(_name),
            canonicalize=_canonicalize(_name),
            sample=statistics_sample(_name),
            vjp=_vjp,
            doc=_doc,
        )
    )


def any(x, axis=None, keepdims=False):  # noqa: A001  (the op's name)
    """Whether any element along ``axis`` is non-zero (NaN counts); bool."""
    return apply(get_op("any"), x, axis=axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element along ``axis`` is non-zero (NaN counts); bool."""
    return apply(get_op("all"), x, axis=axis, keepdims=keepdims)


def prod(x, axis=None, keepdims=False):
    """Product over ``axis``; bool/int32 give int32, int64 int64; 1 over nothing."""
    return apply(get_op("prod"), x, axis=axis, keepdims=keepdims)


def var(x, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (two-pass; bool/int32
    give float32, int64 float64)."""
    return apply(get_op("var"), x, axis=axis, ddof=ddof, keepdims=keepdims)


def std(x, axis=None, ddof=0, keepdims=False):
    """Standard deviation: ``sqrt(var(x, axis, ddof, keepdims))`` (a composite)."""
    return F.sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims))


def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, stable (max-shifted); float tensors."""
    return apply(get_op("logsumexp"), x, axis=axis, keepdims=keepdims)
