"""Indexing ops: getitem, NumPy basic indexing (ints, slices, None, Ellipsis).

The raw Python index (slice objects, Ellipsis) is not JSON-friendly and its meaning depends
on the shape, so ``canonicalize`` resolves it into a tuple with one entry per input dim,
plus the inserted ones, each one of::

    ("int", i)                      0 <= i < dim
    ("slice", start, stop, step)    the NumPy slice with the same meaning
    ("newaxis",)

Slices come from ``slice.indices(dim)`` with two adjustments that keep each entry a valid
NumPy slice: an empty selection is ``("slice", 0, 0, 1)`` (a negative step can resolve to
start -1, which NumPy reads as "the last element"), and a negative step that runs through
index 0 has stop None for the same reason. Canonical indices are accepted again unchanged.
"""

from __future__ import annotations

import operator

import numpy as np

from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "indexing"

_ONLY_BASIC = (
    "only basic indexing is supported (ints, slices, None, Ellipsis), not advanced indexing "
    "with arrays, lists, bool masks or tensors; got {what}"
)


def slice_length(start: int, stop: int | None, step: int) -> int:
    """Number of elements a canonical slice selects."""
    return len(range(start, -1 if stop is None else stop, step))


def _describe(entry) -> str:
    kind = type(entry).__name__
    return f"{kind} {entry!r}" if isinstance(entry, int | float | str | np.generic) else f"an object of type {kind}"


def _index_int(entry) -> int | None:
    """``entry`` as an int index, or None if it is not one (bools are masks to NumPy)."""
    if isinstance(entry, int | np.integer) and not isinstance(entry, bool | np.bool_):
        return operator.index(entry)
    return None


def _slice_part(value, what: str) -> int | None:
    index = None if value is None else _index_int(value)
    if index is None and value is not None:
        raise ShapeDtypeError(f"slice {what} must be an int or None, got {value!r}")
    return index


_NOT_CANONICAL = object()


def _from_canonical(entry):
    """A canonical entry back as the NumPy index item it stands for, else _NOT_CANONICAL."""
    if not isinstance(entry, tuple) or not entry or not isinstance(entry[0], str):
        return _NOT_CANONICAL
    if entry[0] == "int" and len(entry) == 2:
        return entry[1]
    if entry[0] == "slice" and len(entry) == 4:
        return slice(*entry[1:])
    if entry[0] == "newaxis" and len(entry) == 1:
        return np.newaxis
    raise ShapeDtypeError(f"malformed canonical index entry {entry!r}")


def _parse(index) -> list:
    """The index as a list of ints, slices, None and Ellipsis, or a ShapeDtypeError."""
    entries = list(index) if isinstance(index, tuple) else [index]
    items = []
    for entry in entries:
        item = _from_canonical(entry)
        if item is _NOT_CANONICAL:
            item = entry
        if item is None or item is Ellipsis or isinstance(item, slice):
            items.append(item)
        elif _index_int(item) is not None:
            items.append(_index_int(item))
        else:
            raise ShapeDtypeError(_ONLY_BASIC.format(what=_describe(item)))
    return items


def _canonical_slice(item: slice, dim: int) -> tuple:
    start, stop, step = (
        _slice_part(item.start, "start"),
        _slice_part(item.stop, "stop"),
        _slice_part(item.step, "step"),
    )
    if step == 0:
        raise ShapeDtypeError("slice step cannot be zero")
    start, stop, step = slice(start, stop, step).indices(dim)
    if len(range(start, stop, step)) == 0:
        return ("slice", 0, 0, 1)
    return ("slice", start, None if stop < 0 else stop, step)


def _getitem_canonicalize(avals, attrs):
    (x,) = avals
    if "index" not in attrs:
        raise ShapeDtypeError("getitem needs index=")
    items = _parse(attrs["index"])
    ellipses = sum(item is Ellipsis for item in items)
    if ellipses > 1:
        raise ShapeDtypeError("an index can only have a single Ellipsis ('...')")
    consumed = sum(item is not None and item is not Ellipsis for item in items)
    rank = len(x.shape)
    if consumed > rank:
        raise ShapeDtypeError(f"too many indices: {consumed} for a tensor of rank {rank}")
    if not ellipses:
        items.append(Ellipsis)
    at = items.index(Ellipsis)
    items[at : at + 1] = [slice(None)] * (rank - consumed)

    canonical = []
    dims = iter(enumerate(x.shape))
    for item in items:
        if item is None:
            canonical.append(("newaxis",))
            continue
        axis, dim = next(dims)
        if isinstance(item, slice):
            canonical.append(_canonical_slice(item, dim))
        elif -dim <= item < dim:
            canonical.append(("int", item % dim))
        else:
            raise ShapeDtypeError(f"index {item} is out of bounds for axis {axis} with size {dim}")
    return {"index": tuple(canonical)}


