"""Linear algebra: ``matmul(a, b, transpose_a=False, transpose_b=False)``.

NumPy ``matmul`` semantics: the last two dims of each operand are a matrix and the dims
before them are batch dims, broadcast together; a rank-1 ``a`` is a row vector and a
rank-1 ``b`` a column vector, and that dim is dropped from the result. ``transpose_x``
swaps the last two dims of operand x before the product; on a rank-1 operand it is a
no-op (a vector is its own transpose, as in NumPy's ``v.T``).

The result dtype is ``promote(a, b)``. bool is logical (``any(a & b)``, like NumPy);
int32 and int64 are exact and wrap on overflow; float16/bfloat16 accumulate in float32 and
round once; float64 is computed in float64.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, broadcast_shapes
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "linalg"


def _canonicalize(avals, attrs):
    unknown = set(attrs) - {"transpose_a", "transpose_b"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (matmul takes transpose_a= and transpose_b=)")
    flags = {}
    for name in ("transpose_a", "transpose_b"):
        flag = attrs.get(name, False)
        if not isinstance(flag, bool | np.bool_):
            raise ShapeDtypeError(f"{name} must be a bool, got {flag!r}")
        flags[name] = bool(flag)
    return flags


def matrix_dims(shape, transpose: bool) -> tuple[int | None, int]:
    """(rows, contracting size) of a left operand's matrix; rows is None for a vector."""
    if len(shape) == 1:
        return None, shape[0]
    rows, cols = shape[-2:]
    return (cols, rows) if transpose else (rows, cols)


def _infer(a: Aval, b: Aval, *, transpose_a, transpose_b) -> Aval:
    for name, x in (("a", a), ("b", b)):
        if len(x.shape) == 0:
            raise ShapeDtypeError(f"operand {name} is a scalar; matmul needs rank 1 or more (use multiply)")
    n, k_a = matrix_dims(a.shape, transpose_a)
    # b's matrix read as a left operand of the transposed product: (m, k).
    m, k_b = matrix_dims(b.shape, not transpose_b)
    if k_a != k_b:
        raise ShapeDtypeError(
            f"contracting dims differ: a{list(a.shape)}{' transposed' if transpose_a else ''} has {k_a} "
            f"columns, b{list(b.shape)}{' transposed' if transpose_b else ''} has {k_b} rows"
        )
    try:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ShapeDtypeError as exc:
        raise ShapeDtypeError(f"batch dims (all but the last two) do not broadcast: {exc}") from None
    matrix = tuple(d for d in (n, m) if d is not None)
    return Aval(batch + matrix, dt.promote(a.dtype, b.dtype))


def _reference(a, b, *, transpose_a, transpose_b):
    if transpose_a and a.ndim >= 2:
        a = np.swapaxes(a, -1, -2)
    if transpose_b and b.ndim >= 2:
        b = np.swapaxes(b, -1, -2)
    dtype = dt.promote(a.dtype, b.dtype)
    if dtype in dt.INTEGER:
        # uint64 arithmetic wraps modulo 2**64 (int64 could overflow, which NumPy leaves
        # undefined); its bits are int64's wrapped result, the low 32 bits int32's.
        out = np.matmul(a.astype(np.uint64), b.astype(np.uint64))
        return out.view(np.int64) if dtype == dt.int64 else out.astype(np.uint32).view(np.int32)
    if dtype == dt.bool_:
        return np.matmul(a, b)
    if dtype == dt.float64:
        return np.matmul(a.astype(dt.float64, copy=False), b.astype(dt.float64, copy=False))
    # float16 has no BLAS path and bfloat16 no matmul at all: compute in float32.
    return np.matmul(a.astype(dt.float32, copy=False), b.astype(dt.float32, copy=False))


