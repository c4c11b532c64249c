"""Integer-tensor indexing, writing side: masked_fill, setitem, index_copy (primitives), and
the dispatch behind ``Tensor.__getitem__`` / ``Tensor.__setitem__`` (the shared
index semantics are in :mod:`hlotrace.ops.gather`'s docstring).

Semantics (each op's reference below is the definition the lowering rules must match):

- ``masked_fill(x, mask, value)``: ``value`` where ``mask`` is true, else ``x`` (a NaN of
  ``x`` included); ``mask`` is bool and broadcasts to ``x``'s shape (not beyond it).
  ``value`` is a Python scalar stored in ``x``'s dtype: rounded for floats (1e10 in float16
  is inf; NaN and ±inf admitted), an int in range for integer tensors (a float value is
  refused rather than truncated), bool (or 0/1) for bool tensors. A tensor value: use
  ``where``. Every dtype. Its gradient is ``masked_fill(ct, mask, 0)``.
- ``setitem(x, value, index)``: ``x`` with ``x[index]`` replaced by ``value``, which
  broadcasts to the indexed shape (NumPy's rule, no extra leading dims) and is cast to
  ``x``'s dtype as ``astype`` does, except that a float value into an integer or bool tensor
  is refused (as ``Tensor`` in-place updates; NumPy and PyTorch truncate). ``index`` is a
  basic index (ints, slices with any step, None, Ellipsis: the ``setitem`` primitive, index
  canonicalized as getitem's), a single integer tensor/array/list at one position with only
  full slices (``:``) and at most one Ellipsis around it (``index_copy`` along that axis), or
  a leading bool mask with a Python scalar value (``masked_fill``). Anything else raises an
  OpError saying what is supported.
- ``index_copy(x, axis, index, source)``: ``x`` with the entries ``take(x, index, axis)``
  reads replaced by ``source`` broadcast to that shape and cast to ``x``'s dtype
  (``torch.index_copy`` generalized: ``index`` of any rank, ``source`` broadcasting).
  Where an index repeats, which write wins is unspecified in a compiled program (XLA's
  scatter order); eagerly the last one wins (NumPy). The gradient wrt ``source`` is
  ``take(ct, index)`` (a repeated index passes its cotangent to every write, as PyTorch's
  ``index_put`` backward). Every dtype.
- ``x[int_tensor]`` (also NumPy int arrays and lists of ints) is ``take`` along axis 0 (or
  the position it stands at, with ``:`` and ``...`` around it) and records: its shape does
  not depend on the values. ``x[bool_mask]`` (a mask of ``x``'s leading shape) works eagerly
  and under autodiff tapes (it becomes a ``take`` of the flattened leading dims at the
  mask's true positions) but raises a TraceError while recording: the result's shape would
  depend on the mask's values. A mask on the host selects there; a mask on the device (the
  device eager engine's results) is counted on the device, the count (4 bytes) read once --
  the one wait for the device, counted in ``hlotrace.metrics()["shape_syncs"]`` -- and the
  true positions found there (a stable argsort), so only the count crosses to the host.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import ENGINE, apply
from hlotrace.errors import ShapeDtypeError, TraceError
from hlotrace.metrics import COUNTS
from hlotrace.ops.common import F, broadcast_shapes
from hlotrace.ops.gather.common import (
    FAMILY,
    as_tensor,
    canonical_axis,
    cast_like_astype,
    check_attrs,
    check_index_dtype,
    host_index_check,
    op_error,
    take_shape,
    wrapped,
)
from hlotrace.ops.gather.samples import index_copy_sample, masked_fill_sample, setitem_sample
from hlotrace.ops.gather.take import take
from hlotrace.ops.indexing import _from_canonical, _getitem_canonicalize, getitem_infer
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.recording import current_recorder
from hlotrace.source import user_location
from hlotrace.tensor import HOOKS, Tensor, tensor

__all__ = ["index_copy", "masked_fill", "setitem"]


def check_cast(value: np.dtype, x: np.dtype, what: str = "value") -> None:
    if value in dt.FLOATING and x not in dt.FLOATING:
        raise ShapeDtypeError(
            f"a {value} {what} cannot be stored in a {x} tensor without an unsafe float-to-{x} cast "
            f"(cast it with astype first)"
        )


def _check_fits(value: Aval, target: tuple, what: str) -> None:
    try:
        fits = broadcast_shapes(value.shape, target) == tuple(target) and len(value.shape) <= len(target)
    except ShapeDtypeError:
        fits = False
    if not fits:
        raise ShapeDtypeError(f"{what} of shape {value.shape} does not broadcast to the indexed shape {tuple(target)}")


# -- masked_fill ------------------------------------------------------------------------------


def fill_value(value, dtype: np.dtype):
    """``value`` as a Python scalar of ``dtype``'s kind (see the module docstring)."""
    kind = dt.python_scalar_kind(value)
    if kind is None and dt.is_number(value):  # NumPy and ml_dtypes scalars
        kind = dt.number_kind(value)
        value = kind(value)
    if kind is None:
        raise ShapeDtypeError(f"value must be a Python scalar, got {type(value).__name__} (a tensor value: use where)")
    if dtype in dt.FLOATING:
        with np.errstate(over="ignore"):  # 1e10 in float16 is inf, as a weak scalar
            return float(np.asarray(value, dtype=dtype))
    if kind is float:
        raise ShapeDtypeError(f"value {value!r} cannot be stored in a {dtype} tensor without an unsafe cast")
    value = int(value)
    if dtype == dt.bool_:
        if value not in (0, 1):
            raise ShapeDtypeError(f"value {value!r} is not a bool (a bool tensor takes True/False or 0/1)")
        return bool(value)
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ShapeDtypeError(f"value {value} is out of range for {dtype}")
    return value