def getitem_infer(x: Aval, *, index) -> Aval:
    shape = []
    for entry in index:
        if entry[0] == "newaxis":
            shape.append(1)
        elif entry[0] == "slice":
            shape.append(slice_length(*entry[1:]))
    return Aval(tuple(shape), x.dtype)


def _getitem_reference(x, *, index):
    return x[tuple(_from_canonical(entry) for entry in index)]


def _basic_index_item(s, draw, dim):
    """An int (in bounds, either sign) or a slice with bounds that may lie out of range."""
    if dim and draw(s.st.integers(0, 2)) == 0:
        return draw(s.st.integers(-dim, dim - 1))
    bound = s.st.one_of(s.st.none(), s.st.integers(-dim - 3, dim + 3))
    step = s.st.sampled_from([None, 1, 2, 3, -1, -2, -3])
    return slice(draw(bound), draw(bound), draw(step))


def getitem_sample(s):
    """A random valid basic index: ints, slices, None and at most one Ellipsis."""

    @s.st.composite
    def sample(draw):
        dtype, shape = draw(s.dtypes(s.ALL)), draw(s.shapes())
        rank = len(shape)
        ellipsis = draw(s.st.booleans())
        lead = draw(s.st.integers(0, rank))
        tail = draw(s.st.integers(0, rank - lead)) if ellipsis else 0
        items = [_basic_index_item(s, draw, d) for d in shape[:lead]]
        if ellipsis:
            items.append(Ellipsis)
        items += [_basic_index_item(s, draw, d) for d in shape[rank - tail :]]
        for _ in range(draw(s.st.integers(0, 2))):
            items.insert(draw(s.st.integers(0, len(items))), None)
        index = items[0] if len(items) == 1 and draw(s.st.booleans()) else tuple(items)
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"index": index})

    return sample()


register_op(
    OpDef(
        name="getitem",
        family=FAMILY,
        reference=_getitem_reference,
        infer=getitem_infer,
        canonicalize=_getitem_canonicalize,
        sample=getitem_sample,
        vjp=lambda ct, out, x, *, index: (F.getitem_transpose(ct, x.shape, index),),
        doc="basic indexing x[index]: ints, slices (any step), None, Ellipsis",
    )
)


# -- getitem_transpose: getitem's VJP ---------------------------------------------------


def _transpose_canonicalize(avals, attrs):
    (x,) = avals
    if "shape" not in attrs or "index" not in attrs:
        raise ShapeDtypeError("getitem_transpose needs shape= and index=")
    shape = tuple(operator.index(d) for d in attrs["shape"])
    if any(d < 0 for d in shape):
        raise ShapeDtypeError(f"shape {shape} has a negative dimension")
    index = _getitem_canonicalize((Aval(shape, x.dtype),), {"index": attrs["index"]})["index"]
    selected = getitem_infer(Aval(shape, x.dtype), index=index).shape
    if selected != x.shape:
        raise ShapeDtypeError(f"an input of shape {x.shape} cannot fill index {index} of shape {shape} ({selected})")
    return {"shape": shape, "index": index}


def _transpose_reference(x, *, shape, index):
    out = np.zeros(shape, x.dtype)
    out[tuple(_from_canonical(entry) for entry in index)] = x
    return out


def _transpose_sample(s):
    @s.st.composite
    def sample(draw):
        base = draw(getitem_sample(s))
        x, attrs = base.args[0], base.attrs
        index = _getitem_canonicalize((Aval(x.shape, x.dtype),), attrs)["index"]
        selected = getitem_infer(Aval(x.shape, x.dtype), index=index).shape
        ct = draw(s.arrays(x.dtype, selected))
        return s.OpSample((ct,), {"shape": x.shape, "index": index})

    return sample()


register_op(
    OpDef(
        name="getitem_transpose",
        family=FAMILY,
        reference=_transpose_reference,
        infer=lambda x, *, shape, index: Aval(shape, x.dtype),
        canonicalize=_transpose_canonicalize,
        sample=_transpose_sample,
        vjp=lambda ct, out, x, *, shape, index: (F.getitem(ct, index),),
        doc="getitem's transpose (its VJP): zeros of shape with x placed where x[index] reads",
    )
)
