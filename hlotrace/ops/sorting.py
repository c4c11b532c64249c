"""Sorting and selection: argmax, argmin, sort, argsort, sort_by_key (primitives) and topk
(a composite of sort, argsort and getitem).

Semantics (each op's reference below is the definition the lowering rules must match):

- The order is NumPy's: ``-0.0`` and ``0.0`` are equal (the sort is stable, so which comes
  first is their order in the input), NaN is larger than every number (``+inf`` included)
  and NaNs are equal to each other. bool sorts False before True; every dtype is admitted.
- ``argmax(x, axis=None, keepdims=False)``, ``argmin``: the index of the first maximum
  (minimum) along ``axis``; a NaN counts as the extreme for both (NumPy: the first NaN's
  index). ``axis=None`` indexes the flattened tensor (``keepdims`` then gives all-1 dims,
  as NumPy). Indices are **always int64** (NumPy's and PyTorch's index dtype), whatever the
  input dtype. An empty axis (or an empty tensor with ``axis=None``) is an error.
- ``sort(x, axis=-1, descending=False)``: stable. Ascending puts NaN last (NumPy);
  descending is the exact reverse order with ties kept in index order, so NaN comes
  **first** (as ``torch.sort(descending=True)``; NumPy has no descending sort, and
  ``np.sort(x)[::-1]`` would also reverse the order of ties). Rank >= 1.
- ``argsort(x, axis=-1, descending=False)``: the permutation ``sort`` applies, int64, stable
  in both directions (ties keep index order, also descending; NumPy's default ``argsort`` is
  not stable, ``kind="stable"`` is).
- ``sort_by_key(v, key, axis=-1, descending=False, inverse=False)``: ``v`` permuted along
  ``axis`` as ``sort`` permutes ``key`` (``take_along_axis(v, argsort(key))``); with
  ``inverse=True`` the inverse permutation (``v[..., j]`` goes to where ``key``'s j-th
  smallest element came from). ``v`` and ``key`` have one shape (no broadcasting). It is
  sort's VJP (``inverse=True``) and its own VJP's (``inverse`` flipped).
- ``topk(x, k, axis=-1, descending=True)`` -> ``(values, indices)``: the first ``k`` entries
  of ``sort``/``argsort`` (largest first by default, NaN counting as the largest, as
  ``torch.topk``); ties: the lower index first. ``0 <= k <= x.shape[axis]``. A composite:
  recorded as sort, argsort and two getitems.

Gradients: sort sends each cotangent back to the element it came from (``sort_by_key`` with
``inverse=True``); argmax, argmin and argsort are not differentiable (int64 results).
"""

from __future__ import annotations

import operator

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply, describe_avals
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, get_op, register_op
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor

FAMILY = "sorting"

INDEX_DTYPE = dt.int64  # argmax/argmin/argsort/topk indices, for every input dtype

# The primary dtypes each op's property test is split by (every dtype is admitted). The
# comparators depend only on the dtype's kind (bool, signed integer, float), so each
# kind is tested, with the 64-bit and half-precision ones spread over the ops, to keep
# the generated tests' time down.
SAMPLE_DTYPES = {
    "argmax": (dt.bool_, dt.int32, dt.int64, dt.float16, dt.float32),
    "argmin": (dt.bool_, dt.int32, dt.int64, dt.float16, dt.float32),
    "sort": (dt.int32, dt.float16, dt.float32, dt.float64),
    "argsort": (dt.bool_, dt.int32, dt.int64, dt.bfloat16, dt.float32),
    "sort_by_key": (dt.float32,),  # the values' dtype; the keys' is drawn from every dtype
}

__all__ = ["argmax", "argmin", "argsort", "sort", "sort_by_key", "topk"]


def _check_attrs(attrs, allowed, op):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({op} takes {', '.join(allowed)})")


def _as_bool(value, what):
    if not isinstance(value, bool | np.bool_):
        raise ShapeDtypeError(f"{what} must be a bool, got {value!r}")
    return bool(value)


def _as_axis(value, rank):
    if isinstance(value, np.integer):
        value = int(value)
    return normalize_axis(value, rank)


# -- argmax / argmin ----------------------------------------------------------------------