def _masked_fill_canonicalize(avals, attrs):
    check_attrs(attrs, ("value",), "masked_fill")
    return {"value": fill_value(attrs["value"], avals[0].dtype)}


def _masked_fill_infer(x: Aval, mask: Aval, *, value) -> Aval:
    if mask.dtype != dt.bool_:
        raise ShapeDtypeError(f"mask must be bool, got {mask.dtype} (compare first)")
    try:
        fits = broadcast_shapes(mask.shape, x.shape) == x.shape
    except ShapeDtypeError:
        fits = False
    if not fits:
        raise ShapeDtypeError(f"mask of shape {mask.shape} does not broadcast to x's shape {x.shape}")
    return x


def _masked_fill_reference(x, mask, *, value):
    return np.where(mask, np.asarray(value, x.dtype), x)


MASKED_FILL = register_op(
    OpDef(
        name="masked_fill",
        family=FAMILY,
        reference=_masked_fill_reference,
        infer=_masked_fill_infer,
        canonicalize=_masked_fill_canonicalize,
        sample=masked_fill_sample,
        vjp=lambda ct, out, x, mask, *, value: (masked_fill(ct, mask, 0), None),
        doc="value where the bool mask (broadcast to x) is true, else x; a Python scalar value",
    )
)


def masked_fill(x, mask, value):
    """``value`` (a Python scalar, in ``x``'s dtype) where ``mask`` is true, else ``x``;
    ``mask`` broadcasts to ``x``'s shape (PyTorch's ``masked_fill``)."""
    return apply(MASKED_FILL, as_tensor(x, "masked_fill"), as_tensor(mask, "masked_fill"), value=value)


# -- setitem (basic indices) ------------------------------------------------------------------


def _setitem_canonicalize(avals, attrs):
    check_attrs(attrs, ("index",), "setitem")
    return _getitem_canonicalize(avals[:1], attrs)


def _setitem_infer(x: Aval, value: Aval, *, index) -> Aval:
    check_cast(value.dtype, x.dtype)
    _check_fits(value, getitem_infer(x, index=index).shape, "value")
    return x


