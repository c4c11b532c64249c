"""The math and bitwise ops beyond what the generated property tests check: NumPy's special
values written out (mod/floor_divide/atan2 at ±0, ±inf and NaN; integer division by 0 and
INT_MIN // -1; sign(-0.0); round's halves; shift counts out of range), the dtype rules, the
errors, gradients against their formulas, and the public names."""

import math

import ml_dtypes
import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import dtypes as dt
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.ops import OPS, bitwise
from hlotrace.ops import math as math_ops
from hlotrace.ops.registry import NOT_DIFFERENTIABLE
from hlotrace.testing.tolerances import Tolerance, assert_close, tolerance_for

FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
IDENTICAL = Tolerance(0.0, 0.0, "exact, signed zeros and NaN positions included")


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _compiled(fn, *arrays, captured=()):
    """``fn`` applied to ``arrays`` by the compiled program (the second call of an
    xla_trace); the arrays at positions ``captured`` are closed over (lowered as constants)."""
    constants = {i: ht.tensor(arrays[i]) for i in captured}
    positions = [i for i in range(len(arrays)) if i not in captured]

    def program(*tensors):
        filled = dict(constants)
        filled.update(zip(positions, tensors, strict=True))
        return fn(*(filled[i] for i in range(len(arrays))))

    traced = xla_trace(program, capture_as_const=bool(captured))
    inputs = [ht.tensor(arrays[i]) for i in positions]
    traced(*inputs)
    return traced(*inputs).numpy()


def _grid(values, dtype):
    x, y = np.meshgrid(np.asarray(values, np.float64), np.asarray(values, np.float64))
    return x.ravel().astype(dtype), y.ravel().astype(dtype)