def _arg_canonicalize(avals, attrs):
    _check_attrs(attrs, ("axis", "keepdims"), "argmax/argmin")
    axis = attrs.get("axis")
    rank = len(avals[0].shape)
    return {
        "axis": None if axis is None else _as_axis(axis, rank),
        "keepdims": _as_bool(attrs.get("keepdims", False), "keepdims"),
    }


def _arg_infer(name):
    def infer(x: Aval, *, axis, keepdims) -> Aval:
        if axis is None:
            if 0 in x.shape:
                raise ShapeDtypeError(f"attempt to get {name} of an empty tensor (axis=None)")
            return Aval((1,) * len(x.shape) if keepdims else (), INDEX_DTYPE)
        if x.shape[axis] == 0:
            raise ShapeDtypeError(f"attempt to get {name} of an empty sequence (axis {axis} has length 0)")
        shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape))
        return Aval(shape if keepdims else shape[:axis] + shape[axis + 1 :], INDEX_DTYPE)

    return infer


def _arg_reference(name):
    function = np.argmax if name == "argmax" else np.argmin

    def reference(x, *, axis, keepdims):
        if x.dtype in dt.FLOATING:
            x = x.astype(np.float64)  # exact; NumPy's float64 loops find the first NaN
        return function(x, axis=axis, keepdims=keepdims)

    return reference


def _tied_array(s, rng, dtype, shape):
    """An array of ``shape`` made of 2-4 values (NaN and both zeros often among them)."""
    pool = s.values(dtype).draw(rng, int(rng.integers(2, 5)))
    if dtype in dt.FLOATING and rng.random() < 1 / 2:
        pool = np.concatenate([pool, np.array([-0.0, 0.0, np.nan])[: int(rng.integers(1, 4))].astype(pool.dtype)])
    return pool[rng.integers(0, len(pool), int(np.prod(shape)))].reshape(shape).astype(dtype)


def _long_shape(rng):
    """A shape whose last axis has 4096+ elements (XLA:CPU's vectorized paths)."""
    length = int(rng.integers(4096, 4201))
    return (length,) if rng.random() < 0.5 else (int(rng.integers(1, 3)), length)


def _operand(s, draw, rng, dtype, shape, ties=1 / 3):
    """Mostly a general array, at rate ``ties`` one of few (tied) values."""
    if rng.random() < ties:
        return _tied_array(s, rng, dtype, shape)
    return draw(s.arrays(dtype, shape))


def _arg_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(SAMPLE_DTYPES[name]))
        rng = s.generator(draw)
        if rng.random() < 1 / 8:
            shape = _long_shape(rng)
            x = draw(s.long_arrays(dtype, shape))
            axis = (None, -1, len(shape) - 1)[rng.integers(0, 3)]
        else:
            shape = s.random_shape(rng)
            axis = None if not shape or rng.random() < 1 / 4 else int(rng.integers(-len(shape), len(shape)))
            if axis is None:
                shape = tuple(max(d, 1) for d in shape)  # empty is an error (tested on its own)
            else:
                shape = tuple(max(d, 1) if i == axis % len(shape) else d for i, d in enumerate(shape))
            x = _operand(s, draw, rng, dtype, shape)
            if dtype != dt.bool_ and rng.random() < 1 / 5:
                # Slices of nothing but the value every element must beat (argmax: the
                # lowest, argmin: the highest): a start value inside the range shows there.
                if dtype in dt.FLOATING:
                    end = -np.inf if name == "argmax" else np.inf
                else:
                    end = np.iinfo(dtype).min if name == "argmax" else np.iinfo(dtype).max
                x = np.where(rng.random(shape) < 0.8, np.asarray(end, dtype), x).astype(dtype)
        return s.OpSample((x,), {"axis": axis, "keepdims": bool(rng.random() < 0.5)})

    return sample()


for _name, _extreme in (("argmax", "maximum"), ("argmin", "minimum")):
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_arg_reference(_name),
            infer=_arg_infer(_name),
            canonicalize=_arg_canonicalize,
            sample=lambda s, _n=_name: _arg_sample(s, _n),
            vjp=NOT_DIFFERENTIABLE,
            doc=f"int64 index of the first {_extreme} along axis (None: flattened); NaN counts as the {_extreme}",
        )
    )


