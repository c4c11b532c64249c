"""Lowering rules for hlotrace/ops/linalg.py.

``matmul`` is one ``stablehlo.dot_general``. Transposition is folded into the contracting
dimension numbers. A batch dim that only one operand has (or that is 1 on the other side)
becomes a free dim of that operand instead of being broadcast, so ``x[B,T,D] @ w[D,H]``
never materializes B copies of ``w``; a transpose then restores NumPy's result layout.
"""

from __future__ import annotations

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import stablehlo


def _as_matrix(value, aval: Aval, dtype, vector_shape):
    """Convert to ``dtype``; a vector becomes the matrix ``vector_shape`` (row or column)."""
    value = hlo.convert(value, aval, dtype)
    if len(aval.shape) == 1:
        return hlo.reshape(value, vector_shape, dtype), vector_shape
    return value, aval.shape


def _plan_batch(batch_a, batch_b, batch_out):
    """Assign each result batch dim to both operands (a dot_general batch dim) or to one.

    Returns, per operand, the indices of its batch dims to keep (dims of size 1 whose
    partner is larger are reshaped away), and per result batch dim its role.
    """
    keep_a, keep_b, roles = [], [], []
    for j, size in enumerate(batch_out):
        ia = j - (len(batch_out) - len(batch_a))
        ib = j - (len(batch_out) - len(batch_b))
        size_a = batch_a[ia] if ia >= 0 else None
        size_b = batch_b[ib] if ib >= 0 else None
        if size_a is not None and size_a == size_b:
            keep_a.append(ia)
            keep_b.append(ib)
            roles.append("both")
        elif size_a == size:
            keep_a.append(ia)
            roles.append("a")
        else:
            keep_b.append(ib)
            roles.append("b")
    return keep_a, keep_b, roles


def _drop_dims(value, shape, keep, dtype):
    """Reshape away the batch dims of ``shape`` not listed in ``keep`` (all of size 1)."""
    kept = tuple(shape[i] for i in keep) + tuple(shape[-2:])
    return (value, shape) if kept == tuple(shape) else (hlo.reshape(value, kept, dtype), kept)


@rule("matmul")
def _matmul(ctx, a, b, *, transpose_a, transpose_b):
    (aval_a, aval_b), out = ctx.in_avals, ctx.out_aval
    # bool: count the true products (nonzero means true). float16/bfloat16 dots keep their
    # dtype, as jax.numpy.matmul emits them: XLA accumulates them in float32 and rounds once
    # (tests/test_regressions_reduction_linalg.py checks it). A float32 result type crashes
    # XLA:CPU (jaxlib 0.10) on some layouts: "Unsupported element type for
    # DotThunk::Execute: BF16 x BF16 = F32".
    dot_dtype = dt.int32 if out.dtype == dt.bool_ else out.dtype
    k = aval_a.shape[0] if len(aval_a.shape) == 1 else aval_a.shape[-2 if transpose_a else -1]
    a, shape_a = _as_matrix(a, aval_a, dot_dtype, (1, k))
    b, shape_b = _as_matrix(b, aval_b, dot_dtype, (k, 1))
    if len(aval_a.shape) == 1:
        transpose_a = False
    if len(aval_b.shape) == 1:
        transpose_b = False
    batch_a, batch_b = shape_a[:-2], shape_b[:-2]
    batch_out = out.shape[: max(len(batch_a), len(batch_b))]
    keep_a, keep_b, roles = _plan_batch(batch_a, batch_b, batch_out)

    # Drop the size-1 batch dims that broadcast against the other operand.
    a, shape_a = _drop_dims(a, shape_a, keep_a, dot_dtype)
    b, shape_b = _drop_dims(b, shape_b, keep_b, dot_dtype)

    shared = [j for j, role in enumerate(roles) if role == "both"]
    position_a = {j: p for p, j in enumerate(j for j, r in enumerate(roles) if r in ("both", "a"))}
    position_b = {j: p for p, j in enumerate(j for j, r in enumerate(roles) if r in ("both", "b"))}
    rank_a, rank_b = len(shape_a), len(shape_b)
    numbers = stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=[position_a[j] for j in shared],
        rhs_batching_dimensions=[position_b[j] for j in shared],
        lhs_contracting_dimensions=[rank_a - 2 if transpose_a else rank_a - 1],
        rhs_contracting_dimensions=[rank_b - 1 if transpose_b else rank_b - 2],
    )
    # dot_general's result: shared batch dims, then a's free dims, then b's, each in order.
    layout = shared + [j for j, r in enumerate(roles) if r == "a"] + ["n"]
    layout += [j for j, r in enumerate(roles) if r == "b"] + ["m"]
    n = shape_a[-1] if transpose_a else shape_a[-2]
    m = shape_b[-2] if transpose_b else shape_b[-1]
    sizes = {**dict(enumerate(batch_out)), "n": n, "m": m}
    dot_shape = [sizes[d] for d in layout]
    result = stablehlo.DotGeneralOp(
        hlo.tensor_type(dot_shape, dot_dtype), a, b, numbers, precision_config=hlo.precision_config(dot_dtype)
    ).result

    if out.dtype == dt.bool_:
        result = hlo.compare(result, hlo.constant(0, dt.int32, dot_shape), "NE", dt.int32)
    order = [*range(len(batch_out)), "n", "m"]
    if layout != order:
        result = stablehlo.TransposeOp(result, [layout.index(d) for d in order]).result
        dot_shape = [sizes[d] for d in order]
    # Vectors' unit rows/columns go away here (NumPy drops them from the result).
    return result if tuple(dot_shape) == out.shape else hlo.reshape(result, out.shape, out.dtype)
