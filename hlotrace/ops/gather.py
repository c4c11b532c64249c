"""Integer-tensor indexing: take, take_along_axis (primitives), gather and embedding
(composites) here; scatter_add and index_add (primitives) in :mod:`hlotrace.ops.gather_scatter`;
masked_fill, setitem, index_copy (primitives) and the dispatch behind ``Tensor.__getitem__`` /
``__setitem__`` in :mod:`hlotrace.ops.gather_set`. This docstring states the semantics of
the first two files; gather_set's states its own.

Semantics (each op's reference below is the definition the lowering rules must match):

- Indices are int32 or int64 tensors (a bool tensor is refused: it is a mask, see
  ``masked_fill``/``where``). A negative index ``i`` counts from the end (``i + dim``, as
  NumPy; PyTorch's ``gather``/``scatter_add``/``index_add``/``embedding`` raise instead).
  An index outside ``[-dim, dim)`` raises an OpError eagerly (the check needs the index
  values, so it runs in the reference, i.e. also while recording); a compiled program cannot
  raise: XLA **clamps** an out-of-range read (take, take_along_axis, gather, embedding read
  the nearest valid row after the negative wrap) and **drops** an out-of-range write (its
  update is skipped in scatter_add, index_add and index_copy). Such results are not tested.
- ``take(x, indices, axis=None)``: NumPy's ``take``: the result has shape
  ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``; ``axis=None`` takes from the
  flattened ``x`` (a reshape, then ``take`` along axis 0). Every dtype.
- ``take_along_axis(x, indices, axis)``: NumPy's: ``indices`` has ``x``'s rank, and the dims
  other than ``axis`` broadcast between ``x`` and ``indices`` (NumPy's rule, which PyTorch's
  ``take_along_dim`` shares); ``axis=None`` works on the flattened ``x`` with 1-D indices.
  Every dtype.
- ``gather(x, axis, index)``: ``torch.gather``: ``index`` has ``x``'s rank and
  ``index.shape[d] <= x.shape[d]`` for ``d != axis`` (no broadcasting; the leading part of
  ``x`` is used). A composite: ``getitem`` (when ``index`` is smaller) and ``take_along_axis``.
- ``scatter_add(x, axis, index, src)``: ``torch.scatter_add``: ``out = x`` then
  ``out[..., index[i, j, ...], ...] += src[i, j, ...]`` along ``axis``; duplicate indices
  accumulate. ``index`` has ``x``'s rank, ``index.shape[d] <= x.shape[d]`` for ``d != axis``
  and ``index.shape[d] <= src.shape[d]`` for every ``d`` (a larger ``src`` is cut to
  ``index``'s shape by a ``getitem`` first). ``src`` must have ``x``'s dtype (as PyTorch).
  Integer and float tensors; integers wrap around on overflow.
- ``index_add(x, axis, index, source, alpha=1)``: ``torch.index_add``: ``index`` is 1-D,
  ``source`` is ``x``'s shape with ``axis`` of length ``len(index)``, and
  ``out[..., index[i], ...] += alpha * source[..., i, ...]``; duplicates accumulate.
  ``alpha`` is a Python number (an int for integer tensors, as PyTorch), stored rounded to the
  dtype the op computes in. Integer and float tensors of ``source``'s dtype.
- float16 and bfloat16 scatter-adds (scatter_add, index_add, and so the gradients of
  take/take_along_axis/embedding) add in float32 and round once (PyTorch adds in the
  tensor's own dtype, rounding after every addition). Where an index repeats, float additions happen in an order the
  reference (NumPy's ``add.at``, in index order) and XLA need not share, so float32/float64
  results may differ by rounding where repeated contributions nearly cancel.
- ``embedding(indices, weight)``: ``weight[indices]`` for a 2-D ``weight`` (F.embedding
  without padding_idx / max_norm / scale_grad_by_freq / sparse). A composite: ``take`` along
  axis 0, so negative indices wrap (PyTorch raises).

Gradients: take's VJP is an index_add into zeros, take_along_axis's a scatter_add into zeros
(of the broadcast shape; the engine sums it down), scatter_add's and index_add's are the
cotangent itself (for ``x``) and a gather/take of it (for ``src``/``source``); indices get
none. All are registered ops, so gradients of gradients work.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis, random_shape
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.source import user_location

FAMILY = "gather"

NUMERIC = (*dt.INTEGER, *dt.FLOATING)  # scatter-adds

__all__ = ["embedding", "gather", "take", "take_along_axis"]


# -- helpers shared with gather_set.py and the rules ------------------------------------------


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype scatter-adds accumulate in: float32 for float16/bfloat16, else the dtype."""
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else np.dtype(dtype)


def check_attrs(attrs: dict, allowed: tuple, op: str, required: tuple | None = None) -> None:
    """Refuse unknown attributes and missing ``required`` ones (default: all ``allowed``)."""
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({op} takes {', '.join(allowed)})")
    missing = [a for a in (allowed if required is None else required) if a not in attrs]
    if missing:
        raise ShapeDtypeError(f"{op} needs {'= and '.join(missing)}=")


def canonical_axis(axis, rank: int) -> int:
    if isinstance(axis, np.integer) and not isinstance(axis, np.bool_):
        axis = int(axis)
    if rank == 0:
        raise ShapeDtypeError("needs a tensor of rank >= 1 to index along an axis")
    return normalize_axis(axis, rank)


def check_index_dtype(aval: Aval, what: str = "indices") -> None:
    if aval.dtype not in dt.INTEGER:
        hint = " (a bool mask is not an index: use masked_fill or where)" if aval.dtype == dt.bool_ else ""
        raise ShapeDtypeError(f"{what} must be int32 or int64, got {aval.dtype}{hint}")