def argmax(x, axis=None, keepdims=False):
    """Index (int64) of the first maximum along ``axis`` (None: of the flattened tensor);
    NaN counts as the maximum. An empty axis is an error."""
    return apply(get_op("argmax"), x, axis=axis, keepdims=keepdims)


def argmin(x, axis=None, keepdims=False):
    """Index (int64) of the first minimum along ``axis`` (None: of the flattened tensor);
    NaN counts as the minimum (NumPy). An empty axis is an error."""
    return apply(get_op("argmin"), x, axis=axis, keepdims=keepdims)


# -- sort / argsort / sort_by_key -----------------------------------------------------------


def sort_order(key: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """The stable sort permutation of ``key`` along ``axis`` (NumPy's order: NaN largest,
    -0.0 == 0.0; ``descending`` reverses the order but keeps ties in index order)."""
    k = np.moveaxis(key, axis, -1)
    if k.dtype in dt.FLOATING:
        wide = k.astype(np.float64)
        nan = np.isnan(wide)
        wide = np.where(nan, 0.0, wide)
        # lexsort is stable; its last key is the primary one (False sorts first).
        order = np.lexsort((-wide, ~nan) if descending else (wide, nan), axis=-1)
    else:
        # ~ reverses the order of integers (-x - 1, no overflow) and of bools (not).
        order = np.argsort(~k if descending else k, axis=-1, kind="stable")
    return np.moveaxis(order, -1, axis)


def _sort_canonicalize(avals, attrs, allowed=("axis", "descending")):
    _check_attrs(attrs, allowed, "sort")
    rank = len(avals[0].shape)
    if rank == 0:
        raise ShapeDtypeError("needs a tensor of rank >= 1 (it sorts along an axis)")
    out = {
        "axis": _as_axis(attrs.get("axis", -1), rank),
        "descending": _as_bool(attrs.get("descending", False), "descending"),
    }
    if "inverse" in allowed:
        out["inverse"] = _as_bool(attrs.get("inverse", False), "inverse")
    return out


def _sort_reference(x, *, axis, descending):
    return np.take_along_axis(x, sort_order(x, axis, descending), axis)


def _argsort_reference(x, *, axis, descending):
    return sort_order(x, axis, descending).astype(INDEX_DTYPE)


def _sort_by_key_reference(v, key, *, axis, descending, inverse):
    order = sort_order(key, axis, descending)
    if not inverse:
        return np.take_along_axis(v, order, axis)
    out = np.empty_like(v)
    np.put_along_axis(out, order, v, axis)
    return out


def _sort_by_key_infer(v: Aval, key: Aval, **attrs) -> Aval:
    if v.shape != key.shape:
        raise ShapeDtypeError(f"values of shape {v.shape} and keys of shape {key.shape} differ (no broadcasting)")
    return v


def _sort_attrs(rng, rank, long):
    axis = (-1 if rng.random() < 0.5 else rank - 1) if long else int(rng.integers(-rank, rank))
    return {"axis": axis, "descending": bool(rng.random() < 0.5)}


def _sort_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(SAMPLE_DTYPES[name]))
        rng = s.generator(draw)
        long = rng.random() < 1 / 10
        if long:
            shape = _long_shape(rng)
            x = draw(s.long_arrays(dtype, shape))
        else:
            shape = s.random_shape(rng)
            if not shape:
                shape = (int(rng.integers(1, 6)),)
            # Ties decide argsort's result; for sort's float values they are where the
            # gradient check's finite differences meet kinks (fewer of those).
            ties = 1 / 8 if name == "sort" and dtype in dt.FLOATING else 1 / 2
            x = _operand(s, draw, rng, dtype, shape, ties)
        return s.OpSample((x,), _sort_attrs(rng, len(shape), long))

    return sample()


