"""Lowering rules for sum, max, min and mean (hlotrace/ops/reduction/basic.py).

Each reduction is one ``stablehlo.reduce`` over the recorded (normalized) axes, computed in
:func:`hlotrace.ops.reduction.accumulation_dtype` and converted to the result dtype once;
``keepdims`` is a reshape of the reduced value.
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.reduction.basic import accumulation_dtype, reduced_shape
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def reduce(value: ir.Value, aval: Aval, axes, init, combiner) -> ir.Value:
    """``stablehlo.reduce`` of ``value`` over ``axes`` starting from the scalar ``init``;
    ``combiner`` is a binary StableHLO op class (AddOp, MaxOp, OrOp, ...)."""
    scalar = hlo.tensor_type((), aval.dtype)
    result = hlo.tensor_type(reduced_shape(aval.shape, axes, keepdims=False), aval.dtype)
    op = stablehlo.ReduceOp([result], [value], [hlo.constant(init, aval.dtype)], list(axes))
    block = op.body.blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        stablehlo.ReturnOp([combiner(*block.arguments).result])
    return op.result


def _identity(op_name: str, dtype: np.dtype):
    """The neutral element of max/min: the far end of the dtype's range."""
    if dtype == dt.bool_:
        return op_name == "min"
    if dtype in dt.INTEGER:
        info = np.iinfo(dtype)
        return info.min if op_name == "max" else info.max
    return -np.inf if op_name == "max" else np.inf


def _propagate_nan(x, x_aval: Aval, axis, value, shape) -> ir.Value:
    """NaN wherever the reduced slice of ``x`` holds one, else ``value``.

    XLA:CPU (jaxlib 0.10) hands float max/min reductions of 4096+ elements to YNNPACK,
    which skips NaN (jax.numpy.max has the same bug); a separate any-NaN reduction costs
    about one more pass over ``x`` and is exact on every backend.
    """
    is_nan = hlo.compare(x, x, "NE", x_aval.dtype)
    any_nan = reduce(is_nan, Aval(x_aval.shape, dt.bool_), axis, False, stablehlo.OrOp)
    return hlo.select(any_nan, hlo.constant(np.nan, x_aval.dtype, shape), value)


_COMBINERS = {
    # (numeric combiner, bool combiner); sum and mean never reduce bool: they accumulate
    # in an integer or float dtype.
    "sum": (stablehlo.AddOp, None),
    "mean": (stablehlo.AddOp, None),
    "max": (stablehlo.MaxOp, stablehlo.OrOp),
    "min": (stablehlo.MinOp, stablehlo.AndOp),
}


def _reduction(op_name: str):
    numeric, logical = _COMBINERS[op_name]

    def lower(ctx, x, *, axis, keepdims):
        (x_aval,), out = ctx.in_avals, ctx.out_aval
        acc = accumulation_dtype(op_name, x_aval.dtype)
        value = hlo.convert(x, x_aval, acc)
        init = _identity(op_name, acc) if op_name in ("max", "min") else 0
        value = reduce(value, Aval(x_aval.shape, acc), axis, init, logical if acc == dt.bool_ else numeric)
        shape = reduced_shape(x_aval.shape, axis, keepdims=False)
        if op_name in ("max", "min") and acc in dt.FLOATING:
            value = _propagate_nan(x, x_aval, axis, value, shape)
        count = math.prod(x_aval.shape[a] for a in axis)
        if op_name in ("sum", "mean") and acc in dt.FLOATING:
            # NumPy's sums start at +0.0, so they are never -0.0. XLA's are, where it turns
            # a one-element sum into that element or constant-folds a sum of -0.0s.
            value = hlo.plus_zero(value, Aval(shape, acc))
        if op_name == "mean":
            # A zero count gives 0/0 = NaN, NumPy's mean of nothing.
            value = stablehlo.DivOp(value, hlo.constant(count, acc, shape)).result
        value = hlo.convert(value, Aval(shape, acc), out.dtype)
        if keepdims:
            value = hlo.reshape(value, out.shape, out.dtype)
        return value

    return lower


for _name in _COMBINERS:
    rule(_name)(_reduction(_name))
