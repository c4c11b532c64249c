"""Helpers of the pooling rules: reduce_window, adaptive (separable) window reductions,
the first-maximum selection and the divisions of the averages."""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.ops.pooling import lowest
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

INDEX = dt.int32
NO_INDEX = int(np.iinfo(np.int32).max)  # the index of padding and of the reductions' start value


def padding_attr(pairs) -> ir.Attribute:
    array = np.asarray(pairs, np.int64).reshape(-1, 2)
    return ir.DenseIntElementsAttr.get(array, shape=list(array.shape))


def window_geometry(kernel_size, stride, padding):
    """(window, strides, padding pairs) over NCHW for a 2-D spatial window."""
    return (1, 1, *kernel_size), (1, 1, *stride), ((0, 0), (0, 0), *((p, p) for p in padding))


def empty_result(ctx):
    """Zeros for a zero-size result (nothing to reduce or scatter), else None."""
    out = ctx.out_aval
    return hlo.constant(0, out.dtype, out.shape) if 0 in out.shape else None


def _fill_body(region, avals, combine) -> None:
    scalars = [hlo.tensor_type((), a.dtype) for a in avals]
    block = region.blocks.append(*scalars, *scalars)
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        stablehlo.ReturnOp(combine(args[: len(avals)], args[len(avals) :]))


def reduce_window(operands, avals, inits, window, strides, padding, combine):
    """Variadic ``stablehlo.reduce_window``; ``combine(lhs, rhs) -> list`` of scalar values.
    Returns (results, their avals)."""
    shape = tuple(
        (n + lo + hi - k) // s + 1 for n, k, s, (lo, hi) in zip(avals[0].shape, window, strides, padding, strict=True)
    )
    out = [Aval(shape, a.dtype) for a in avals]
    op = stablehlo.ReduceWindowOp(
        [hlo.aval_type(a) for a in out],
        list(operands),
        [hlo.constant(v, a.dtype) for v, a in zip(inits, avals, strict=True)],
        window_dimensions=list(window),
        window_strides=list(strides),
        padding=padding_attr(padding),
    )
    _fill_body(op.body, avals, combine)
    return list(op.results), out