SPECIALS = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 5.5, -0.75, 1e4, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["mod", "floor_divide"])
def test_float_mod_and_floor_divide_are_numpys_divmod(name, dtype):
    x, y = _grid(SPECIALS, dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(x, y)  # NumPy's own (ml_dtypes' for bfloat16), not the reference
    fn = getattr(F, name)
    assert_close(fn(ht.tensor(x), ht.tensor(y)).numpy(), expected, IDENTICAL, what=f"eager {name}")
    assert_close(_compiled(fn, x, y), expected, IDENTICAL, what=f"compiled {name}")
    assert_close(_compiled(fn, x, y, captured=(1,)), expected, IDENTICAL, what=f"{name} by constants")


def test_mod_has_the_divisors_sign_and_floor_divide_rounds_down():
    x, y = _t([5.0, -5.0, 5.0, -5.0, -0.0, 3.0, -3.0]), _t([3.0, 3.0, -3.0, -3.0, 3.0, -3.0, np.inf])
    np.testing.assert_array_equal(F.mod(x, y).numpy(), [2.0, 1.0, -1.0, -2.0, 0.0, -0.0, np.inf])
    assert not np.signbit(F.mod(x, y).numpy()[4]) and np.signbit(F.mod(x, y).numpy()[5])
    np.testing.assert_array_equal(F.floor_divide(x, y).numpy(), [1.0, -2.0, -2.0, 1.0, -0.0, -1.0, -1.0])
    assert np.signbit(F.floor_divide(x, y).numpy()[4])
    # Python's own operators agree on every finite case.
    for a, b in [(5, 3), (-5, 3), (5, -3), (-5, -3), (7.5, -2.0), (-0.5, 0.25)]:
        assert F.mod(_t([a]), b).numpy()[0] == a % b
        assert F.floor_divide(_t([a]), b).numpy()[0] == a // b


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_by_zero_is_zero_and_int_min_by_minus_one_wraps(dtype):
    low = np.iinfo(dtype).min
    x = np.array([7, -7, 0, low, low, low, 5, -5, 9], dtype)
    y = np.array([0, 0, 0, -1, 0, 1, -3, 3, -1], dtype)
    expected_mod = np.array([0, 0, 0, 0, 0, 0, -1, 1, 0], dtype)
    expected_div = np.array([0, 0, 0, low, 0, low, -2, -2, -9], dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.mod(x, y), expected_mod)  # NumPy's definition
        np.testing.assert_array_equal(np.floor_divide(x, y), expected_div)
    for fn, expected in ((F.mod, expected_mod), (F.floor_divide, expected_div)):
        np.testing.assert_array_equal(fn(ht.tensor(x), ht.tensor(y)).numpy(), expected)
        np.testing.assert_array_equal(_compiled(fn, x, y), expected)
        # Constant divisors (0 and -1 among them) go through XLA's constant folder.
        np.testing.assert_array_equal(_compiled(fn, x, y, captured=(1,)), expected)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_atan2_special_values_are_c99s(dtype):
    x, y = _grid([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], dtype)
    expected = np.arctan2(x, y)
    tolerance = tolerance_for("atan2", np.dtype(dtype))
    assert_close(F.atan2(ht.tensor(x), ht.tensor(y)).numpy(), expected, tolerance)
    assert_close(_compiled(F.atan2, x, y), expected, tolerance)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_sign_of_zeros_is_positive_zero_and_of_nan_nan(dtype):
    x = np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -2.5, 1e-3], dtype)
    expected = np.array([0.0, 0.0, np.nan, -1.0, 1.0, -1.0, 1.0], dtype)
    if dtype != ml_dtypes.bfloat16:  # ml_dtypes' bfloat16 sign keeps -0.0; hlotrace gives +0.0 for all floats
        assert_close(np.sign(x), expected, IDENTICAL, what="NumPy 2")
    assert_close(F.sign(ht.tensor(x)).numpy(), expected, IDENTICAL, what="eager")
    assert_close(_compiled(F.sign, x), expected, IDENTICAL, what="compiled")
    assert_close(_compiled(F.sign, x, captured=(0,)), expected, IDENTICAL, what="constant")
    assert F.sign(_t([-7, 0, 3], "int64")).numpy().tolist() == [-1, 0, 1]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_round_sends_halves_to_even(dtype):
    below_half = 0.5 - float(ml_dtypes.finfo(dtype).eps) / 4
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, below_half, -below_half, 3.7, -3.7, np.nan, -np.inf], dtype)
    expected = np.array([0.0, 2.0, 2.0, -0.0, -2.0, 0.0, -0.0, 4.0, -4.0, np.nan, -np.inf], dtype)
    assert_close(F.round(ht.tensor(x)).numpy(), expected, IDENTICAL)
    assert_close(_compiled(F.round, x), expected, IDENTICAL)
    assert_close(_compiled(F.floor, x), np.floor(x), IDENTICAL)
    assert_close(_compiled(F.ceil, x), np.ceil(x), IDENTICAL)
    assert round(2.5) == 2  # Python's round agrees; C's round (half away from zero) does not


def test_rounding_keeps_integers_and_bools_exactly():
    big = np.array([2**53 + 1, -(2**62) - 1], np.int64)  # no float64 detour
    for fn in (F.floor, F.ceil, F.round):
        out = fn(ht.tensor(big))
        assert out.dtype == np.int64 and out.numpy().tolist() == big.tolist()
        np.testing.assert_array_equal(_compiled(fn, big), big)
        assert fn(_t([True, False], "bool")).dtype == np.bool_


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_shift_counts_out_of_range_follow_numpy(dtype):
    bits = np.iinfo(dtype).bits
    x = np.repeat(np.array([1, -8, 8, -1, np.iinfo(dtype).min, 12345], dtype), 7)
    n = np.tile(np.array([-1, 0, 1, bits - 1, bits, bits + 5, -bits], dtype), 6)
    for name in ("left_shift", "right_shift"):
        expected = getattr(np, name)(x, n)  # NumPy 2: 0 (left), 0 or -1 (right) out of range
        fn = getattr(F, name)
        np.testing.assert_array_equal(fn(ht.tensor(x), ht.tensor(n)).numpy(), expected)
        np.testing.assert_array_equal(_compiled(fn, x, n), expected)
        np.testing.assert_array_equal(_compiled(fn, x, n, captured=(1,)), expected)
    assert F.right_shift(_t([-8], "int32"), 1).numpy().tolist() == [-4]  # arithmetic
    assert F.left_shift(_t([1], "int32"), 31).numpy().tolist() == [-(2**31)]  # wraps


