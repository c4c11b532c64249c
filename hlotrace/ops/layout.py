"""Layout ops: flip, roll, pad, tile, repeat, tril, triu (primitives) and stack, split,
moveaxis, swapaxes, flatten (composites of transpose, reshape, expand_dims, concat and
getitem, recorded as those ops). ``eye`` and ``linspace`` (hlotrace/ops/creation.py) are
re-exported here (hlotrace.functional imports this file's ``__all__``). Every dtype is
admitted; results keep the input's dtype. Sample strategies: hlotrace/testing/layout_samples.py.
(One family's op table, over 450 lines on purpose: the semantics below are each op's spec.)

Semantics (NumPy's unless stated; each reference below is the definition the rules match):

- ``flip(x, axis=None)``: reverse the elements along ``axis`` (None: every axis; an int or
  a tuple, negative allowed, no repeats). Stored as a sorted tuple of non-negative axes.
- ``roll(x, shift, axis=None)``: ``np.roll``. ``axis=None`` rolls the flattened tensor;
  ``shift`` and ``axis`` may be ints or tuples that broadcast together, and shifts on a
  repeated axis add up. Any shift is admitted (negative, beyond the size). Stored reduced
  modulo the size: ``{"shift": int, "axis": None}`` or a tuple of non-zero shifts per
  sorted axis.
- ``pad(x, pad_width, mode="constant", value=0)``: ``np.pad`` with the modes "constant",
  "reflect" and "edge" (others are refused). ``pad_width``: an int, ``(n,)``,
  ``(before, after)`` or one pair per axis (NumPy's broadcasting), non-negative; stored as
  one ``(before, after)`` pair per axis. "reflect" mirrors without repeating the edge and,
  like NumPy, keeps reflecting when the pad is wider than the axis (a size-1 axis repeats
  its element); "reflect" and "edge" refuse to extend an empty axis (as NumPy). ``value``
  (constant mode only; another mode with a non-zero value is refused, where NumPy refuses
  any ``constant_values``): a Python scalar converted to the dtype as ``full`` converts it
  (NaN and -0.0 kept; ``value != 0`` for bool). **Difference:** for an integer dtype a
  non-integer value is refused; NumPy truncates it (``constant_values=2.7`` pads with 2).
- ``tile(x, reps)``: ``np.tile``; reps non-negative; ``x`` gets leading size-1 dims when
  reps is longer than its rank. Stored with one rep per result dim.
- ``repeat(x, repeats, axis=None)``: ``np.repeat``; ``axis=None`` repeats the flattened
  tensor (a 0-d tensor also with axis 0 or -1, as NumPy). ``repeats``: a non-negative int, or
  one count per element along the axis (a length-1 sequence counts for all). Stored as an
  int when all counts are equal.
- ``tril(x, k=0)`` / ``triu(x, k=0)``: keep ``x[..., i, j]`` where ``j - i <= k``
  (``>= k``), zero elsewhere; rank >= 2, batched over the leading dims. ``k`` is stored
  clipped to ``[-rows, cols]`` (the same result).

Composites (hlotrace/ops/layout_composites.py, no rule of their own): ``stack(tensors, axis=0)`` (``np.stack``: equal shapes,
dtypes promote), ``split(x, indices_or_sections, axis=0)`` (``np.split``: an int must divide
the axis, or a list of split points with Python slice semantics; returns a list),
``moveaxis(x, source, destination)``, ``swapaxes(x, axis1, axis2)`` (NumPy) and
``flatten(x, start_dim=0, end_dim=-1)`` (**PyTorch's** ``torch.flatten``: dims start..end
merge into one; a 0-d tensor becomes shape (1,)).

Gradients: flip of the cotangent; roll by the negated shift; pad "constant" slices the
cotangent (getitem); "reflect"/"edge" sum the cotangent of every output element into the
input element it copies (getitem, flip, sum and getitem_transpose per run of copied
elements, added up); tile and repeat reshape and sum; tril/triu apply themselves to the
cotangent.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes, normalize_axis
from hlotrace.ops.creation import _scalar_kind, canonical_value, eye, linspace
from hlotrace.ops.layout_composites import flatten, moveaxis, split, stack, swapaxes
from hlotrace.ops.registry import Aval, OpDef, get_op, register_op
from hlotrace.ops.shape import _as_int as _int
from hlotrace.ops.shape import _int_tuple as _ints

FAMILY = "layout"

__all__ = [
    "eye",
    "flatten",
    "flip",
    "linspace",
    "moveaxis",
    "pad",
    "repeat",
    "roll",
    "split",
    "stack",
    "swapaxes",
    "tile",
    "tril",
    "triu",
]

PAD_MODES = ("constant", "reflect", "edge")


def _check_attrs(op, attrs, allowed, required=()):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({op} takes {', '.join(allowed)})")
    for key in required:
        if key not in attrs:
            raise ShapeDtypeError(f"needs {key}=")


def index_runs(indices) -> list[tuple[int, int, int, int]]:
    """A static index sequence as runs ``(out_start, source, length, step)``: output
    positions ``out_start + t`` read ``source + t * step`` with step 1, -1 or 0."""
    runs, i, n = [], 0, len(indices)
    while i < n:
        j, step = i + 1, int(indices[i + 1] - indices[i]) if i + 1 < n else 1
        if step in (-1, 0, 1):
            while j < n and indices[j] - indices[j - 1] == step:
                j += 1
        else:
            step = 1
        runs.append((i, int(indices[i]), j - i, step))
        i = j
    return runs


def pad_indices(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input index each output position of a reflect/edge-padded axis copies."""
    i = np.arange(-before, size + after)
    if mode == "edge" or size == 1:
        return np.clip(i, 0, size - 1)
    period = 2 * size - 2
    j = np.mod(i, period)
    return np.where(j >= size, period - j, j)


