"""The gather family's helpers: attribute and index checks, index wrapping, errors naming
the user's line, and NumPy draws its sample strategies build on."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import normalize_axis, random_shape
from hlotrace.ops.registry import Aval
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor

FAMILY = "gather"

NUMERIC = (*dt.INTEGER, *dt.FLOATING)  # scatter-adds


# -- helpers shared with the family's modules and the rules ------------------------------------------


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


def host_index_check(avals, hosts, *, axis, **_) -> str | None:
    """OpDef.host_check of the ops that read or write ``x`` (operand 0) at ``indices``
    (operand 1) along ``axis``: why the indices are out of range, when they are on the host."""
    indices = hosts[1]
    if indices is None:
        return None
    try:
        wrapped(indices, avals[0].shape[axis], axis)
    except IndexError as exc:
        return str(exc)
    return None


def op_error(name: str, message: str, *tensors) -> OpError:
    loc = user_location(2)
    shapes = ", ".join(f"{dt.short_name(t.dtype)}[{','.join(map(str, t.shape))}]" for t in tensors)
    return OpError(f"{name}: {message} (inputs: {shapes or 'no tensors'})" + (f" at {loc}" if loc else ""))


def as_tensor(x, name: str = "", index: bool = False):
    """``x`` as a Tensor; Python sequences of ints become int32 indices, arrays keep theirs."""
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


def take_shape(x_shape, index_shape, axis) -> tuple:
    return (*x_shape[:axis], *index_shape, *x_shape[axis + 1 :])
