"""The composite layout functions (:mod:`hlotrace.ops.layout` re-exports them): stack, split,
moveaxis, swapaxes and flatten, built from transpose, reshape, expand_dims, concat and
getitem (recorded as those ops; no rule of their own). Semantics in :mod:`hlotrace.ops.layout`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from hlotrace.dispatch import describe_avals
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis
from hlotrace.ops.registry import Aval
from hlotrace.ops.shape import _as_int as _int
from hlotrace.ops.shape import _int_tuple as _ints
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor

__all__ = ["flatten", "moveaxis", "split", "stack", "swapaxes"]


def _tensor(x):
    return x if isinstance(x, Tensor) else tensor(x)


def _error(name, message, *tensors):
    loc = user_location(1)
    where = f" at {loc}" if loc else ""
    return OpError(f"{name}: {message} (inputs: {describe_avals([Aval(t.shape, t.dtype) for t in tensors])}){where}")


def _axis(name, axis, rank, *tensors):
    try:
        return normalize_axis(_int(axis, "axis"), rank)
    except ShapeDtypeError as exc:
        raise _error(name, str(exc), *tensors) from None


def stack(tensors, axis=0):
    """``np.stack``: tensors of one shape joined along a new ``axis`` (expand_dims + concat)."""
    tensors = [_tensor(t) for t in tensors]
    if not tensors:
        raise _error("stack", "needs at least one tensor")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise _error("stack", "all tensors must have the same shape", *tensors)
    axis = _axis("stack", axis, tensors[0].ndim + 1, *tensors)
    return F.concat([F.expand_dims(t, axis) for t in tensors], axis=axis)


def split(x, indices_or_sections, axis=0):
    """``np.split``: a list of slices of ``x`` along ``axis`` (getitems). An int ``n`` cuts
    ``n`` equal parts (it must divide the axis); a sequence gives the split points."""
    x = _tensor(x)
    axis = _axis("split", axis, x.ndim, x)
    size = x.shape[axis]
    if isinstance(indices_or_sections, int | np.integer) and not isinstance(indices_or_sections, bool):
        n = int(indices_or_sections)
        if n <= 0 or size % n:
            raise _error("split", f"{n} sections do not divide axis {axis} of size {size} equally", x)
        points = [size // n * i for i in range(1, n)]
    else:
        try:
            points = list(_ints(indices_or_sections, "split point"))
        except ShapeDtypeError as exc:
            raise _error("split", str(exc), x) from None
    bounds = [0, *points, size]
    return [F.getitem(x, (*(slice(None),) * axis, slice(a, b))) for a, b in itertools.pairwise(bounds)]


def moveaxis(x, source, destination):
    """``np.moveaxis``: dims ``source`` moved to positions ``destination`` (a transpose)."""
    x = _tensor(x)
    try:
        src, dst = ([normalize_axis(a, x.ndim) for a in _ints(v, "axis")] for v in (source, destination))
    except ShapeDtypeError as exc:
        raise _error("moveaxis", str(exc), x) from None
    if len(src) != len(dst):
        raise _error("moveaxis", f"source {source!r} and destination {destination!r} differ in length", x)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise _error("moveaxis", f"repeated axis in source {source!r} or destination {destination!r}", x)
    order = [d for d in range(x.ndim) if d not in src]
    for d, a in sorted(zip(dst, src, strict=True)):
        order.insert(d, a)
    return F.transpose(x, order)


def swapaxes(x, axis1, axis2):
    """``np.swapaxes``: dims ``axis1`` and ``axis2`` exchanged (a transpose)."""
    x = _tensor(x)
    a, b = _axis("swapaxes", axis1, x.ndim, x), _axis("swapaxes", axis2, x.ndim, x)
    perm = list(range(x.ndim))
    perm[a], perm[b] = b, a
    return F.transpose(x, perm)


def flatten(x, start_dim=0, end_dim=-1):
    """``torch.flatten``: dims ``start_dim..end_dim`` merged into one (a reshape); a 0-d
    tensor becomes shape (1,)."""
    x = _tensor(x)
    rank = max(x.ndim, 1)
    start, end = _axis("flatten", start_dim, rank, x), _axis("flatten", end_dim, rank, x)
    if start > end:
        raise _error("flatten", f"start_dim {start_dim} comes after end_dim {end_dim}", x)
    shape = x.shape or (1,)
    return F.reshape(x, (*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :]))