def test_bitwise_dtypes_follow_numpy_with_weak_python_scalars():
    wide = _t([6, -1], "int64")
    assert F.bitwise_and(wide, 3).dtype == np.int64 and F.bitwise_and(wide, 3).numpy().tolist() == [2, 3]
    flags = _t([True, False], "bool")
    assert F.bitwise_or(flags, False).dtype == np.bool_
    assert F.bitwise_xor(flags, 1).dtype == np.int32 and F.bitwise_xor(flags, 1).numpy().tolist() == [0, 1]
    assert F.left_shift(flags, 2).numpy().tolist() == [4, 0]
    assert F.bitwise_not(flags).numpy().tolist() == [False, True]
    assert F.invert is F.bitwise_not
    assert F.bitwise_not(_t([0, 5], "int32")).numpy().tolist() == [-1, -6]
    assert F.logical_xor(_t([np.nan, -0.0, 2.0]), _t([1, 0, 3], "int32")).numpy().tolist() == [False, False, False]
    assert F.logical_xor(_t([np.nan, -0.0]), 0).numpy().tolist() == [True, False]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.bitwise_and(_t([1.0]), 1), "bool and integer tensors only, got float32"),
        (lambda: F.bitwise_not(_t([1.0], "float64")), "bool and integer tensors only"),
        (lambda: F.bitwise_or(_t([1], "int32"), 0.5), "got float32"),
        (lambda: F.left_shift(_t([True], "bool"), _t([True], "bool")), "integer tensors only, got bool"),
        (lambda: F.right_shift(_t([1.0]), 1), "integer tensors only, got float32"),
        (lambda: F.square(_t([True], "bool")), "not defined for bool"),
        (lambda: F.sign(_t([True], "bool")), "not defined for bool"),
        (lambda: F.mod(_t([True], "bool"), True), "two bool tensors"),
        (lambda: F.floor_divide(_t([True], "bool"), _t([False], "bool")), "two bool tensors"),
        (lambda: F.mod(_t([1.0, 2.0]), _t([1.0, 2.0, 3.0])), "cannot be broadcast"),
    ],
)
def test_errors_name_the_op_and_the_dtype(call, message):
    with pytest.raises(OpError, match=message) as info:
        call()
    assert "test_math_ops.py" in str(info.value)


def test_float_functions_give_numpys_result_dtypes_with_32_bit_ints():
    for name in ("log1p", "expm1", "erf", "tan", "arctan", "sinh", "cosh", "reciprocal"):
        fn = getattr(F, name)
        assert fn(_t([1], "int32")).dtype == np.float32, name
        assert fn(_t([1], "int64")).dtype == np.float64, name
        assert fn(_t([True], "bool")).dtype == np.float16, name
        assert fn(_t([1.0], "bfloat16")).dtype == dt.bfloat16, name
    assert F.reciprocal(_t([2, -4, 0], "int32")).numpy().tolist() == [0.5, -0.25, np.inf]  # NumPy: [0, 0, ...]
    assert F.atan2(_t([1], "int32"), _t([1], "int32")).dtype == np.float32
    assert F.square(_t([46341], "int32")).numpy().tolist() == [-2147479015]  # wraps, as NumPy
    assert F.isnan(_t([1, 2], "int32")).numpy().tolist() == [False, False]
    assert F.isfinite(_t([True], "bool")).numpy().tolist() == [True]