def _setitem_reference(x, value, *, index):
    out = x.copy()
    out[tuple(_from_canonical(entry) for entry in index)] = cast_like_astype(value, x.dtype)
    return out


SETITEM = register_op(
    OpDef(
        name="setitem",
        family=FAMILY,
        reference=_setitem_reference,
        infer=_setitem_infer,
        canonicalize=_setitem_canonicalize,
        promote_inputs=(0,),
        sample=setitem_sample,
        vjp=lambda ct, out, x, value, *, index: (setitem(ct, 0, index), F.getitem(ct, index)),
        doc="x with x[index] = value (basic index; value broadcast and cast to x's dtype)",
    )
)


# -- index_copy -------------------------------------------------------------------------------


def _index_copy_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis",), "index_copy")
    return {"axis": canonical_axis(attrs["axis"], len(avals[0].shape))}


def _index_copy_infer(x: Aval, index: Aval, source: Aval, *, axis) -> Aval:
    check_index_dtype(index, "index")
    check_cast(source.dtype, x.dtype, "source")
    _check_fits(source, take_shape(x.shape, index.shape, axis), "source")
    return x


def _index_copy_reference(x, index, source, *, axis):
    out = x.copy()
    out[(slice(None),) * axis + (wrapped(index, x.shape[axis], axis),)] = cast_like_astype(source, x.dtype)
    return out


INDEX_COPY = register_op(
    OpDef(
        name="index_copy",
        family=FAMILY,
        reference=_index_copy_reference,
        host_check=host_index_check,
        infer=_index_copy_infer,
        canonicalize=_index_copy_canonicalize,
        promote_inputs=(0,),
        sample=index_copy_sample,
        vjp=lambda ct, out, x, index, source, *, axis: (
            index_copy(ct, axis, index, 0),
            None,
            take(ct, index, axis=axis),
        ),
        doc="x with the entries take(x, index, axis) reads replaced by source (broadcast, cast)",
    )
)


def index_copy(x, axis, index, source):
    """``x`` with ``x[..., index, ...] = source`` along ``axis`` (``torch.index_copy``, with
    ``index`` of any rank and ``source`` broadcast to the indexed shape and cast to ``x``'s
    dtype). Which of repeated indices' writes wins is unspecified when compiled."""
    x, index = as_tensor(x, "index_copy"), as_tensor(index, "index_copy", index=True)
    return apply(INDEX_COPY, x, index, source, axis=axis)


# -- Tensor indexing dispatch -----------------------------------------------------------------

_SUPPORTED = (
    "only basic indexing is supported (ints, slices, None, Ellipsis), plus one integer "
    "tensor/array/list with only ':' and '...' around it (take / index_copy along that axis) "
    "and a leading bool mask (eager reads; writes of a Python scalar, i.e. masked_fill)"
)


_ADVANCED = (Tensor, np.ndarray, list)  # index entries that are not basic


def _is_advanced(entry) -> bool:
    return isinstance(entry, _ADVANCED)


def _advanced(x, index, what: str):
    """(kind, tensor, axis) for an index holding one advanced entry with only full slices
    and an Ellipsis around it; kind is "int" or "bool". Raises an OpError otherwise."""
    items = index if isinstance(index, tuple) else (index,)
    positions = [i for i, entry in enumerate(items) if _is_advanced(entry)]
    others = [e for i, e in enumerate(items) if i != positions[0]]
    plain = all(e is Ellipsis or (isinstance(e, slice) and e == slice(None)) for e in others)
    if len(positions) > 1 or not plain or sum(e is Ellipsis for e in others) > 1:
        kinds = ", ".join(type(e).__name__ for e in items)
        raise op_error(what, f"indexing with ({kinds}) is not implemented; {_SUPPORTED}", x)
    p = positions[0]
    entry = as_tensor(items[p], what, index=True)
    if entry.dtype == dt.bool_:
        if p != 0 or entry.ndim == 0:
            raise op_error(what, f"a bool mask must be the first index entry and not 0-d; {_SUPPORTED}", x, entry)
        if entry.shape != x.shape[: entry.ndim]:
            raise op_error(what, f"bool mask of shape {entry.shape} does not match x's leading dims", x, entry)
        return "bool", entry, 0
    if entry.dtype not in dt.INTEGER:
        raise op_error(what, f"index arrays must be integer or bool, got {entry.dtype}", x, entry)
    axis = p - len(items) if any(e is Ellipsis for e in items[:p]) else p
    if not -x.ndim <= axis < x.ndim or len(items) - 1 - sum(e is Ellipsis for e in items) >= x.ndim:
        raise op_error(what, f"too many indices for a tensor of rank {x.ndim}", x, entry)
    return "int", entry, axis


