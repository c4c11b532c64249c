"""Small StableHLO builder helpers shared by the lowering rules.

They must be called inside the builder's context, insertion point and location (the
builder sets all three before calling a rule), and take avals rather than reading MLIR
types back, so that rules stay short.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.lowering.registry import MATMUL_PRECISION
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import dense_elements, ir, splat_constant, stablehlo


def element_type(dtype: np.dtype) -> ir.Type:
    dtype = np.dtype(dtype)
    if dtype == dt.float32:
        return ir.F32Type.get()
    if dtype == dt.float16:
        return ir.F16Type.get()
    if dtype == dt.bfloat16:
        return ir.BF16Type.get()
    if dtype == dt.int32:
        return ir.IntegerType.get_signless(32)
    if dtype == dt.float64:
        return ir.F64Type.get()
    if dtype == dt.int64:
        return ir.IntegerType.get_signless(64)
    if dtype == dt.bool_:
        return ir.IntegerType.get_signless(1)
    raise TypeError(f"no MLIR element type for {dtype}")


def tensor_type(shape, dtype) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type(dtype))


def aval_type(aval: Aval) -> ir.RankedTensorType:
    return tensor_type(aval.shape, aval.dtype)


def constant(value, dtype, shape=()) -> ir.Value:
    """A constant tensor of ``shape`` filled from ``value`` (a scalar or an array of that shape).

    Uniform values are stored as splats, so a large fill costs one element in the module.
    """
    array = np.asarray(value, dtype=dtype)
    if array.shape != tuple(shape):
        array = np.broadcast_to(array, shape)
    attr = dense_elements(array, element_type(dtype), tensor_type(shape, dtype))
    return stablehlo.ConstantOp(attr).result


def convert(value: ir.Value, aval: Aval, dtype) -> ir.Value:
    """Convert ``value`` (of ``aval``) to ``dtype``; no-op when it already has it.

    Conversions to bool follow NumPy: ``x != 0`` (so NaN becomes True).
    """
    dtype = np.dtype(dtype)
    if aval.dtype == dtype:
        return value
    if dtype == dt.bool_:
        zero = constant(0, aval.dtype, aval.shape)
        return compare(value, zero, "NE", aval.dtype)
    if aval.dtype == dt.bool_ and dtype in dt.FLOATING:
        # Not stablehlo.convert: XLA's simplifier rewrites convert(pred) / 0 into
        # select(pred, inf, 0), which gives 0 for False / False instead of NaN.
        return select(value, constant(1, dtype, aval.shape), constant(0, dtype, aval.shape))
    return stablehlo.ConvertOp(tensor_type(aval.shape, dtype), value).result


def broadcast_in_dim(value: ir.Value, target_shape, dims) -> ir.Value:
    dtype_type = ir.RankedTensorType(value.type).element_type
    result_type = ir.RankedTensorType.get(list(target_shape), dtype_type)
    return stablehlo.BroadcastInDimOp(result_type, value, list(dims)).result


def broadcast_to(value: ir.Value, aval: Aval, target_shape) -> ir.Value:
    """NumPy-style broadcast of ``value`` (of ``aval``) to ``target_shape``."""
    target_shape = tuple(target_shape)
    if aval.shape == target_shape:
        return value
    # Operand dims map onto the trailing result dims; broadcast_in_dim stretches size-1
    # dims itself, which is exactly NumPy's rule.
    offset = len(target_shape) - len(aval.shape)
    return broadcast_in_dim(value, target_shape, list(range(offset, len(target_shape))))


def to_aval(value: ir.Value, aval: Aval, target: Aval) -> ir.Value:
    """Convert then broadcast ``value`` from ``aval`` to ``target``'s dtype and shape."""
    value = convert(value, aval, target.dtype)
    return broadcast_to(value, Aval(aval.shape, target.dtype), target.shape)


def compare(lhs: ir.Value, rhs: ir.Value, direction: str, dtype) -> ir.Value:
    """``stablehlo.compare`` with IEEE semantics for floats (NaN != NaN is true)."""
    dtype = np.dtype(dtype)
    if dtype in dt.FLOATING:
        kind = "FLOAT"
    elif dtype == dt.bool_:
        kind = "UNSIGNED"
    else:
        kind = "SIGNED"
    return stablehlo.CompareOp(
        lhs,
        rhs,
        stablehlo.ComparisonDirectionAttr.get(direction),
        compare_type=stablehlo.ComparisonTypeAttr.get(kind),
    ).result


def select(pred: ir.Value, on_true: ir.Value, on_false: ir.Value) -> ir.Value:
    return stablehlo.SelectOp(pred, on_true, on_false).result