def test_erf_is_math_erf():
    x = np.linspace(-4, 4, 33)
    expected = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(_compiled(F.erf, x), expected, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(_compiled(F.erf, x.astype(np.float32)), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(_compiled(F.erf, np.array([np.inf, -np.inf, np.nan, -0.0])), [1, -1, np.nan, -0.0])


@pytest.mark.parametrize(("dtype", "edge"), [(np.float32, 89.41), (np.float64, 710.47)])
def test_sinh_and_cosh_stay_finite_up_to_numpys_overflow(dtype, edge):
    x = np.array([edge - 0.8, edge - 0.1, edge, edge + 0.1, -(edge - 0.1), 40.0, -25.0, 19.9, 20.1], dtype)
    for name in ("sinh", "cosh"):
        with np.errstate(over="ignore"):
            expected = getattr(np, name)(x)
        got = _compiled(getattr(F, name), x)
        assert_close(got, expected, tolerance_for(name, np.dtype(dtype)), what=name)
        assert np.isfinite(got[:3]).all(), got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log1p_and_expm1_are_accurate_near_zero(dtype):
    x = np.array([1e-30, -1e-20, 1e-10, -3e-7, 2e-5], dtype)
    for name in ("log1p", "expm1"):
        got = _compiled(getattr(F, name), x).astype(np.float64)
        np.testing.assert_allclose(
            got, getattr(np, name)(x.astype(np.float64)), rtol=1e-6 if dtype == np.float32 else 1e-15
        )


def test_gradients_follow_the_formulas():
    x, y = _t([7.0, -7.0, 2.5, 0.3]), _t([3.0, 3.0, -2.0, 0.7])
    gx, gy = grad(lambda a, b: F.mod(a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), np.ones(4))
    np.testing.assert_array_equal(gy.numpy(), -np.floor_divide(x.numpy(), y.numpy()))
    gx, gy = grad(lambda a, b: F.atan2(a, b).sum(), argnums=(0, 1))(x, y)
    norm = x.numpy() ** 2 + y.numpy() ** 2
    np.testing.assert_allclose(gx.numpy(), y.numpy() / norm, rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), -x.numpy() / norm, rtol=1e-6)
    for fn in (F.floor, F.ceil, F.round, F.sign):
        np.testing.assert_array_equal(grad(lambda a, fn=fn: fn(a).sum())(x).numpy(), np.zeros(4))
    np.testing.assert_array_equal(grad(lambda a, b: F.floor_divide(a, b).sum())(x, y).numpy(), np.zeros(4))
    np.testing.assert_allclose(grad(lambda a: F.reciprocal(a).sum())(x).numpy(), -1 / x.numpy() ** 2, rtol=1e-6)
    np.testing.assert_allclose(
        grad(lambda a: F.erf(a).sum())(x).numpy(), 2 / np.sqrt(np.pi) * np.exp(-(x.numpy() ** 2)), rtol=1e-6
    )
    for name in ("isnan", "isinf", "isfinite", "logical_xor", "bitwise_and", "left_shift"):
        assert OPS[name].vjp is NOT_DIFFERENTIABLE, name


def test_public_functions_and_ops():
    for module, family in ((math_ops, "math"), (bitwise, "bitwise")):
        for name in module.__all__:
            assert getattr(F, name) is getattr(module, name)
            op = OPS.get(name, OPS["bitwise_not"] if name == "invert" else None)
            assert op is not None and op.family == family and op.doc, name
    assert F.round(_t([2.5])).numpy().tolist() == [2.0]


def test_tensor_floordiv_and_mod_operators_are_numpys():
    import hlotrace as ht

    a = np.array([-7, -1, 0, 5, 9], np.int32)
    x = ht.tensor(a)
    np.testing.assert_array_equal((x // 3).numpy(), a // 3)
    np.testing.assert_array_equal((x % -4).numpy(), a % -4)
    np.testing.assert_array_equal((20 // ht.tensor(np.array([3, -6], np.int32))).numpy(), [6, -4])
    np.testing.assert_array_equal((7.5 % ht.tensor(np.array([2.0, -2.0], np.float32))).numpy(), [1.5, -0.5])
