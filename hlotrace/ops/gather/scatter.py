"""Integer-tensor indexing, scatter-adds: scatter_add and index_add (primitives; imported by
:mod:`hlotrace.ops.gather`, whose module docstring states their semantics and the shared
index conventions)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.gather.common import (
    FAMILY,
    NUMERIC,
    as_tensor,
    canonical_axis,
    check_attrs,
    check_index_dtype,
    compute_dtype,
    host_index_check,
    op_error,
    wrapped,
)
from hlotrace.ops.gather.samples import index_add_sample, scatter_add_sample
from hlotrace.ops.gather.take import axis_of, gather, take
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["index_add", "scatter_add"]


# -- scatter_add ------------------------------------------------------------------------------


def _scatter_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis",), "scatter_add")
    return {"axis": canonical_axis(attrs["axis"], len(avals[0].shape))}


def _numeric_same_dtype(x: Aval, src: Aval, what: str) -> None:
    if x.dtype not in NUMERIC:
        raise ShapeDtypeError(f"defined for integer and float tensors, got {x.dtype}")
    if src.dtype != x.dtype:
        raise ShapeDtypeError(f"{what} must have x's dtype {x.dtype}, got {src.dtype} (cast it with astype)")


def _scatter_infer(x: Aval, index: Aval, src: Aval, *, axis) -> Aval:
    check_index_dtype(index, "index")
    _numeric_same_dtype(x, src, "src")
    if len(index.shape) != len(x.shape):
        raise ShapeDtypeError(f"index must have x's rank {len(x.shape)}, got rank {len(index.shape)}")
    if src.shape != index.shape:
        raise ShapeDtypeError(f"src must have index's shape {index.shape}, got {src.shape}")
    for d, (a, b) in enumerate(zip(x.shape, index.shape, strict=True)):
        if d != axis and b > a:
            raise ShapeDtypeError(f"index dim {d} ({b}) is larger than x's ({a})")
    return x


def _scatter_reference(x, index, src, *, axis):
    out = x.astype(compute_dtype(x.dtype))  # a copy
    grid = np.indices(index.shape, sparse=True)
    where = tuple(wrapped(index, x.shape[axis], axis) if d == axis else grid[d] for d in range(x.ndim))
    np.add.at(out, where, src.astype(out.dtype))
    return out


def _scatter_vjp(ct, out, x, index, src, *, axis):
    return ct, None, gather(ct, axis, index)


SCATTER_ADD = register_op(
    OpDef(
        name="scatter_add",
        family=FAMILY,
        reference=_scatter_reference,
        host_check=host_index_check,
        infer=_scatter_infer,
        canonicalize=_scatter_canonicalize,
        sample=scatter_add_sample,
        vjp=_scatter_vjp,
        doc="torch.scatter_add: x with src added at index along axis; duplicates accumulate",
    )
)


def scatter_add(x, axis, index, src):
    """``torch.scatter_add``: a copy of ``x`` with ``src[i][j]`` added to
    ``out[index[i][j]][j]`` (axis 0; likewise for other axes); repeated indices accumulate.
    ``src`` larger than ``index`` is cut to ``index``'s shape first."""
    x, index, src = as_tensor(x, "scatter_add"), as_tensor(index, "scatter_add", index=True), as_tensor(src)
    axis = axis_of("scatter_add", axis, x, index, src)
    if src.shape != index.shape:
        if src.ndim != index.ndim or any(b > a for a, b in zip(src.shape, index.shape, strict=True)):
            raise op_error("scatter_add", "index must be no larger than src on every dim", x, index, src)
        src = F.getitem(src, tuple(slice(0, b) for b in index.shape))
    return apply(SCATTER_ADD, x, index, src, axis=axis)


# -- index_add --------------------------------------------------------------------------------


def _index_add_canonicalize(avals, attrs):
    check_attrs(attrs, ("axis", "alpha"), "index_add", required=("axis",))
    x = avals[0]
    axis = canonical_axis(attrs["axis"], len(x.shape))
    alpha = attrs.get("alpha", 1)
    if not dt.is_number(alpha):
        raise ShapeDtypeError(f"alpha must be a Python number, got {alpha!r}")
    alpha = dt.as_python_number(alpha)
    if x.dtype in dt.INTEGER:
        if not float(alpha).is_integer():
            raise ShapeDtypeError(f"alpha must be an int for {x.dtype} tensors, got {alpha!r} (as PyTorch)")
        alpha, info = int(alpha), np.iinfo(x.dtype)
        if not info.min <= alpha <= info.max:
            raise ShapeDtypeError(f"alpha={alpha} is out of range for {x.dtype}")
    elif x.dtype in dt.FLOATING:
        with np.errstate(over="ignore"):
            alpha = float(np.asarray(alpha, compute_dtype(x.dtype)))
    return {"axis": axis, "alpha": alpha}


def _index_add_infer(x: Aval, index: Aval, source: Aval, *, axis, alpha) -> Aval:
    check_index_dtype(index, "index")
    _numeric_same_dtype(x, source, "source")
    if len(index.shape) != 1:
        raise ShapeDtypeError(f"index must be 1-D, got shape {index.shape} (take's gradient reshapes it)")
    expected = (*x.shape[:axis], index.shape[0], *x.shape[axis + 1 :])
    if source.shape != expected:
        raise ShapeDtypeError(
            f"source must have shape {expected} (x's with axis {axis} of len(index)), got {source.shape}"
        )
    return x


def _index_add_reference(x, index, source, *, axis, alpha):
    out = x.astype(compute_dtype(x.dtype))  # a copy
    update = source.astype(out.dtype) * np.asarray(alpha, out.dtype)
    np.add.at(out, (slice(None),) * axis + (wrapped(index, x.shape[axis], axis),), update)
    return out


def _index_add_vjp(ct, out, x, index, source, *, axis, alpha):
    g = take(ct, index, axis=axis)
    return ct, None, g if alpha == 1 else g * alpha


INDEX_ADD = register_op(
    OpDef(
        name="index_add",
        family=FAMILY,
        reference=_index_add_reference,
        host_check=host_index_check,
        infer=_index_add_infer,
        canonicalize=_index_add_canonicalize,
        sample=index_add_sample,
        vjp=_index_add_vjp,
        doc="torch.index_add: x with alpha * source[..., i, ...] added at index[i] along axis; 1-D index",
    )
)


def index_add(x, axis, index, source, alpha=1):
    """``torch.index_add``: a copy of ``x`` with ``alpha * source[..., i, ...]`` added to
    ``out[..., index[i], ...]`` along ``axis``; ``index`` is 1-D; duplicates accumulate."""
    x, index, source = as_tensor(x, "index_add"), as_tensor(index, "index_add", index=True), as_tensor(source)
    return apply(INDEX_ADD, x, index, source, axis=axis, alpha=alpha)
