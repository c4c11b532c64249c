"""Lowering rules for hlotrace/ops/sorting.py.

sort, argsort and sort_by_key are one stable ``stablehlo.sort`` whose comparator is NumPy's
order (:func:`_less`): NaN above everything and equal to NaN, -0.0 equal to 0.0 (IEEE
compares), so stability decides among them; descending swaps the comparison, which keeps
ties in index order. argsort sorts an int64 iota along with the keys; the inverse
permutation of sort_by_key sorts the values back by that permutation. argmax/argmin are one
variadic ``stablehlo.reduce`` over (values, int64 iota) that keeps the extreme with the
lower index.
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.sorting import INDEX_DTYPE
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def _or(a, b):
    return stablehlo.OrOp(a, b).result


def _and(a, b):
    return stablehlo.AndOp(a, b).result


def _is_nan(a, dtype):
    return hlo.compare(a, a, "NE", dtype)


def _less(a, b, dtype, descending=False):
    """Whether scalar ``a`` sorts strictly before ``b``: NumPy's order (NaN largest), or its
    reverse when ``descending``; equal elements (ties) compare false both ways."""
    if descending:
        a, b = b, a
    less = hlo.compare(a, b, "LT", dtype)
    if dtype not in dt.FLOATING:
        return less
    # a < b, or a is a number and b is NaN.
    return _or(less, _and(hlo.compare(a, a, "EQ", dtype), _is_nan(b, dtype)))


def sort_along(operands, types, dtypes, axis, descending):
    """One stable ``stablehlo.sort`` of ``operands`` along ``axis``, ordered by the first."""
    op = stablehlo.SortOp(types, operands, dimension=axis, is_stable=True)
    scalars = [hlo.tensor_type((), d) for d in dtypes for _ in range(2)]
    block = op.comparator.blocks.append(*scalars)
    with ir.InsertionPoint(block):
        lhs, rhs = block.arguments[0], block.arguments[1]
        stablehlo.ReturnOp([_less(lhs, rhs, dtypes[0], descending)])
    return list(op.results)


def _iota(shape, axis):
    return stablehlo.IotaOp(hlo.tensor_type(shape, INDEX_DTYPE), axis).result


def _permutation(x, aval, axis, descending):
    """The int64 stable sort permutation of ``x`` along ``axis``."""
    types = [hlo.aval_type(aval), hlo.tensor_type(aval.shape, INDEX_DTYPE)]
    return sort_along([x, _iota(aval.shape, axis)], types, [aval.dtype, INDEX_DTYPE], axis, descending)[1]


@rule("sort")
def _sort(ctx, x, *, axis, descending):
    (aval,) = ctx.in_avals
    return sort_along([x], [hlo.aval_type(aval)], [aval.dtype], axis, descending)[0]


@rule("argsort")
def _argsort(ctx, x, *, axis, descending):
    (aval,) = ctx.in_avals
    return _permutation(x, aval, axis, descending)


@rule("sort_by_key")
def _sort_by_key(ctx, v, key, *, axis, descending, inverse):
    v_aval, key_aval = ctx.in_avals
    v_type = hlo.aval_type(v_aval)
    if not inverse:
        return sort_along(
            [key, v], [hlo.aval_type(key_aval), v_type], [key_aval.dtype, v_aval.dtype], axis, descending
        )[1]
    # Sorting (permutation, v) by the permutation puts v[j] where the key came from.
    order = _permutation(key, key_aval, axis, descending)
    index_type = hlo.tensor_type(v_aval.shape, INDEX_DTYPE)
    return sort_along([order, v], [index_type, v_type], [INDEX_DTYPE, v_aval.dtype], axis, False)[1]


def _lowest(dtype, name):
    """The value every element beats: the bottom (argmax) or top (argmin) of the range."""
    if dtype == dt.bool_:
        return name == "argmin"
    if dtype in dt.INTEGER:
        info = np.iinfo(dtype)
        return info.min if name == "argmax" else info.max
    return -np.inf if name == "argmax" else np.inf


def _arg_reduction(name):
    def lower(ctx, x, *, axis, keepdims):
        (aval,), out = ctx.in_avals, ctx.out_aval
        if axis is None:
            shape = (int(np.prod(aval.shape)),)
            x, axis = hlo.reshape(x, shape, aval.dtype), 0
        else:
            shape = aval.shape
        dtype = aval.dtype
        scalar, index = hlo.tensor_type((), dtype), hlo.tensor_type((), INDEX_DTYPE)
        reduced = [d for i, d in enumerate(shape) if i != axis]
        op = stablehlo.ReduceOp(
            [hlo.tensor_type(reduced, dtype), hlo.tensor_type(reduced, INDEX_DTYPE)],
            [x, _iota(shape, axis)],
            [hlo.constant(_lowest(dtype, name), dtype), hlo.constant(np.iinfo(INDEX_DTYPE).max, INDEX_DTYPE)],
            [axis],
        )
        block = op.body.blocks.append(scalar, index, scalar, index)
        with ir.InsertionPoint(block):
            a, ia, b, ib = block.arguments
            # a wins if it beats b (NaN beats every number), or ties b at a lower index.
            beats = hlo.compare(a, b, "GT" if name == "argmax" else "LT", dtype)
            if dtype in dt.FLOATING:
                beats = _or(beats, _and(_is_nan(a, dtype), hlo.compare(b, b, "EQ", dtype)))
                tie = _or(hlo.compare(a, b, "EQ", dtype), _and(_is_nan(a, dtype), _is_nan(b, dtype)))
            else:
                tie = hlo.compare(a, b, "EQ", dtype)
            first = _or(beats, _and(tie, hlo.compare(ia, ib, "LT", INDEX_DTYPE)))
            stablehlo.ReturnOp([hlo.select(first, a, b), hlo.select(first, ia, ib)])
        return hlo.reshape(op.results[1], out.shape, out.dtype)

    return lower


for _name in ("argmax", "argmin"):
    rule(_name)(_arg_reduction(_name))