def _sort_by_key_sample(s):
    @s.st.composite
    def sample(draw):
        # The values' dtype only rides along; the keys' dtype decides the comparator.
        dtype = draw(s.dtypes(SAMPLE_DTYPES["sort_by_key"]))
        key_dtype = draw(s.st.sampled_from(s.ALL))
        rng = s.generator(draw)
        long = rng.random() < 1 / 10
        shape = _long_shape(rng) if long else s.random_shape(rng)
        if not shape:
            shape = (int(rng.integers(1, 6)),)
        # Mostly tied keys: where an unstable or wrongly inverted permutation shows.
        key = draw(s.long_arrays(key_dtype, shape)) if long else _tied_array(s, rng, key_dtype, shape)
        if not long and rng.random() < 1 / 4:
            key = draw(s.arrays(key_dtype, shape))
        v = draw(s.arrays(dtype, shape, s.values(dtype, special_rate=1 / 32)))
        attrs = _sort_attrs(rng, len(shape), long)
        attrs["inverse"] = bool(rng.random() < 0.5)
        return s.OpSample((v, key), attrs)

    return sample()


def _sort_vjp(ct, out, x, *, axis, descending):
    return (F.sort_by_key(ct, x, axis=axis, descending=descending, inverse=True),)


def _sort_by_key_vjp(ct, out, v, key, *, axis, descending, inverse):
    return (F.sort_by_key(ct, key, axis=axis, descending=descending, inverse=not inverse), None)


register_op(
    OpDef(
        name="sort",
        family=FAMILY,
        reference=_sort_reference,
        infer=lambda x, **attrs: x,
        canonicalize=_sort_canonicalize,
        sample=lambda s: _sort_sample(s, "sort"),
        vjp=_sort_vjp,
        doc="stable sort along axis; NaN last (first when descending), -0.0 == 0.0 keep their order",
    )
)

register_op(
    OpDef(
        name="argsort",
        family=FAMILY,
        reference=_argsort_reference,
        infer=lambda x, **attrs: Aval(x.shape, INDEX_DTYPE),
        canonicalize=_sort_canonicalize,
        sample=lambda s: _sort_sample(s, "argsort"),
        vjp=NOT_DIFFERENTIABLE,
        doc="int64 stable sort permutation along axis (ties in index order, descending too)",
    )
)

register_op(
    OpDef(
        name="sort_by_key",
        family=FAMILY,
        reference=_sort_by_key_reference,
        infer=_sort_by_key_infer,
        canonicalize=lambda avals, attrs: _sort_canonicalize(avals, attrs, ("axis", "descending", "inverse")),
        sample=_sort_by_key_sample,
        vjp=_sort_by_key_vjp,
        doc="v permuted as a stable sort permutes key (inverse: the inverse permutation); sort's VJP",
    )
)


def sort(x, axis=-1, descending=False):
    """Stable sort along ``axis``: NaN last ascending, first descending; -0.0 and 0.0 are
    equal (they keep their order)."""
    return apply(get_op("sort"), x, axis=axis, descending=descending)


def argsort(x, axis=-1, descending=False):
    """The int64 permutation that sorts ``x`` along ``axis`` (stable both ways)."""
    return apply(get_op("argsort"), x, axis=axis, descending=descending)


def sort_by_key(v, key, axis=-1, descending=False, inverse=False):
    """``v`` permuted along ``axis`` as sorting ``key`` would permute it (``inverse=True``:
    the inverse permutation, which undoes that)."""
    return apply(get_op("sort_by_key"), v, key, axis=axis, descending=descending, inverse=inverse)


def topk(x, k, axis=-1, descending=True):
    """``(values, indices)`` of the ``k`` largest entries along ``axis`` (``descending=False``:
    the smallest), in order; NaN counts as the largest; ties: the lower index first."""
    x = x if isinstance(x, Tensor) else tensor(x)

    def error(message):
        loc = user_location(2)
        where = f" at {loc}" if loc else ""
        return OpError(f"topk: {message} (inputs: {describe_avals([Aval(x.shape, x.dtype)])}){where}")

    try:
        axis = _as_axis(axis, x.ndim)
    except ShapeDtypeError as exc:
        raise error(str(exc) if x.ndim else "needs a tensor of rank >= 1") from None
    try:
        k = operator.index(k)
    except TypeError:
        raise error(f"k must be an int, got {k!r}") from None
    if isinstance(k, bool) or not 0 <= k <= x.shape[axis]:
        raise error(f"k={k!r} is outside [0, {x.shape[axis]}] (the length of axis {axis})")
    index = (slice(None),) * axis + (slice(0, k),)
    values = F.getitem(sort(x, axis=axis, descending=descending), index)
    indices = F.getitem(argsort(x, axis=axis, descending=descending), index)
    return values, indices
