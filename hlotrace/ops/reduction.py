"""Reductions: sum, max, min, mean over ``axis`` (int, tuple or None = all), with ``keepdims``.
(any, all, prod, var, std and logsumexp live in :mod:`hlotrace.ops.statistics`, imported at
the end of this file so that they register with this family.)

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
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes
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


def _elements(s, op, dtype):
    if dtype in dt.FLOATING and op in ("sum", "mean"):
        # Exact partial sums (multiples of 1/16 up to 10): accumulation order (NumPy
        # pairwise vs XLA's tree) cannot change the result, so the default tolerance holds
        # and a mismatch is a bug. No boundary values: their sums would round.
        return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
    if dtype in dt.FLOATING:
        return s.values(dtype, special_rate=1 / 16)
    if dtype in dt.INTEGER and op == "mean":
        # Small enough to sum exactly in float32, even over a 4200-long axis.
        return s.values(dtype, -1000, 1000)
    # sum: the full integer range exercises wraparound; max/min: the extremes, their start values.
    return None


def _range_end(op, dtype):
    """The value at the end of ``dtype``'s range that max (min) starts from."""
    if dtype in dt.FLOATING:
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return int(info.min) if op == "max" else int(info.max)


def _sample(s, op):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        elements = _elements(s, op, dtype)
        rng = s.generator(draw)
        if rng.random() < 1 / 5:
            # A reduced slice of 4096+ elements: XLA:CPU reduces those on vectorized paths
            # (YNNPACK), where float max/min skip NaN unless the rule guards against it.
            length = int(rng.integers(4096, 4201))
            shape = (length,) if rng.random() < 0.5 else (int(rng.integers(1, 3)), length)
            axis = (None, -1, len(shape) - 1, tuple(range(len(shape))))[rng.integers(0, 4)]
            x = draw(s.long_arrays(dtype, shape, elements))
        else:
            shape = s.random_shape(rng)
            axis = draw(s.axis_choice(len(shape)))
            if op in ("max", "min"):
                # Empty max/min is an error (tested on its own); keep zero-size dims elsewhere.
                reduced = normalize_axes(axis, len(shape))
                shape = tuple(max(d, 1) if i in reduced else d for i, d in enumerate(shape))
            if op in ("max", "min") and dtype != dt.bool_ and rng.random() < 1 / 5:
                # Slices of nothing but the dtype's lowest (max) or highest (min) value: a
                # start value one step inside the range is wrong only there.
                extreme = _range_end(op, dtype)
                elements = s.values(dtype, boundary_rate=1.0, special_rate=0.0, edges=(extreme,))
            x = draw(s.arrays(dtype, shape, elements))
        return s.OpSample((x,), {"axis": axis, "keepdims": draw(s.st.booleans())})

    return sample()


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
            sample=lambda s, _n=_name: _sample(s, _n),
            vjp=_VJPS[_name],
            doc=_doc,
        )
    )


import hlotrace.ops.statistics  # noqa: E402, F401  (registers any, all, prod, var, logsumexp)
