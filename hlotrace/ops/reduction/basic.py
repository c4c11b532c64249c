"""sum, max, min and mean (semantics in :mod:`hlotrace.ops.reduction`), and the helpers the
family's other ops and lowering rules share."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes
from hlotrace.ops.reduction.samples import reduce_sample
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "reduction"


def _canonicalize(avals, attrs):
    """Store ``axis`` as a sorted tuple of non-negative ints and ``keepdims`` as a bool."""
    unknown = set(attrs) - {"axis", "keepdims"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (reductions take axis= and keepdims=)")
    keepdims = attrs.get("keepdims", False)
    if not isinstance(keepdims, bool | np.bool_):
        raise ShapeDtypeError(f"keepdims must be a bool, got {keepdims!r}")
    axis = attrs.get("axis")
    if isinstance(axis, np.integer):
        axis = int(axis)
    return {"axis": normalize_axes(axis, len(avals[0].shape)), "keepdims": bool(keepdims)}


def reduced_shape(shape, axis, keepdims) -> tuple[int, ...]:
    """``shape`` with the dims in ``axis`` dropped, or set to 1 when ``keepdims``."""
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def accumulation_dtype(op: str, dtype: np.dtype) -> np.dtype:
    """The dtype a reduction computes in (shared with the lowering rules)."""
    if op in ("max", "min"):
        return dtype
    if op == "sum" and dtype in (dt.bool_, dt.int32, dt.int64):
        return dt.int64 if dtype == dt.int64 else dt.int32
    return dt.float64 if dtype in (dt.float64, dt.int64) else dt.float32


def _result_dtype(op: str, dtype: np.dtype) -> np.dtype:
    if op in ("max", "min"):
        return dtype
    if dtype in dt.FLOATING:
        return dtype
    if op == "sum":
        return dt.int64 if dtype == dt.int64 else dt.int32
    return dt.true_divide_dtype(dtype)


def _infer(op: str):
    def infer(x: Aval, *, axis, keepdims) -> Aval:
        if op in ("max", "min"):
            empty = [a for a in axis if x.shape[a] == 0]
            if empty:
                raise ShapeDtypeError(
                    f"cannot take the {op}imum over axis {empty[0]} of length 0 (it has no identity; "
                    f"NumPy: zero-size array to reduction operation {op}imum which has no identity)"
                )
        return Aval(reduced_shape(x.shape, axis, keepdims), _result_dtype(op, x.dtype))

    return infer


def _sum_reference(x, *, axis, keepdims):
    if x.dtype in (dt.bool_, dt.int32):
        # int64 cannot overflow here; casting back to int32 wraps like int32 addition.
        return np.sum(x, axis=axis, dtype=np.int64, keepdims=keepdims)
    # int64 sums wrap in int64, as XLA's do; floats accumulate in accumulation_dtype.
    return np.sum(x.astype(accumulation_dtype("sum", x.dtype), copy=False), axis=axis, keepdims=keepdims)


def _mean_reference(x, *, axis, keepdims):
    acc = accumulation_dtype("mean", x.dtype)
    total = np.sum(x.astype(acc, copy=False), axis=axis, keepdims=keepdims)
    count = math.prod(x.shape[a] for a in axis)
    return total / acc.type(count)


def _spread(ct, x, axis, keepdims):
    """ct (the reduction's cotangent) broadcast back over the reduced dims of x."""
    if not keepdims:
        ct = F.reshape(ct, reduced_shape(x.shape, axis, True))
    return F.broadcast_to(ct, x.shape)


def _sum_vjp(ct, out, x, *, axis, keepdims):
    return (_spread(ct, x, axis, keepdims),)


def _mean_vjp(ct, out, x, *, axis, keepdims):
    count = math.prod(x.shape[a] for a in axis)
    return (F.divide(_spread(ct, x, axis, keepdims), float(count)),)


def _chooser_vjp(ct, out, x, *, axis, keepdims):
    # The elements equal to the max (min) share its cotangent evenly (JAX and PyTorch do the same).
    hit = F.equal(x, _spread(out, x, axis, keepdims))
    count = F.sum(F.astype(hit, ct.dtype), axis=axis, keepdims=keepdims)
    return (F.where(hit, _spread(F.divide(ct, count), x, axis, keepdims), 0.0),)


_VJPS = {"sum": _sum_vjp, "mean": _mean_vjp, "max": _chooser_vjp, "min": _chooser_vjp}

_REFERENCES = {
    "sum": (
        _sum_reference,
        "sum over axis; bool/int32 give int32, int64 int64 (wrapping); float16/bfloat16 accumulate in float32",
    ),
    "mean": (
        _mean_reference,
        "mean over axis, accumulated in float32 (float64 for float64/int64); bool/int32 give float32, "
        "int64 float64; empty gives NaN",
    ),
    "max": (np.max, "maximum over axis (any on bool); NaN propagates; empty axis is an error"),
    "min": (np.min, "minimum over axis (all on bool); NaN propagates; empty axis is an error"),
}

for _name, (_reference, _doc) in _REFERENCES.items():
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_reference,
            infer=_infer(_name),
            canonicalize=_canonicalize,
            sample=lambda s, _n=_name: reduce_sample(s, _n),
            vjp=_VJPS[_name],
            doc=_doc,
        )
    )