def _reduce_dim(operands, avals, inits, dims, combine):
    """Variadic ``stablehlo.reduce`` over ``dims`` (an int or a tuple)."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    shape = tuple(d for i, d in enumerate(avals[0].shape) if i not in dims)
    op = stablehlo.ReduceOp(
        [hlo.tensor_type(shape, a.dtype) for a in avals],
        list(operands),
        [hlo.constant(v, a.dtype) for v, a in zip(inits, avals, strict=True)],
        list(dims),
    )
    _fill_body(op.body, avals, combine)
    return list(op.results)


def _take(value, aval: Aval, dim: int, rows) -> ir.Value:
    """``value`` at the constant positions ``rows`` along ``dim`` (one ``stablehlo.gather``)."""
    rank, count = len(aval.shape), len(rows)
    shape = tuple(count if i == dim else d for i, d in enumerate(aval.shape))
    numbers = stablehlo.GatherDimensionNumbers.get(
        offset_dims=[i for i in range(rank) if i != dim],
        collapsed_slice_dims=[dim],
        operand_batching_dims=[],
        start_indices_batching_dims=[],
        start_index_map=[dim],
        index_vector_dim=1,
    )
    return stablehlo.GatherOp(
        value,
        hlo.constant(np.asarray(rows, np.int32).reshape(count, 1), INDEX, (count, 1)),
        numbers,
        [1 if i == dim else d for i, d in enumerate(aval.shape)],
        indices_are_sorted=bool(rows == sorted(rows)),
        results=[hlo.tensor_type(shape, aval.dtype)],
    ).result


def window_reduce(operands, avals, dim, windows, inits, combine):
    """Reduce each ``(start, end)`` window along ``dim``: the result has ``len(windows)``
    entries along ``dim``. Returns (results, their avals)."""
    n, m, rank = avals[0].shape[dim], len(windows), len(avals[0].shape)
    shape = tuple(m if i == dim else d for i, d in enumerate(avals[0].shape))
    out = [Aval(shape, a.dtype) for a in avals]
    starts, sizes = [s for s, _ in windows], [e - s for s, e in windows]
    step = starts[1] - starts[0] if m > 1 else 1
    if (
        len(set(sizes)) == 1
        and step >= 1
        and starts == [i * step for i in range(m)]
        and (n - sizes[0]) // step + 1 == m
    ):
        window, strides = [1] * rank, [1] * rank
        window[dim], strides[dim] = sizes[0], step
        return reduce_window(operands, avals, inits, window, strides, [(0, 0)] * rank, combine)
    if set(sizes) == {1} and m % n == 0 and starts == [i // (m // n) for i in range(m)]:
        # Each row repeated m // n times: a broadcast along a new dim after ``dim``, merged into it.
        wide = (*avals[0].shape[: dim + 1], m // n, *avals[0].shape[dim + 1 :])
        dims = [i if i <= dim else i + 1 for i in range(rank)]
        spread = [hlo.broadcast_in_dim(v, wide, dims) for v in operands]
        return [hlo.reshape(v, shape, a.dtype) for v, a in zip(spread, out, strict=True)], out
    # Any windows: gather the rows of every window side by side (k entries per window,
    # the shorter ones padded with the start value), then reduce the k entries.
    k = max(sizes)
    rows = [min(start + t, end - 1) for start, end in windows for t in range(k)]
    expanded = (*shape[: dim + 1], k, *shape[dim + 1 :])
    inside = np.array([[t < size for t in range(k)] for size in sizes])
    mask = hlo.broadcast_in_dim(hlo.constant(inside, dt.bool_, inside.shape), expanded, [dim, dim + 1])
    gathered = []
    for value, aval, init in zip(operands, avals, inits, strict=True):
        taken = hlo.reshape(_take(value, aval, dim, rows), expanded, aval.dtype)
        gathered.append(taken if min(sizes) == k else hlo.select(mask, taken, hlo.constant(init, aval.dtype, expanded)))
    return _reduce_dim(gathered, [Aval(expanded, a.dtype) for a in avals], inits, dim + 1, combine), out


def adaptive_windows(n: int, m: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows ``[floor(i * n / m), ceil((i + 1) * n / m))``, derived here
    rather than imported from the op's module, so that the property tests compare two."""
    return [((i * n) // m, ((i + 1) * n + m - 1) // m) for i in range(m)]


def adaptive_reduce(operands, avals, inits, output_size, combine):
    """The adaptive windows along W (dim 3), then along H (dim 2)."""
    for dim, m in ((3, output_size[1]), (2, output_size[0])):
        operands, avals = window_reduce(operands, avals, dim, adaptive_windows(avals[0].shape[dim], m), inits, combine)
    return operands, avals


def flat_index(shape):
    """int32 ``h * W + w`` over an NCHW shape."""
    rows = stablehlo.IotaOp(hlo.tensor_type(shape, INDEX), 2).result
    cols = stablehlo.IotaOp(hlo.tensor_type(shape, INDEX), 3).result
    return stablehlo.AddOp(stablehlo.MulOp(rows, hlo.constant(shape[3], INDEX, shape)).result, cols).result


def argmax_combine(dtype):
    """Combiner of (value, index, payload...) tuples keeping PyTorch's selection: a NaN
    beats any number and a later NaN an earlier one; else the greater value wins and equal
    values go to the smaller index (the first in row-major order)."""

    def combine(a, b):
        (av, ai, *_), (bv, bi, *_) = a, b
        a_nan, b_nan = hlo.compare(av, av, "NE", dtype), hlo.compare(bv, bv, "NE", dtype)
        later = hlo.compare(bi, ai, "GT", INDEX)
        nan_wins = stablehlo.AndOp(b_nan, stablehlo.OrOp(stablehlo.NotOp(a_nan).result, later).result).result
        tie_first = stablehlo.AndOp(hlo.compare(bv, av, "EQ", dtype), stablehlo.NotOp(later).result).result
        beats = stablehlo.OrOp(hlo.compare(bv, av, "GT", dtype), tie_first).result
        take = stablehlo.OrOp(nan_wins, stablehlo.AndOp(stablehlo.NotOp(a_nan).result, beats).result).result
        return [hlo.select(take, q, p) for p, q in zip(a, b, strict=True)]

    return combine


def _add(a, b):
    return [stablehlo.AddOp(a[0], b[0]).result]


def nan_max(x, aval: Aval, reducer):
    """The maximum by ``reducer(operands, avals, inits, combine)``, NaN wherever the reduced
    elements hold one (an any-NaN flag reduced beside the maximum)."""
    init = lowest(aval.dtype)
    if aval.dtype not in dt.FLOATING:
        (value,), _ = reducer([x], [aval], [init], lambda a, b: [stablehlo.MaxOp(a[0], b[0]).result])
        return value
    flag = hlo.compare(x, x, "NE", aval.dtype)

    def combine(a, b):
        return [stablehlo.MaxOp(a[0], b[0]).result, stablehlo.OrOp(a[1], b[1]).result]

    (value, any_nan), (out, _) = reducer([x, flag], [aval, Aval(aval.shape, dt.bool_)], [init, False], combine)
    return hlo.select(any_nan, hlo.constant(np.nan, out.dtype, out.shape), value)


def divide_by(value, out: Aval, divisors: np.ndarray):
    """``value`` (NCHW) divided by per-position (OH, OW) ``divisors``, as +0.0-started sums."""
    value = hlo.plus_zero(value, out)
    spread = hlo.broadcast_in_dim(hlo.constant(divisors, out.dtype, divisors.shape), out.shape, [2, 3])
    return stablehlo.DivOp(value, spread).result