def _same_aval(x: Aval, **attrs) -> Aval:
    return x


def _sample(name):
    """The op's sample strategy, from hlotrace/testing/layout_samples.py (tests only)."""

    def sample(s):
        return getattr(s.layout_samples, name)(s)

    return sample


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
        sample=_sample("flip_sample"),
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
        sample=_sample("roll_sample"),
        vjp=_roll_vjp,
        doc="np.roll: shift elements along axis (None: the flattened tensor), wrapping around",
    )
)


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
        sample=_sample("pad_sample"),
        vjp=_pad_vjp,
        doc="np.pad with mode 'constant' (value), 'reflect' or 'edge'",
    )
)


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
        sample=_sample("tile_sample"),
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
        sample=_sample("repeat_sample"),
        vjp=_repeat_vjp,
        doc="np.repeat: each element repeated along axis (None: flattened); int or per-element counts",
    )
)


# -- tril, triu -----------------------------------------------------------------------------


def _triangle_canonicalize(name):
    def canonicalize(avals, attrs):
        _check_attrs(name, attrs, ("k",))
        shape = avals[0].shape
        if len(shape) < 2:
            raise ShapeDtypeError(f"needs a tensor of rank >= 2 (a batch of matrices), got rank {len(shape)}")
        rows, cols = shape[-2:]
        return {"k": min(max(_int(attrs.get("k", 0), "k"), -rows), cols)}

    return canonicalize


for _name, _numpy, _doc in [
    ("tril", np.tril, "lower triangle: x[..., i, j] where j - i <= k, else 0"),
    ("triu", np.triu, "upper triangle: x[..., i, j] where j - i >= k, else 0"),
]:
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=lambda x, *, k, _f=_numpy: _f(x, k),
            infer=_same_aval,
            canonicalize=_triangle_canonicalize(_name),
            sample=_sample("triangle_sample"),
            vjp=lambda ct, out, x, *, k, _n=_name: (apply(get_op(_n), ct, k=k),),
            doc=_doc,
        )
    )


# -- public functions -------------------------------------------------------------------------


def flip(x, axis=None):
    """Reverse ``x`` along ``axis`` (None: every axis; an int or a tuple)."""
    return apply(get_op("flip"), x, axis=axis)


def roll(x, shift, axis=None):
    """``np.roll``: elements shifted by ``shift`` along ``axis`` (None: flattened), wrapping."""
    return apply(get_op("roll"), x, shift=shift, axis=axis)


def pad(x, pad_width, mode="constant", value=0):
    """``np.pad`` with mode "constant" (filled with ``value``), "reflect" or "edge"."""
    return apply(get_op("pad"), x, pad_width=pad_width, mode=mode, value=value)


def tile(x, reps):
    """``np.tile``: ``x`` repeated ``reps`` times along each dim."""
    return apply(get_op("tile"), x, reps=reps)


def repeat(x, repeats, axis=None):
    """``np.repeat``: each element ``repeats`` times along ``axis`` (None: flattened)."""
    return apply(get_op("repeat"), x, repeats=repeats, axis=axis)


def tril(x, k=0):
    """Lower triangle of the last two dims: ``x[..., i, j]`` where ``j - i <= k``, else 0."""
    return apply(get_op("tril"), x, k=k)


def triu(x, k=0):
    """Upper triangle of the last two dims: ``x[..., i, j]`` where ``j - i >= k``, else 0."""
    return apply(get_op("triu"), x, k=k)