def _sample(s):
    st = s.st

    @st.composite
    def sample(draw):
        rank_a, rank_b = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        transpose_a, transpose_b = draw(st.booleans()), draw(st.booleans())
        # Sizes 0 included but not dominant: one zero anywhere empties the whole result.
        side = st.integers(0, 5) | st.integers(1, 5)
        n, k, m = draw(side), draw(side), draw(side)
        batch_rank = max(rank_a, rank_b, 2) - 2
        batch = draw(st.lists(st.integers(0, 4) | st.integers(1, 4), min_size=batch_rank, max_size=batch_rank))

        def operand_shape(rank, matrix):
            if rank == 1:
                return (k,)
            # Some batch dims are 1 so that they broadcast against the other operand's.
            own = [1 if draw(st.integers(0, 3)) == 0 else d for d in batch[len(batch) - (rank - 2) :]]
            return (*own, *matrix)

        shape_a = operand_shape(rank_a, (k, n) if transpose_a else (n, k))
        shape_b = operand_shape(rank_b, (m, k) if transpose_b else (k, m))
        dtype_a = draw(s.dtypes(s.ALL))
        dtype_b = draw(s.other_dtypes(dtype_a))
        exact_ints = dt.promote(dtype_a, dtype_b) in dt.INTEGER

        def elements(dtype):
            if dtype in dt.FLOATING:
                # Exact products and sums: BLAS and XLA summation orders cannot differ.
                return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
            if dtype in dt.INTEGER:
                # Integer results: the full range (and its boundaries) exercises wraparound;
                # float results: small enough that products and sums stay exact in float32.
                return s.values(dtype) if exact_ints else s.values(dtype, -1000, 1000, boundary_rate=0.0)
            return None

        a = draw(s.arrays(dtype_a, shape_a, elements(dtype_a)))
        b = draw(s.arrays(dtype_b, shape_b, elements(dtype_b)))
        return s.OpSample((a, b), {"transpose_a": transpose_a, "transpose_b": transpose_b})

    return sample()


def _vjp(ct, out, a, b, *, transpose_a, transpose_b):
    """With A = op_a(a), B = op_b(b) (vectors as 1-row / 1-column matrices): dA = ct·Bᵀ, dB = Aᵀ·ct.

    Each is computed straight in the layout of its operand (dAᵀ = B·ctᵀ when a is stored
    transposed), so no transpose op is needed; the engine sums broadcast batch dims, except
    for a matrix b under a batched a, whose gradient contracts the batch dims directly.
    """
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    a1 = F.reshape(a, (1, a.shape[0])) if a_vec else a
    b1 = F.reshape(b, (b.shape[0], 1)) if b_vec else b
    ta, tb = transpose_a and not a_vec, transpose_b and not b_vec
    rows = out.shape[: out.ndim - (not a_vec) - (not b_vec)]
    ct1 = F.reshape(ct, (*rows, 1 if a_vec else out.shape[-1 - (not b_vec)], 1 if b_vec else out.shape[-1]))
    if ta:
        da = F.matmul(b1, ct1, transpose_a=tb, transpose_b=True)
    else:
        da = F.matmul(ct1, b1, transpose_b=not tb)
    if b1.ndim == 2 and a1.ndim > 2 and not ta:
        # A matrix b shared by every batch entry of a (a Linear layer on (N, L, E) input):
        # contract the batch dims in the same product, one (K, R) x (R, M) matmul, instead of
        # a batched matmul whose R-sized results the engine then sums over the batch.
        r = int(np.prod(a1.shape[:-1]))
        a2, ct2 = F.reshape(a1, (r, a1.shape[-1])), F.reshape(ct1, (r, ct1.shape[-1]))
        db = F.matmul(ct2, a2, transpose_a=True) if tb else F.matmul(a2, ct2, transpose_a=True)
    elif tb:
        db = F.matmul(ct1, a1, transpose_a=True, transpose_b=ta)
    else:
        db = F.matmul(a1, ct1, transpose_a=not ta)
    if a_vec:
        da = F.reshape(da, (*da.shape[:-2], a.shape[0]))
    if b_vec:
        db = F.reshape(db, (*db.shape[:-2], b.shape[0]))
    return da, db


register_op(
    OpDef(
        name="matmul",
        family=FAMILY,
        reference=_reference,
        infer=_infer,
        canonicalize=_canonicalize,
        sample=_sample,
        vjp=_vjp,
        doc="NumPy matmul with batch broadcasting; transpose_a/transpose_b swap an operand's last two "
        "dims first (no-op on vectors); bool is logical, float16/bfloat16 accumulate in float32, "
        "float64 in float64",
    )
)
