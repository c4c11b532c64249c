"""pad: reference, inference, VJP and user function (semantics in :mod:`hlotrace.ops.layout`)."""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.creation.base import _scalar_kind, canonical_value
from hlotrace.ops.layout.base import FAMILY, PAD_MODES, _check_attrs, index_runs, pad_indices
from hlotrace.ops.layout.samples import pad_sample
from hlotrace.ops.registry import Aval, OpDef, get_op, register_op

__all__ = ["pad"]


# -- pad ------------------------------------------------------------------------------------


def _pad_width(pad_width, rank):
    try:
        widths = np.asarray(pad_width)
    except ValueError:
        widths = np.asarray(0.5)  # ragged: refused below
    if widths.size == 0 and rank == 0:
        return ()
    if widths.dtype.kind not in "iu" or widths.ndim > 2:
        raise ShapeDtypeError(f"pad_width must be an int, a pair or one pair per axis of ints, got {pad_width!r}")
    try:
        widths = np.broadcast_to(widths, (rank, 2))
    except ValueError:
        raise ShapeDtypeError(f"pad_width {pad_width!r} is not one (before, after) pair per axis ({rank})") from None
    if np.any(widths < 0):
        raise ShapeDtypeError(f"pad_width {pad_width!r} has a negative width")
    return tuple((int(b), int(a)) for b, a in widths)


def _pad_canonicalize(avals, attrs):
    _check_attrs("pad", attrs, ("pad_width", "mode", "value"), ("pad_width",))
    (x,) = avals
    widths = _pad_width(attrs["pad_width"], len(x.shape))
    mode, value = attrs.get("mode", "constant"), attrs.get("value")
    if mode not in PAD_MODES:
        raise ShapeDtypeError(f"mode must be one of {', '.join(map(repr, PAD_MODES))}, got {mode!r}")
    if mode == "constant":
        value = 0 if value is None else value
        _scalar_kind(value, "value")  # a Python number (tensors: use concat or where)
        value = canonical_value(value, x.dtype)
    else:
        if value is not None and value != 0:
            raise ShapeDtypeError(f"value= only applies to mode 'constant', not {mode!r}")
        value = None
        for axis, (d, (b, a)) in enumerate(zip(x.shape, widths, strict=True)):
            if d == 0 and b + a:
                raise ShapeDtypeError(f"cannot extend the empty axis {axis} with mode {mode!r}")
    return {"pad_width": widths, "mode": mode, "value": value}


def _pad_infer(x: Aval, *, pad_width, mode, value) -> Aval:
    return Aval(tuple(d + b + a for d, (b, a) in zip(x.shape, pad_width, strict=True)), x.dtype)


def _pad_reference(x, *, pad_width, mode, value):
    if not pad_width:
        return x  # a 0-d tensor (NumPy refuses the empty pad_width that describes it)
    if mode == "constant":
        return np.pad(x, pad_width, mode=mode, constant_values=np.asarray(value, x.dtype))
    return np.pad(x, pad_width, mode=mode)


def _take_transpose(ct, axis, indices, size):
    """The sum of ``ct``'s slices along ``axis`` into the positions ``indices`` copied."""
    lead, total = (slice(None),) * axis, None
    shape = (*ct.shape[:axis], size, *ct.shape[axis + 1 :])
    for start, source, length, step in index_runs(indices):
        piece = F.getitem(ct, (*lead, slice(start, start + length)))
        if step == -1:
            piece, source = F.flip(piece, axis), source - length + 1
        elif step == 0 and length > 1:
            piece = F.sum(piece, axis=axis, keepdims=True)
        placed = F.getitem_transpose(piece, shape, (*lead, slice(source, source + piece.shape[axis])))
        total = placed if total is None else F.add(total, placed)
    return total


def _pad_vjp(ct, out, x, *, pad_width, mode, value):
    if mode == "constant":
        return (F.getitem(ct, tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pad_width, strict=True))),)
    for axis, (d, (b, a)) in enumerate(zip(x.shape, pad_width, strict=True)):
        if b or a:
            ct = _take_transpose(ct, axis, pad_indices(d, b, a, mode), d)
    return (ct,)


register_op(
    OpDef(
        name="pad",
        family=FAMILY,
        reference=_pad_reference,
        infer=_pad_infer,
        canonicalize=_pad_canonicalize,
        sample=pad_sample,
        vjp=_pad_vjp,
        doc="np.pad with mode 'constant' (value), 'reflect' or 'edge'",
    )
)


def pad(x, pad_width, mode="constant", value=0):
    """``np.pad`` with mode "constant" (filled with ``value``), "reflect" or "edge"."""
    return apply(get_op("pad"), x, pad_width=pad_width, mode=mode, value=value)