def is_constant(value: ir.Value) -> bool:
    """Whether ``value`` is defined by a ``stablehlo.constant`` (a literal or captured array)."""
    owner = value.owner
    return isinstance(owner, ir.Operation | ir.OpView) and owner.operation.name == "stablehlo.constant"


def hidden_from_folding(value: ir.Value) -> ir.Value:
    """``value`` behind an optimization barrier: XLA cannot fold what it computes from it."""
    return stablehlo.OptimizationBarrierOp([value]).results[0]


def data_constant(array: np.ndarray) -> ir.Value:
    """A constant holding user data exactly, -0.0 included.

    XLA replaces a constant that equals an iota by the iota, comparing elements with ``==``,
    and folds ops on constants into new constants first: a captured ``[-0.0, 1.0]`` came back
    ``[+0.0, 1.0]``, and so did ``take_along_axis`` of ``[-0.0, 1.0, -1.0, 0.0]`` at
    ``[0, 1]`` (seed 219497072). A floating-point array holding a -0.0 is therefore emitted
    as its bit pattern (an integer constant, which is no float iota), behind an optimization
    barrier so that XLA cannot fold the conversion back, then bitcast to its dtype."""
    dtype = np.dtype(array.dtype)
    negative_zero = (array == 0) & np.signbit(array) if dtype in dt.FLOATING else None
    if negative_zero is None or not negative_zero.any() or (array.size > 1 and negative_zero.all()):
        # No -0.0, or all of it -0.0 (no iota; a slice of it stayed -0.0 when probed): a
        # plain constant, which the simplify pass can read (x + -0.0 is x).
        return constant(array, dtype, array.shape)
    bits = np.array(array, order="C").view(np.dtype(f"int{8 * dtype.itemsize}"))  # keeps 0-d
    if dtype.itemsize == 2:  # no int16 constants here: int32 values, narrowed exactly
        hidden = hidden_from_folding(constant(bits.astype(np.int32), dt.int32, bits.shape))
        i16 = ir.RankedTensorType.get(list(bits.shape), ir.IntegerType.get_signless(16))
        hidden = stablehlo.ConvertOp(i16, hidden).result
    else:
        hidden = hidden_from_folding(constant(bits, bits.dtype, bits.shape))
    return stablehlo.BitcastConvertOp(tensor_type(array.shape, dtype), hidden).result


def is_zero_constant(value: ir.Value, sign: float = 1.0) -> bool:
    """Whether ``value`` is a splat constant zero of ``sign``: +0 (or 0 / False, which
    convert to +0.0) for ``sign=1.0``, -0.0 for ``sign=-1.0``."""
    element = splat_constant(value)
    return element is not None and element == 0 and math.copysign(1.0, element) == sign


def plus_zero(value: ir.Value, aval: Aval) -> ir.Value:
    """``value + 0.0`` as IEEE computes it: -0.0 becomes +0.0, everything else is kept.

    Spelled as a select because XLA's simplifier folds a literal ``x + 0`` and ``x - (-0.0)``
    (and a sum over one element, which drops the +0 start value) to ``x``, keeping -0.0
    where NumPy gives +0.0.
    """
    zero = constant(0, aval.dtype, aval.shape)
    return select(compare(value, zero, "EQ", aval.dtype), zero, value)


def narrowed(value: ir.Value, wide, out: Aval, *, plus_zero_first: bool = False) -> ir.Value:
    """``value`` (of ``out``'s shape, computed in the wider dtype ``wide``) rounded once to
    ``out``'s dtype, as the references round; with ``plus_zero_first``, -0.0 becomes +0.0
    before (for sums that start at +0.0, see :func:`plus_zero`)."""
    aval = Aval(out.shape, wide)
    if plus_zero_first:
        value = plus_zero(value, aval)
    return convert(value, aval, out.dtype)


def reshape(value: ir.Value, shape, dtype) -> ir.Value:
    return stablehlo.ReshapeOp(tensor_type(shape, dtype), value).result


def precision_config(dtype) -> ir.ArrayAttr | None:
    """The ``precision_config`` of a ``dot_general`` or ``convolution`` computing in ``dtype``:
    for float32, both operands at the module's matmul precision (``lower_trace(precision=...)``;
    HIGHEST unless asked, since GPUs would otherwise round float32 operands to TF32, ~1e-3
    relative error, far from NumPy); None for the other dtypes, which have nothing to choose."""
    if dtype != dt.float32:
        return None
    level = stablehlo.PrecisionAttr.get(MATMUL_PRECISION.get().upper())
    return ir.ArrayAttr.get([level, level])
