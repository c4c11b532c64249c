"""take and take_along_axis (primitives), gather and embedding (composites); semantics in
:mod:`hlotrace.ops.gather`."""

from __future__ import annotations

import math

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.gather.common import (
    FAMILY,
    as_tensor,
    canonical_axis,
    check_attrs,
    check_index_dtype,
    host_index_check,
    op_error,
    take_shape,
    wrapped,
)
from hlotrace.ops.gather.samples import take_along_axis_sample, take_sample
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["embedding", "gather", "take", "take_along_axis"]


# -- take -----------------------------------------------------------------------------------


def _take_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis",), "take")
    return {"axis": canonical_axis(attrs["axis"], len(avals[0].shape))}


def _take_infer(x: Aval, indices: Aval, *, axis) -> Aval:
    check_index_dtype(indices)
    return Aval(take_shape(x.shape, indices.shape, axis), x.dtype)


def _take_reference(x, indices, *, axis):
    return np.take(x, wrapped(indices, x.shape[axis], axis), axis=axis)


def _take_vjp(ct, out, x, indices, *, axis):
    # index_add wants a 1-D index: the index dims of ct are flattened into one.
    n = math.prod(indices.shape)
    flat = indices if indices.ndim == 1 else F.reshape(indices, (n,))
    source_shape = (*x.shape[:axis], n, *x.shape[axis + 1 :])
    source = ct if ct.shape == source_shape else F.reshape(ct, source_shape)
    return F.index_add(F.zeros(x.shape, ct.dtype), axis, flat, source), None


TAKE = register_op(
    OpDef(
        name="take",
        family=FAMILY,
        reference=_take_reference,
        host_check=host_index_check,
        infer=_take_infer,
        canonicalize=_take_canonicalize,
        promote_inputs=(),  # a Python int index is int32
        sample=take_sample,
        vjp=_take_vjp,
        doc="NumPy take along axis: x.shape[:axis] + indices.shape + x.shape[axis+1:]; negative indices wrap",
    )
)


def take(x, indices, axis=None):
    """NumPy's ``take``: the entries of ``x`` at ``indices`` (int32/int64, negative ones
    counted from the end) along ``axis``; ``axis=None`` takes from the flattened ``x``.

    >>> take(ht.tensor([[1, 2], [3, 4]]), ht.tensor([1, -1, 0]), axis=1).numpy()
    array([[2, 2, 1],
           [4, 4, 3]], dtype=int32)
    """
    x = as_tensor(x, "take")
    if axis is None:
        x = F.reshape(x, (x.size,))
        axis = 0
    return apply(TAKE, x, as_tensor(indices, "take", index=True), axis=axis)


def embedding(indices, weight):
    """``weight[indices]`` for a 2-D ``weight`` of shape (num_embeddings, embedding_dim):
    PyTorch's ``F.embedding`` without padding_idx/max_norm. A composite: ``take`` along axis 0
    (negative indices wrap; the gradient is an index_add into zeros)."""
    weight = as_tensor(weight, "embedding")
    if weight.ndim != 2:
        raise op_error("embedding", f"weight must be 2-D (num_embeddings, embedding_dim), got {weight.shape}", weight)
    return apply(TAKE, weight, as_tensor(indices, "embedding", index=True), axis=0)


# -- take_along_axis --------------------------------------------------------------------------


def _along_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis",), "take_along_axis")
    return {"axis": canonical_axis(attrs["axis"], len(avals[0].shape))}


def _along_infer(x: Aval, indices: Aval, *, axis) -> Aval:
    check_index_dtype(indices)
    if len(indices.shape) != len(x.shape):
        raise ShapeDtypeError(f"indices must have x's rank {len(x.shape)}, got rank {len(indices.shape)}")
    shape = []
    for d, (a, b) in enumerate(zip(x.shape, indices.shape, strict=True)):
        if d == axis:
            shape.append(b)
        elif a == b or 1 in (a, b):
            shape.append(b if a == 1 else a)
        else:
            raise ShapeDtypeError(f"dim {d} of x ({a}) and of indices ({b}) do not broadcast (NumPy's rule)")
    return Aval(tuple(shape), x.dtype)


def _along_reference(x, indices, *, axis):
    return np.take_along_axis(x, wrapped(indices, x.shape[axis], axis), axis)


def _along_vjp(ct, out, x, indices, *, axis):
    # Scattered into zeros of the broadcast shape (axis: x's length); the engine sums the
    # dims that x broadcast along.
    shape = list(out.shape)
    shape[axis] = x.shape[axis]
    index = indices if indices.shape == out.shape else F.broadcast_to(indices, out.shape)
    return F.scatter_add(F.zeros(tuple(shape), ct.dtype), axis, index, ct), None


TAKE_ALONG_AXIS = register_op(
    OpDef(
        name="take_along_axis",
        family=FAMILY,
        reference=_along_reference,
        host_check=host_index_check,
        infer=_along_infer,
        canonicalize=_along_canonicalize,
        promote_inputs=(),  # a Python int index is int32
        sample=take_along_axis_sample,
        vjp=_along_vjp,
        doc="NumPy take_along_axis: indices of x's rank, other dims broadcast; negative indices wrap",
    )
)


def take_along_axis(x, indices, axis):
    """NumPy's ``take_along_axis``: ``out[..., i, ...] = x[..., indices[..., i, ...], ...]``
    along ``axis``; the other dims broadcast; ``axis=None``: flattened ``x``, 1-D indices."""
    x, indices = as_tensor(x, "take_along_axis"), as_tensor(indices, "take_along_axis", index=True)
    if axis is None:
        x = F.reshape(x, (x.size,))
        axis = 0
    return apply(TAKE_ALONG_AXIS, x, indices, axis=axis)


def _torch_leading(name, x, index, axis, what):
    """``x`` cut to ``index``'s extent on the dims PyTorch lets ``index`` be smaller on
    (all dims but ``axis``, or all of them with axis None)."""
    if x.ndim != index.ndim:
        raise op_error(name, f"index must have {what}'s rank {x.ndim}, got rank {index.ndim}", x, index)
    cut = []
    for d, (a, b) in enumerate(zip(x.shape, index.shape, strict=True)):
        if d == axis:
            cut.append(slice(None))
        elif b > a:
            raise op_error(name, f"index dim {d} ({b}) is larger than {what}'s ({a})", x, index)
        else:
            cut.append(slice(0, b))
    return x if all(c == slice(None) or c.stop == x.shape[d] for d, c in enumerate(cut)) else F.getitem(x, tuple(cut))


def axis_of(name, axis, *tensors):
    try:
        return canonical_axis(axis, tensors[0].ndim)
    except ShapeDtypeError as exc:
        raise op_error(name, str(exc), *tensors) from None


def gather(x, axis, index):
    """``torch.gather(x, axis, index)``: ``out[i][j] = x[index[i][j]][j]`` for axis 0 (and so
    on); ``index`` has ``x``'s rank and is no larger on the other dims (no broadcasting).
    A composite: ``getitem`` (if ``index`` is smaller) and ``take_along_axis``."""
    x, index = as_tensor(x, "gather"), as_tensor(index, "gather", index=True)
    axis = axis_of("gather", axis, x, index)
    return apply(TAKE_ALONG_AXIS, _torch_leading("gather", x, index, axis, "x"), index, axis=axis)