# Reads whose result's shape depends on tensor values: no static-shape executable computes
# them, so each names how every engine handles it (``hlotrace rules --matrix`` lists them).
VALUE_DEPENDENT_SHAPES = (
    {
        "expression": "x[bool_mask]",
        "numpy engine": "the mask's true positions on the host",
        "device engine": "counted on the device, one wait for the 4-byte count (metrics 'shape_syncs'), selected there",
        "compiled": "refused while recording (TraceError: use masked_fill / where, or integer indices)",
    },
)


def tensor_getitem(x, index):
    """``x[index]`` for Tensor.__getitem__: basic indexing (getitem), an integer index
    array (take), or a bool mask (eager and taped only; see the module docstring)."""
    items = index if isinstance(index, tuple) else (index,)
    if not any(_is_advanced(entry) for entry in items):
        return F.getitem(x, index)
    kind, entry, axis = _advanced(x, index, "getitem")
    if kind == "int":
        return take(x, entry, axis=axis)
    if current_recorder() is not None:
        loc = user_location(2)
        raise TraceError(
            "x[bool_mask] while recording: the result's shape would depend on the mask's values, which a "
            "compiled program cannot have. Keep the shape with masked_fill(x, mask, 0) or where(mask, x, 0), "
            "or index with integer indices" + (f" (at {loc})" if loc else "")
        )
    flat = x if entry.ndim == 1 else F.reshape(x, (int(np.prod(entry.shape)), *x.shape[entry.ndim :]))
    if entry._host is None and ENGINE[0] is not None:  # device engine: count, read 4 bytes, select
        COUNTS["shape_syncs"] += 1
        flat_mask = F.reshape(entry, (-1,))
        count = int(F.sum(F.astype(flat_mask, "int32")).numpy())
        trues_first = F.argsort(F.astype(flat_mask, "int32"), descending=True)  # stable: index order
        return take(flat, F.getitem(trues_first, (slice(0, count),)), axis=0)
    return take(flat, tensor(np.flatnonzero(entry.numpy()).astype(np.int64)), axis=0)


def setitem(x, value, index):
    """``x`` with ``x[index]`` replaced by ``value`` (a new tensor; ``Tensor.__setitem__``
    assigns it in place). Basic indices (setitem), one integer index array (index_copy
    along its axis), or a leading bool mask with a Python scalar value (masked_fill)."""
    x = as_tensor(x, "setitem")
    items = index if isinstance(index, tuple) else (index,)
    if not any(_is_advanced(entry) for entry in items):
        return apply(SETITEM, x, value, index=index)
    kind, entry, axis = _advanced(x, index, "setitem")
    if kind == "int":
        return apply(INDEX_COPY, x, entry, value, axis=axis)
    if dt.number_kind(value) is None:
        raise op_error(
            "setitem",
            f"x[bool_mask] = value takes a Python scalar value, got {type(value).__name__}; "
            "use where(mask, value, x) for tensor values",
            x,
            entry,
        )
    mask = entry if entry.ndim == x.ndim else F.reshape(entry, entry.shape + (1,) * (x.ndim - entry.ndim))
    return masked_fill(x, mask, value)


HOOKS.getitem = tensor_getitem  # Tensor calls it through this slot (hlotrace.tensor.HOOKS)
