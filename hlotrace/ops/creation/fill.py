"""zeros, ones, full and arange: references, inference and canonical attributes (semantics
in :mod:`hlotrace.ops.creation`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.creation.base import (
    FAMILY,
    INT32_MAX,
    _check_attrs,
    _no_inputs,
    _scalar_kind,
    canonical_shape,
    canonical_value,
)
from hlotrace.ops.creation.samples import arange_sample, fill_sample
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, register_op

# -- zeros, ones, full --------------------------------------------------------------------


def _fill_canonicalize(name, fixed=None):
    def canonicalize(avals, attrs):
        _no_inputs(avals)
        if fixed is None:
            _check_attrs(name, attrs, ("shape", "value", "dtype"), ("shape", "value"))
            value = attrs["value"]
            kind = _scalar_kind(value, "value")
            dtype = attrs.get("dtype")
            dtype = dt.promote(dt.Weak(kind)) if dtype is None else dt.canonicalize(dtype)
            return {"shape": canonical_shape(attrs["shape"]), "value": canonical_value(value, dtype), "dtype": dtype}
        _check_attrs(name, attrs, ("shape", "dtype"), ("shape",))
        dtype = attrs.get("dtype")
        return {
            "shape": canonical_shape(attrs["shape"]),
            "dtype": dt.float32 if dtype is None else dt.canonicalize(dtype),
        }

    return canonicalize


def _fill_infer(*avals, shape, dtype, value=None) -> Aval:
    return Aval(shape, dtype)


def _fill_reference(fixed):
    def reference(*, shape, dtype, value=None):
        return np.full(shape, fixed if value is None else value, dtype=dtype)

    return reference


for _name, _fixed, _doc in [
    ("zeros", 0, "a tensor of zeros of shape and dtype (default float32)"),
    ("ones", 1, "a tensor of ones of shape and dtype (default float32)"),
    ("full", None, "a tensor of shape filled with value, converted to dtype (default: value's own dtype)"),
]:
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_fill_reference(_fixed),
            infer=_fill_infer,
            canonicalize=_fill_canonicalize(_name, _fixed),
            sample=lambda s, _n=_name: fill_sample(s, _n),
            vjp=NOT_DIFFERENTIABLE,
            doc=_doc,
        )
    )


# -- arange -------------------------------------------------------------------------------


def arange_length(start, stop, step) -> int:
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        return max(0, -((start - stop) // step))  # ceil((stop - start) / step), exactly
    return max(0, math.ceil((stop - start) / step))


def _arange_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("arange", attrs, ("start", "stop", "step", "dtype"), ("start",))
    start, stop, step = attrs["start"], attrs.get("stop"), attrs.get("step", 1)
    if stop is None:
        start, stop = 0, start
    kinds = [_scalar_kind(v, k) for k, v in (("start", start), ("stop", stop), ("step", step))]
    if bool in kinds:
        raise ShapeDtypeError("start, stop and step must be numbers, not bools")
    dtype = attrs.get("dtype")
    dtype = dt.promote(*(dt.Weak(k) for k in kinds)) if dtype is None else dt.canonicalize(dtype)
    if dtype == dt.bool_:
        raise ShapeDtypeError("cannot produce bool tensors")
    if dtype in dt.INTEGER:
        if float in kinds:
            raise ShapeDtypeError(f"an integer dtype needs int start, stop and step, got {start!r}, {stop!r}, {step!r}")
        start, stop, step = int(start), int(stop), int(step)
    else:
        start, stop, step = float(start), float(stop), float(step)
        if not all(np.isfinite(v) for v in (start, stop, step)):
            raise ShapeDtypeError(f"needs finite start, stop and step, got {start!r}, {stop!r}, {step!r}")
    if step == 0:
        raise ShapeDtypeError("step must not be zero")
    length = arange_length(start, stop, step)
    if length > INT32_MAX:
        raise ShapeDtypeError(f"{length} elements are too many")
    if dtype in dt.INTEGER and length:
        last, info = start + (length - 1) * step, np.iinfo(dtype)
        if not (info.min <= start <= info.max and info.min <= last <= info.max):
            raise ShapeDtypeError(f"values from {start} to {last} do not fit in {dtype}")
    return {"start": start, "stop": stop, "step": step, "dtype": dtype}


def _arange_infer(*avals, start, stop, step, dtype) -> Aval:
    return Aval((arange_length(start, stop, step),), dtype)


def _arange_reference(*, start, stop, step, dtype):
    n = arange_length(start, stop, step)
    if dtype in dt.INTEGER:
        # In int64, which wraps like the rule's arithmetic; the values themselves fit.
        with np.errstate(over="ignore"):
            wrapped = (step + 2**63) % 2**64 - 2**63
            return (start + np.arange(n, dtype=np.int64) * np.int64(wrapped)).astype(dtype)
    wide = compute_dtype(dtype)
    first, delta = (np.float64(wide.type(v)) for v in (start, step))
    return (first + np.arange(n, dtype=np.float64) * delta).astype(dtype)


register_op(
    OpDef(
        name="arange",
        family=FAMILY,
        reference=_arange_reference,
        infer=_arange_infer,
        canonicalize=_arange_canonicalize,
        sample=arange_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="NumPy arange(start, stop, step); int32 when all arguments are ints, else float32",
    )
)
