"""flip and roll: references, inference, VJPs and user functions (semantics in
:mod:`hlotrace.ops.layout`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes, normalize_axis
from hlotrace.ops.layout.base import FAMILY, _check_attrs, _same_aval
from hlotrace.ops.layout.samples import flip_sample, roll_sample
from hlotrace.ops.registry import OpDef, get_op, register_op
from hlotrace.ops.shape import _int_tuple as _ints

__all__ = ["flip", "roll"]


# -- flip -----------------------------------------------------------------------------------


def _flip_canonicalize(avals, attrs):
    _check_attrs("flip", attrs, ("axis",))
    axis = attrs.get("axis")
    return {"axis": normalize_axes(None if axis is None else _ints(axis, "axis"), len(avals[0].shape))}


register_op(
    OpDef(
        name="flip",
        family=FAMILY,
        reference=lambda x, *, axis: x[
            tuple(slice(None, None, -1) if d in axis else slice(None) for d in range(x.ndim))
        ],
        infer=_same_aval,
        canonicalize=_flip_canonicalize,
        sample=flip_sample,
        vjp=lambda ct, out, x, *, axis: (F.flip(ct, axis),),
        doc="reverse the elements along axis (None: all axes)",
    )
)


# -- roll -----------------------------------------------------------------------------------


def _roll_canonicalize(avals, attrs):
    _check_attrs("roll", attrs, ("shift", "axis"), ("shift",))
    shape = avals[0].shape
    shifts, axis = _ints(attrs["shift"], "shift"), attrs.get("axis")
    if axis is None:
        size = math.prod(shape)
        return {"shift": sum(shifts) % size if size else 0, "axis": None}
    axes = _ints(axis, "axis")
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ShapeDtypeError(f"shift {attrs['shift']!r} and axis {axis!r} do not broadcast together")
    if len(shifts) == 1:
        shifts *= len(axes)
    if len(axes) == 1:
        axes *= len(shifts)
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes, strict=True):
        a = normalize_axis(a, len(shape))
        total[a] = total.get(a, 0) + s
    kept = [(a, total[a] % shape[a]) for a in sorted(total) if shape[a] and total[a] % shape[a]]
    return {"shift": tuple(s for _, s in kept), "axis": tuple(a for a, _ in kept)}


def _roll_reference(x, *, shift, axis):
    return x.copy() if axis == () else np.roll(x, shift, axis)


def _roll_vjp(ct, out, x, *, shift, axis):
    back = -shift if axis is None else tuple(-s for s in shift)
    return (F.roll(ct, back, axis),)


register_op(
    OpDef(
        name="roll",
        family=FAMILY,
        reference=_roll_reference,
        infer=_same_aval,
        canonicalize=_roll_canonicalize,
        sample=roll_sample,
        vjp=_roll_vjp,
        doc="np.roll: shift elements along axis (None: the flattened tensor), wrapping around",
    )
)


def flip(x, axis=None):
    """Reverse ``x`` along ``axis`` (None: every axis; an int or a tuple)."""
    return apply(get_op("flip"), x, axis=axis)


def roll(x, shift, axis=None):
    """``np.roll``: elements shifted by ``shift`` along ``axis`` (None: flattened), wrapping."""
    return apply(get_op("roll"), x, shift=shift, axis=axis)
