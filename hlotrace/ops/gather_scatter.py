"""Integer-tensor indexing, scatter-adds: scatter_add and index_add (primitives; imported by
:mod:`hlotrace.ops.gather`, whose module docstring states their semantics and the shared
index conventions)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.gather import (
    FAMILY,
    NUMERIC,
    as_tensor,
    axis_of,
    canonical_axis,
    check_attrs,
    check_index_dtype,
    compute_dtype,
    gather,
    index_values,
    op_error,
    operand_shape,
    take,
    wrapped,
)
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["index_add", "scatter_add"]


def sum_elements(s, dtype, rng):
    """Elements of scatter-add operands. Floats: multiples of 1/4 in [-8, 8] and the special
    values (NaN, ±inf, ±0.0), whose sums are exact in float32 in any order (duplicate indices
    add in an order NumPy and XLA need not share); half precision half of the time general
    values (they add in float32 and round once: the order hardly shows). Integers: the full
    range (sums wrap around alike in any order)."""
    if dtype in dt.FLOATING and dtype.itemsize == 2 and rng.random() < 1 / 2:
        return s.values(dtype, special_rate=1 / 16, boundary_rate=0.0)
    if dtype in dt.FLOATING:
        return s.values(dtype, -8.0, 8.0, grid_bits=2, edges=(0.0, -0.0, 1.0, -1.0, 0.5))
    return s.values(dtype)


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


def _scatter_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(NUMERIC)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(0, len(shape)))
        index_shape = [int(rng.integers(0, d + 1)) if rng.random() < 1 / 4 else d for d in shape]
        index_shape[axis] = int(rng.integers(0, 6)) if shape[axis] else 0
        index = index_values(rng, tuple(index_shape), shape[axis]).astype(index_dtype)
        elements = sum_elements(s, dtype, rng)
        x = draw(s.arrays(dtype, shape, elements))
        src = draw(s.arrays(dtype, tuple(index_shape), elements))
        axis = axis - len(shape) if rng.random() < 1 / 2 else axis
        return s.OpSample((x, index, src), {"axis": axis})

    return sample()


SCATTER_ADD = register_op(
    OpDef(
        name="scatter_add",
        family=FAMILY,
        reference=_scatter_reference,
        infer=_scatter_infer,
        canonicalize=_scatter_canonicalize,
        sample=_scatter_sample,
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


def _index_add_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(NUMERIC)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(0, len(shape)))
        n = int(rng.integers(0, 6)) if shape[axis] else 0
        index = index_values(rng, (n,), shape[axis]).astype(index_dtype)
        elements = sum_elements(s, dtype, rng)
        x = draw(s.arrays(dtype, shape, elements))
        source = draw(s.arrays(dtype, (*shape[:axis], n, *shape[axis + 1 :]), elements))
        attrs = {"axis": axis - len(shape) if rng.random() < 1 / 2 else axis}
        if rng.random() < 2 / 3:
            alphas = (1, -1, 2, 3, 0) if dtype in dt.INTEGER else (1, -1, 2, 0.5, 0.0, -0.25, 3)
            attrs["alpha"] = alphas[rng.integers(0, len(alphas))]
        return s.OpSample((x, index, source), attrs)

    return sample()


INDEX_ADD = register_op(
    OpDef(
        name="index_add",
        family=FAMILY,
        reference=_index_add_reference,
        infer=_index_add_infer,
        canonicalize=_index_add_canonicalize,
        sample=_index_add_sample,
        vjp=_index_add_vjp,
        doc="torch.index_add: x with alpha * source[..., i, ...] added at index[i] along axis; 1-D index",
    )
)


def index_add(x, axis, index, source, alpha=1):
    """``torch.index_add``: a copy of ``x`` with ``alpha * source[..., i, ...]`` added to
    ``out[..., index[i], ...]`` along ``axis``; ``index`` is 1-D; duplicates accumulate."""
    x, index, source = as_tensor(x, "index_add"), as_tensor(index, "index_add", index=True), as_tensor(source)
    return apply(INDEX_ADD, x, index, source, axis=axis, alpha=alpha)
