"""tile and repeat: references, inference, VJPs and user functions (semantics in
:mod:`hlotrace.ops.layout`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis
from hlotrace.ops.layout.base import FAMILY, _check_attrs
from hlotrace.ops.layout.samples import repeat_sample, tile_sample
from hlotrace.ops.registry import Aval, OpDef, get_op, register_op
from hlotrace.ops.shape import _as_int as _int
from hlotrace.ops.shape import _int_tuple as _ints

__all__ = ["repeat", "tile"]


# -- tile, repeat ---------------------------------------------------------------------------


def _tile_canonicalize(avals, attrs):
    _check_attrs("tile", attrs, ("reps",), ("reps",))
    reps = _ints(attrs["reps"], "reps")
    if any(r < 0 for r in reps):
        raise ShapeDtypeError(f"reps {reps} has a negative count")
    return {"reps": (1,) * (len(avals[0].shape) - len(reps)) + reps}


def tile_operand_shape(shape, reps) -> tuple[int, ...]:
    """``shape`` with leading 1s up to the length of ``reps``."""
    return (1,) * (len(reps) - len(shape)) + tuple(shape)


def _tile_infer(x: Aval, *, reps) -> Aval:
    return Aval(tuple(d * r for d, r in zip(tile_operand_shape(x.shape, reps), reps, strict=True)), x.dtype)


def _tile_vjp(ct, out, x, *, reps):
    pairs = tuple(d for pair in zip(reps, tile_operand_shape(x.shape, reps), strict=True) for d in pair)
    if not pairs:
        return (ct,)
    return (F.reshape(F.sum(F.reshape(ct, pairs), axis=tuple(range(0, len(pairs), 2))), x.shape),)


register_op(
    OpDef(
        name="tile",
        family=FAMILY,
        reference=lambda x, *, reps: np.tile(x, reps),
        infer=_tile_infer,
        canonicalize=_tile_canonicalize,
        sample=tile_sample,
        vjp=_tile_vjp,
        doc="np.tile: the whole tensor repeated reps times per dim (leading dims added as needed)",
    )
)


def _repeat_canonicalize(avals, attrs):
    _check_attrs("repeat", attrs, ("repeats", "axis"), ("repeats",))
    shape, axis = avals[0].shape, attrs.get("axis")
    if axis is not None:
        axis = normalize_axis(_int(axis, "axis"), max(len(shape), 1))
        if not shape:
            axis = None  # a 0-d tensor repeats as the flattened (1,)
    size = math.prod(shape) if axis is None else shape[axis]
    raw = attrs["repeats"]
    counts = _ints(raw, "repeats")
    if any(c < 0 for c in counts):
        raise ShapeDtypeError(f"repeats {raw!r} has a negative count")
    if isinstance(raw, int | np.integer) or (len(set(counts)) == 1 and len(counts) in (1, size)):
        return {"repeats": counts[0], "axis": axis}
    if len(counts) != size:
        raise ShapeDtypeError(f"{len(counts)} repeat counts for an axis of {size} elements")
    return {"repeats": counts, "axis": axis}


def _repeat_infer(x: Aval, *, repeats, axis) -> Aval:
    shape = (math.prod(x.shape),) if axis is None else x.shape
    axis = axis or 0
    total = sum(repeats) if isinstance(repeats, tuple) else shape[axis] * repeats
    return Aval((*shape[:axis], total, *shape[axis + 1 :]), x.dtype)


def repeat_groups(counts) -> list[tuple[int, int, int]]:
    """``(start, stop, count)`` for each run of equal consecutive counts."""
    groups = []
    for i, c in enumerate(counts):
        if groups and groups[-1][2] == c:
            groups[-1] = (groups[-1][0], i + 1, c)
        else:
            groups.append((i, i + 1, c))
    return groups


def _repeat_vjp(ct, out, x, *, repeats, axis):
    shape = (math.prod(x.shape),) if axis is None else x.shape
    a = axis or 0
    lead, rest = shape[:a], shape[a + 1 :]
    pieces, start = [], 0
    counts = repeats if isinstance(repeats, tuple) else (repeats,) * shape[a]
    for first, stop, count in repeat_groups(counts):
        n = stop - first
        if count == 0:
            pieces.append(F.zeros((*lead, n, *rest), ct.dtype))
            continue
        piece = F.getitem(ct, (*(slice(None),) * a, slice(start, start + n * count)))
        pieces.append(F.sum(F.reshape(piece, (*lead, n, count, *rest)), axis=a + 1))
        start += n * count
    if not pieces:
        return (None,)
    grad = pieces[0] if len(pieces) == 1 else F.concat(pieces, axis=a)
    return (F.reshape(grad, x.shape),)


register_op(
    OpDef(
        name="repeat",
        family=FAMILY,
        reference=lambda x, *, repeats, axis: np.repeat(x, repeats, axis),
        infer=_repeat_infer,
        canonicalize=_repeat_canonicalize,
        sample=repeat_sample,
        vjp=_repeat_vjp,
        doc="np.repeat: each element repeated along axis (None: flattened); int or per-element counts",
    )
)


def tile(x, reps):
    """``np.tile``: ``x`` repeated ``reps`` times along each dim."""
    return apply(get_op("tile"), x, reps=reps)


def repeat(x, repeats, axis=None):
    """``np.repeat``: each element ``repeats`` times along ``axis`` (None: flattened)."""
    return apply(get_op("repeat"), x, repeats=repeats, axis=axis)
