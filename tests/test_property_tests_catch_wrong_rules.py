"""The generated property tests fail on the wrong rules that used to pass them.

Each case swaps in one plausible mistake (the kind ``make mutation`` applies to a scratch
copy, see TESTING.md) and runs the op's generated property test, which must fail. One
case per weakness the mutation harness first exposed: the sign of zero ignored, int32
compared in float32, the wrong start value of an int32 max, the NaN guard of long float
max/min reductions dropped, and bool operands that never met as True and True (and, checked
directly, a constant stored as a splat because 0.0 == -0.0).
"""

import numpy as np
import pytest

import hlotrace.lowering.rules.reduction.basic as reduction_rules
from hlotrace import dtypes as dt
from hlotrace.lowering import hlo
from hlotrace.lowering.registry import RULES
from hlotrace.ops import OPS
from hlotrace.runtime import jaxlib_compat
from hlotrace.runtime.jaxlib_compat import stablehlo
from hlotrace.testing.check import CI_BASE_SEED, STRATEGY_EXAMPLES, property_test


def assert_property_test_fails(name, dtype):
    with pytest.raises(AssertionError):
        property_test(OPS[name], CI_BASE_SEED, dtype, shrink=False, max_examples=STRATEGY_EXAMPLES)()


def test_negative_as_zero_minus_x(monkeypatch):
    def zero_minus(ctx, x):
        aval = ctx.in_avals[0]
        return stablehlo.SubtractOp(hlo.constant(0, aval.dtype, aval.shape), x).result

    monkeypatch.setitem(RULES, "negative", zero_minus)
    assert_property_test_fails("negative", dt.float32)


def test_int32_comparison_done_in_float32(monkeypatch):
    def in_float32(ctx, x, y):
        out = ctx.out_aval.shape
        lhs, rhs = (hlo.to_aval(v, a, type(a)(out, dt.float32)) for v, a in zip((x, y), ctx.in_avals, strict=True))
        return hlo.compare(lhs, rhs, "LT", dt.float32)

    monkeypatch.setitem(RULES, "less", in_float32)
    assert_property_test_fails("less", dt.int32)


def test_int32_max_started_one_above_the_lowest_value(monkeypatch):
    original = reduction_rules._identity

    def off_by_one(op_name, dtype):
        value = original(op_name, dtype)
        return value + 1 if dtype == dt.int32 and op_name == "max" else value

    monkeypatch.setattr(reduction_rules, "_identity", off_by_one)
    assert_property_test_fails("max", dt.int32)


@pytest.mark.parametrize("name", ["max", "min"])
def test_float_max_min_without_the_nan_guard(monkeypatch, name):
    monkeypatch.setattr(reduction_rules, "_propagate_nan", lambda x, x_aval, axis, value, shape: value)
    assert_property_test_fails(name, dt.float32)


def test_constant_splat_decided_by_bits():
    # Was a property-test case (x * c with a captured c mixing 0.0 and -0.0, under a
    # dense_elements that splats by value). Captured data holding a -0.0 no longer reaches
    # dense_elements as floats (hlo.data_constant lowers it as its bit pattern, since XLA
    # rewrites iota-like float constants), so no op's property test can see this mistake;
    # the encoding itself must still keep the zeros apart for every other constant.
    with jaxlib_compat.shared_context(), jaxlib_compat.ir.Location.unknown():
        for dtype in (np.float16, dt.bfloat16, np.float32, np.float64):
            mixed, same = np.array([0.0, -0.0], dtype), np.array([-0.0, -0.0], dtype)
            shaped = hlo.tensor_type((2,), np.dtype(dtype))
            assert not jaxlib_compat.dense_elements(mixed, hlo.element_type(dtype), shaped).is_splat
            assert jaxlib_compat.dense_elements(same, hlo.element_type(dtype), shaped).is_splat


def test_bool_add_as_exclusive_or(monkeypatch):
    def xor(ctx, x, y):
        if ctx.out_aval.dtype != dt.bool_:
            return original(ctx, x, y)
        lhs, rhs = (hlo.to_aval(v, a, ctx.out_aval) for v, a in zip((x, y), ctx.in_avals, strict=True))
        return stablehlo.XorOp(lhs, rhs).result

    original = RULES["add"]
    monkeypatch.setitem(RULES, "add", xor)
    assert_property_test_fails("add", dt.bool_)