def wrapped(indices: np.ndarray, dim: int, axis: int) -> np.ndarray:
    """``indices`` with negative entries counted from the end; IndexError if out of range."""
    idx = np.asarray(indices).astype(np.int64)
    bad = (idx < -dim) | (idx >= dim)
    if bad.any():
        raise IndexError(
            f"index {int(idx[bad].flat[0])} is out of bounds for axis {axis} with size {dim} "
            f"(a compiled program cannot raise: XLA clamps such a read and drops such a write)"
        )
    return np.where(idx < 0, idx + dim, idx)


def op_error(name: str, message: str, *tensors) -> OpError:
    loc = user_location(2)
    shapes = ", ".join(f"{dt.short_name(t.dtype)}[{','.join(map(str, t.shape))}]" for t in tensors)
    return OpError(f"{name}: {message} (inputs: {shapes or 'no tensors'})" + (f" at {loc}" if loc else ""))


def as_tensor(x, name: str = "", index: bool = False):
    """``x`` as a Tensor; Python sequences of ints become int32 indices, arrays keep theirs."""
    from hlotrace.tensor import Tensor, tensor

    if isinstance(x, Tensor):
        return x
    if index and isinstance(x, list | tuple) and len(x) == 0:
        return tensor(np.zeros((0,), np.int32))
    try:
        return tensor(x)
    except OpError as exc:
        raise op_error(name, str(exc)) from None


# -- sample building blocks (numpy only; called inside the ops' sample strategies) ---------


def operand_shape(rng, max_dims: int = 3) -> tuple:
    """A random shape of rank 1..max_dims (sides 0..5, at most 128 elements)."""
    while True:
        shape = random_shape(rng, max_dims)
        if shape:
            return shape


def index_values(rng, shape, dim: int, unique: bool = False) -> np.ndarray:
    """Indices in ``[-dim, dim)`` of ``shape`` (int64): duplicates common unless ``unique``
    (then ``size <= dim`` is required); none, about half or all of them given as their
    negative alias."""
    size = math.prod(shape)
    if size == 0:
        return np.zeros(shape, np.int64)
    if unique:
        positions = rng.permutation(dim)[:size]
    elif rng.random() < 1 / 4:
        positions = np.full(size, rng.integers(0, dim))  # one index repeated everywhere
    else:
        positions = rng.integers(0, dim, size)
    negative = rng.random(size) < rng.choice([0.0, 0.5, 1.0])
    return np.where(negative, positions - dim, positions).reshape(shape)


def cast_like_astype(x: np.ndarray, dtype) -> np.ndarray:
    """``astype`` as the astype op defines it (to bool: ``x != 0``)."""
    return x != 0 if np.dtype(dtype) == dt.bool_ and x.dtype != dt.bool_ else x.astype(dtype)


# -- take -----------------------------------------------------------------------------------


def _take_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis",), "take")
    return {"axis": canonical_axis(attrs["axis"], len(avals[0].shape))}


def take_shape(x_shape, index_shape, axis) -> tuple:
    return (*x_shape[:axis], *index_shape, *x_shape[axis + 1 :])


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


def _take_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(-len(shape), len(shape)))
        dim, rest = shape[axis], math.prod(shape) // max(shape[axis], 1)
        while True:
            index_shape = s.random_shape(rng, max_dims=2)
            if dim == 0 and math.prod(index_shape):
                index_shape = (*index_shape[:-1], 0) if index_shape else (0,)
            if rest * math.prod(index_shape) <= 128:
                break
        indices = index_values(rng, index_shape, dim).astype(index_dtype)
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)), indices), {"axis": axis})

    return sample()


TAKE = register_op(
    OpDef(
        name="take",
        family=FAMILY,
        reference=_take_reference,
        infer=_take_infer,
        canonicalize=_take_canonicalize,
        promote_inputs=(),  # a Python int index is int32
        sample=_take_sample,
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


def _along_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        out = operand_shape(rng)
        axis = int(rng.integers(0, len(out)))
        shape = [1 if rng.random() < 1 / 4 else d for d in out]
        index_shape = [1 if rng.random() < 1 / 4 and d != axis else n for d, n in enumerate(out)]
        shape[axis] = int(rng.integers(0, 5)) if rng.random() < 1 / 8 else int(rng.integers(1, 5))
        if shape[axis] == 0:
            index_shape[axis] = 0
        indices = index_values(rng, tuple(index_shape), shape[axis]).astype(index_dtype)
        axis = axis - len(out) if rng.random() < 1 / 2 else axis
        return s.OpSample((draw(s.distinct_arrays(dtype, tuple(shape))), indices), {"axis": axis})

    return sample()


TAKE_ALONG_AXIS = register_op(
    OpDef(
        name="take_along_axis",
        family=FAMILY,
        reference=_along_reference,
        infer=_along_infer,
        canonicalize=_along_canonicalize,
        promote_inputs=(),  # a Python int index is int32
        sample=_along_sample,
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


# The scatter-adds and the writing side (masked_fill, setitem, index_copy, Tensor indexing)
# live in their own files; imported here so that their ops register and their public
# functions join this module's __all__ (which hlotrace.functional star-imports).
import hlotrace.ops.gather_scatter as gather_scatter  # noqa: E402
import hlotrace.ops.gather_set as gather_set  # noqa: E402
from hlotrace.ops.gather_scatter import *  # noqa: E402, F403
from hlotrace.ops.gather_set import *  # noqa: E402, F403

__all__ += [*gather_scatter.__all__, *gather_set.__all__]
