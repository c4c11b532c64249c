"""Minimal cases of what the seed sweep (issue 24, `make test-seeds`) and the GPU runs found
in the property checks, with the exact values, so none depends on a seed: each failed the
property tests under some base seed other than ci's 0 (or on CUDA). The gradient checks'
cases are in tests/test_seed_sweep_gradients.py, the clip and other ml_dtypes-scalar cases
in tests/test_scalars.py.
"""

import ml_dtypes
import numpy as np
import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
from hlotrace.ops import OPS
from hlotrace.testing.check import check_op, flushed_reciprocal_product, run_compiled, run_eager
from hlotrace.testing.sampling import OpSample
from hlotrace.testing.tolerances import RECIPROCAL_FLUSHED, RECIPROCAL_FLUSHED_UNCHECKED

BF16 = ml_dtypes.bfloat16
F32_MAX = float(np.finfo(np.float32).max)


def _sample(*args, captured=(), **attrs):
    return OpSample(tuple(args), attrs, frozenset(captured))


# x / y where XLA multiplies by 1/y and 1/y is subnormal: found as (-3.4028235e38) /
# broadcast(-3.4028235e38) = 0 (float32, seed 20261125), -3.39e38 / -3.39e38 (bfloat16),
# 1.69e38 / 1.69e38 (float32, float64 and bfloat16, also with a Python-scalar divisor, seed
# 123 under dev). Each divisor form XLA rewrites: a broadcast input, a Python scalar, a
# captured scalar constant, a captured full-shape constant, a row-wise broadcast (softmax's).
DIVIDE_CASES = {
    "float32-broadcast": _sample(np.array([-F32_MAX, 1.0, F32_MAX], np.float32), np.array(-F32_MAX, np.float32)),
    "float32-python-scalar": _sample(np.array([1.69e38, -3.0, F32_MAX], np.float32), 1.69e38),
    "float32-captured-scalar": _sample(
        np.array([-F32_MAX, 2.0], np.float32), np.array(-F32_MAX, np.float32), captured=[1]
    ),
    "float32-captured-array": _sample(
        np.array([-F32_MAX, 2.0], np.float32), np.array([-F32_MAX, 3e38], np.float32), captured=[1]
    ),
    "float32-rows": _sample(
        np.array([[1.69e38, 2.0], [8.0, 1.0]], np.float32), np.array([[1.69e38], [4.0]], np.float32)
    ),
    "bfloat16-broadcast": _sample(np.array([-3.39e38, 1.0], BF16), np.array(-3.39e38, BF16)),
    "float64-broadcast": _sample(np.array([1.69e308, -4.0], np.float64), np.array(1.69e308, np.float64)),
    "float64-python-scalar": _sample(np.array([9e307, 1.0], np.float64), 9e307),
}


@pytest.mark.parametrize("case", sorted(DIVIDE_CASES))
def test_division_by_a_divisor_whose_reciprocal_is_subnormal(case):
    """XLA gives x * flush(1 / y) = 0 for x == y (documented, README); the check accepts it
    through the RECIPROCAL_FLUSHED row, and fails without it."""
    sample = DIVIDE_CASES[case]
    compiled = run_compiled(OPS["divide"], sample).astype(np.float64)
    assert compiled.flat[0] == 0.0  # NumPy: 1.0
    assert run_eager(OPS["divide"], sample).astype(np.float64).flat[0] == 1.0
    check_op(OPS["divide"], sample)
    assert "divide" in RECIPROCAL_FLUSHED


def test_division_by_a_float16_scalar_whose_reciprocal_overflows():
    """x / -5.96e-8 in float16 is x * (1 / -5.96e-8) = x * -inf: -0.0 gives NaN, -6.1e-5
    gives inf where NumPy has 0.0 and 1024 (divide-float16, seed 2297100651)."""
    x = np.array([-0.0, -6.103515625e-05, 2.0], np.float16)
    sample = _sample(x, -5.960464477539063e-08)
    compiled = run_compiled(OPS["divide"], sample)
    assert np.isnan(compiled[0]) and compiled[1] == np.inf
    check_op(OPS["divide"], sample)


@pytest.mark.parametrize("name", ["floor_divide", "mod"])
def test_floor_division_by_a_constant_whose_reciprocal_is_subnormal(name):
    """1.7e38 // 1.7e38 by a captured constant is 0, not 1: floor(x * flush(1 / y))
    (floor_divide-float32, seed 2607074209); those elements are not compared
    (RECIPROCAL_FLUSHED_UNCHECKED), the others are."""
    x = np.array([1.7014117331926443e38, 7.0], np.float32)
    y = np.array([1.7014117331926443e38, 2.0], np.float32)
    sample = _sample(x, y, captured=[1])
    if name == "floor_divide":
        assert run_compiled(OPS[name], sample).tolist() == [0.0, 3.0]
    check_op(OPS[name], sample)
    assert name in RECIPROCAL_FLUSHED_UNCHECKED


def test_the_flushed_reciprocal_is_accepted_only_where_it_is_subnormal():
    x = np.array([-F32_MAX, 3.0], np.float32)
    # A divisor of the result's own shape is divided, not multiplied by its reciprocal.
    same_shape = _sample(x, np.array([-F32_MAX, -F32_MAX], np.float32))
    assert flushed_reciprocal_product(same_shape, run_eager(OPS["divide"], same_shape)) is None
    assert run_compiled(OPS["divide"], same_shape).tolist() == [1.0, -0.0]
    # A normal reciprocal: nothing accepted.
    normal = _sample(x, np.array(2.0**125, np.float32))
    assert flushed_reciprocal_product(normal, run_eager(OPS["divide"], normal)) is None
    # Mixed rows: only the row whose divisor has a subnormal reciprocal may differ.
    rows = _sample(np.array([[F32_MAX], [8.0]], np.float32), np.array([[F32_MAX], [4.0]], np.float32)[:, :1].T)
    expected = run_eager(OPS["divide"], rows)
    accepted = flushed_reciprocal_product(rows, expected)
    assert accepted[:, 0].tolist() == [0.0, 0.0] and accepted[:, 1].tolist() == expected[:, 1].tolist()


def test_division_keeps_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, F32_MAX, 3.0], np.float32)
    for divisor in (np.inf, -np.inf, np.nan, F32_MAX, -F32_MAX, 2.0**126, 0.0, -0.0):
        check_op(OPS["divide"], _sample(x, np.array(divisor, np.float32)))


def test_index_add_of_a_zero_update_turns_negative_zero_positive():
    """-0.0 + 0.0 * 0.5 is +0.0 (NumPy's add.at); XLA dropped the scatter-add of the folded
    constant zeros, keeping -0.0 (index_add-float32 with alpha=0.0, seed 123 under dev)."""
    x = np.array([[[5.25, 2.75, -0.0, -1.75, 5.75]]], np.float32)
    index = np.array([0], np.int32)
    for source, alpha in ((np.full((1, 1, 5), 0.5, np.float32), 0.0), (np.zeros((1, 1, 5), np.float32), 1)):
        sample = _sample(x, index, source, captured=[2], axis=0, alpha=alpha)
        actual = run_compiled(OPS["index_add"], sample)
        assert not np.signbit(actual[0, 0, 2])
        check_op(OPS["index_add"], sample)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("captured", [(0, 1, 2), (0, 1)], ids=["all-captured", "source-input"])
def test_index_add_onto_constant_zeros_adds_the_zero_updates(dtype, captured):
    """+0.0 + (-4.6 * 0.0) is +0.0; XLA turned the scatter-add onto a captured zero operand
    into its updates, -0.0 (index_add-float16, seed 340104334)."""
    x = np.zeros((1, 1, 3), dtype)
    source = np.array([[[-4.60546875, -9.1796875, -9.671875]]], dtype)
    sample = _sample(x, np.array([0], np.int32), source, captured=captured, axis=1, alpha=0.0)
    assert not np.signbit(run_compiled(OPS["index_add"], sample)).any()
    check_op(OPS["index_add"], sample)


def test_a_subnormal_constant_is_flushed_where_the_same_input_is_not():
    """XLA:CPU folds a bfloat16 subnormal captured constant to 0 but keeps the same value
    given as an input, so c != x is True (not_equal-bfloat16, seed 123 under dev). The
    checker accepts NumPy's result with only the constants flushed; without that
    alternative this fails."""
    sub = np.array(9.183549615799121e-41, BF16)
    sample = _sample(sub, np.array([sub], BF16), captured=[0])
    assert run_eager(OPS["not_equal"], sample).tolist() == [False]
    assert run_compiled(OPS["not_equal"], sample).tolist() == [True]  # XLA's behaviour, documented
    check_op(OPS["not_equal"], sample)


def test_a_float16_subnormal_is_kept_where_a_bfloat16_one_is_flushed():
    """float16 / bfloat16 computes in float32: XLA:CPU keeps the float16 subnormal -5.96e-8
    (normal in float32) and flushes the bfloat16 one 1.17e-38 (subnormal in float32 too), so
    the quotient is -inf; NumPy gives -5.1e30, and with both flushed it would be NaN
    (divide-float16, seed 123). The check accepts the float32-width flush."""
    x = np.array([-5.960464477539063e-08, 2.0], np.float16)
    y = np.array([1.1663108012064884e-38, 4.0], BF16)
    sample = _sample(x, y)
    assert run_compiled(OPS["divide"], sample).tolist()[0] == -np.inf
    check_op(OPS["divide"], sample)
    check_op(OPS["multiply"], sample)
    check_op(OPS["add"], sample)


def test_conv_transpose_with_a_kernel_larger_than_its_input_compiles():
    """XLA's simplifier swaps the operands of a convolution whose kernel reaches further
    than its (stride-dilated) input and, with a base dilation, built an invalid one: XLA
    aborted the process (Check failed in algebraic_simplifier.cc; conv_transpose2d-float32,
    seed 2125780374). The rule now dilates such an input with interior padding."""
    x = np.array([[[[7.0], [9.375], [6.5625]], [[-0.625], [-6.625], [-9.75]]]], np.float32)
    w = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 2, 2, 3)
    attrs = {"stride": 2, "padding": (1, 1), "dilation": (1, 2), "output_padding": [0, 1], "groups": 1}
    check_op(OPS["conv_transpose2d"], _sample(x, w, **attrs))
    check_op(OPS["conv_transpose2d"], _sample(x, w, captured=[1], **attrs))


def test_conv_transpose_with_a_kernel_reaching_further_in_one_dimension_compiles():
    """Seed 308871127 (conv_transpose2d-float64, the worker aborted as above): the kernel
    reaches further than the dilated input in the second spatial dimension only (4 < 5)
    while the products of the sizes (28 > 10) did not call for the explicit dilation."""
    x = np.linspace(-3, 3, 16).reshape(1, 2, 4, 2)
    w = np.linspace(-1, 1, 12).reshape(2, 1, 2, 3)
    attrs = {"stride": (2, 3), "padding": (1, 1), "dilation": (1, 2), "output_padding": (0, 2), "groups": 1}
    check_op(OPS["conv_transpose2d"], _sample(x, w, captured=[1], **attrs))
    check_op(OPS["conv_transpose2d"], _sample(x, w, **attrs))


def test_the_sign_of_zero_is_checked_on_zeros_only():
    """layer_norm-bfloat16 (seed 1073022860): -3.6e-08 where NumPy's x - mean is exactly 0
    failed as a wrong sign of zero; it is a rounding difference, within atol. A -0.0 for
    +0.0 still fails."""
    from hlotrace.testing.tolerances import mismatches, tolerance_for

    tolerance = tolerance_for("layer_norm", np.dtype(BF16))
    expected = np.array([0.0, 0.0, -0.0], BF16)
    assert mismatches(np.array([-3.63216e-08, 1e-3, 0.0], BF16), expected, tolerance).tolist() == [False, False, True]
    assert mismatches(np.array([-0.0, 0.0, -0.0], BF16), expected, tolerance).tolist() == [True, False, False]


def test_a_convolution_of_signed_zeros_may_give_either_zero():
    """Seed 193546040 (ci): conv1d-float16 of [2.75, 0.25] with -0.0 weights is -0.0 compiled
    (XLA starts its accumulator at the first product) and +0.0 from NumPy; the tolerance
    table's UNSIGNED_ZEROS row for the convolutions accepts either (this fails without it)."""
    from hlotrace.ops import OPS
    from hlotrace.testing.check import check_op
    from hlotrace.testing.sampling import OpSample

    x = np.array([[[2.75], [0.25]]], np.float16)
    w = np.array([[[-0.0], [-0.0]], [[0.0], [-0.0]]], np.float16)
    sample = OpSample((x, w), {"stride": 1, "padding": (0,), "dilation": 1, "groups": 1})
    check_op(OPS["conv1d"], sample)


def test_an_average_pool_gradient_that_cancels_may_give_either_zero():
    """Seed 479480147 (ci): avg_pool2d_backward-float16 where a window's ct / 9 terms cancel:
    NumPy's float32 sum leaves -1e-8, -0.0 in float16, XLA's order an exact +0.0. The
    UNSIGNED_ZEROS row accepts either (this fails without it)."""
    ct = np.zeros((1, 1, 2, 3), np.float16)
    ct[0, 0] = [[-4.5, 2.375, 0.9375], [-6.4375, 4.0625, 3.5625]]
    attrs = {"kernel_size": 3, "stride": 1, "padding": 1, "input_size": (2, 3), "count_include_pad": True}
    sample = _sample(ct, **attrs)
    eager, compiled = run_eager(OPS["avg_pool2d_backward"], sample), run_compiled(OPS["avg_pool2d_backward"], sample)
    assert eager[0, 0, 0, 1] == 0 and compiled[0, 0, 0, 1] == 0
    assert np.signbit(eager[0, 0, 0, 1]) != np.signbit(compiled[0, 0, 0, 1])
    check_op(OPS["avg_pool2d_backward"], sample)


def test_the_sign_of_a_flushed_subnormal_constant_is_zero():
    """Seed 454817280 (ci): sign-float32 of a captured -1.4e-45 gave -0.0 compiled (XLA:CPU
    compared the unflushed constant with zero but took the sign of the flushed -0.0); NumPy
    gives -1 unflushed and +0.0 flushed. The rule now maps any zero sign to +0.0."""
    x = np.array([-1.4e-45, 1.1754942e-38, -0.0, 0.0, 2.0, np.nan], np.float32)
    for captured in ((), (0,)):
        result = run_compiled(OPS["sign"], _sample(x, captured=captured))
        assert not np.signbit(result[2]) and not np.signbit(result[3])
        check_op(OPS["sign"], _sample(x, captured=captured))


@pytest.mark.parametrize("x_value", [0.0, -0.0])
def test_batch_norm_of_a_constant_zero_input_keeps_ieee_signs(x_value):
    """Seed 454817280 (ci): batch_norm_inference-bfloat16 of all-zero x with mean [0, -0],
    both captured: XLA folds 0 - mean into -mean, -0.0 where IEEE (and NumPy) give +0.0."""
    x = np.full((2, 2, 1, 2), x_value, BF16)
    mean = np.array([0.0, -0.0], BF16)
    var = np.array([0.5, 0.328125], BF16)
    for captured in ((0, 1), (0,), ()):
        sample = _sample(x, mean, var, captured=captured, eps=0.001)
        expected = run_eager(OPS["batch_norm_inference"], sample)
        result = run_compiled(OPS["batch_norm_inference"], sample)
        assert np.array_equal(np.signbit(result), np.signbit(expected)), (captured, result, expected)


def test_sampled_region_bodies_use_no_op_whose_zero_sign_is_unspecified():
    """Seed 2905549118 (ci): switch-float64's sampled branch took F.maximum(0.0, -0.0), +0.0
    compiled and -0.0 from NumPy; maximum's check forgives that (UNSIGNED_ZEROS), the
    switch's check does not. Sampled bodies now spell the maximum as a select."""
    from hlotrace.ops.control_flow_grad import _random_body, _region
    from hlotrace.ops.registry import Aval
    from hlotrace.testing.tolerances import UNSIGNED_ZEROS

    aval = Aval((2,), np.dtype(np.float64))
    for seed in range(40):
        region = _region(_random_body(np.random.default_rng(seed)), [aval, aval])
        assert not [r.op for r in region.records if r.op in UNSIGNED_ZEROS], seed


def test_a_subnormal_literal_is_kept_where_a_subnormal_input_is_flushed():
    """Seed 2550820504 (ci): logical_xor(1.4e-45 as an input, 1.4e-45 as a Python scalar) is
    True compiled: XLA:CPU flushes the input at run time and folds the literal unflushed.
    NumPy gives False with both kept or both flushed; the check also accepts NumPy's result
    with only the array inputs flushed (this fails without it)."""
    tiny = 1.401298464324817e-45
    sample = _sample(np.array(tiny, np.float32), tiny)
    assert bool(run_compiled(OPS["logical_xor"], sample)) is True
    assert bool(run_eager(OPS["logical_xor"], sample)) is False
    check_op(OPS["logical_xor"], sample)


def test_a_scan_over_captured_zeros_keeps_ieee_signs():
    """Seed 3086529418 (ci): scan of carry * 0.5 + x over captured constant xs of zeros, from
    a carry of -5e-324: IEEE gives (-0.0) + 0.0 = +0.0, but XLA folded the slice of captured
    zeros and dropped the + 0.0 (the add rule's guard cannot see a constant inside the loop),
    keeping -0.0. Float constants enter loops behind a barrier now."""
    import hlotrace as ht
    import hlotrace.functional as F
    from hlotrace.jit import xla_trace

    zeros = ht.tensor(np.zeros((1, 4), np.float64))

    def run(carry):
        out, _ = F.scan(lambda c, x: (c * 0.5 + x, ()), carry, xs=zeros)
        return out

    carry = ht.tensor(np.array([-5e-324, -2.5, np.inf, -1.25]))
    traced = xla_trace(run, capture_as_const=True)
    traced(carry)
    compiled, eager = traced(carry).numpy(), run(carry).numpy()
    assert np.signbit(eager[0]) == False and eager[0] == 0  # noqa: E712  (IEEE: +0.0)
    np.testing.assert_array_equal(np.signbit(compiled), np.signbit(eager))
    np.testing.assert_array_equal(compiled, eager)


@pytest.mark.parametrize("captured", [(0, 2), (0,)], ids=["both-captured", "source-input"])
def test_scatter_add_onto_a_constant_zero_adds_a_negative_zero_update(captured):
    """+0.0 scatter-added -0.0 is +0.0; XLA turned the scatter-add onto a captured zero
    operand into its update, -0.0 (scatter_add-float64, seed 3592493969, both captured; the
    same as index_add's, whose guard scatter_add now shares). Without the guard the
    source-input case fails here."""
    sample = _sample(
        np.array([0.0], np.float64), np.array([-1], np.int32), np.array([-0.0], np.float64), captured=captured, axis=0
    )
    assert not np.signbit(run_compiled(OPS["scatter_add"], sample)).any()
    check_op(OPS["scatter_add"], sample)


def test_power_of_a_subnormal_python_scalar_base_is_not_compared():
    """dev profile, seed 4264486348: power(1.166e-38, x) in bfloat16 (the base a Python
    scalar, subnormal in bfloat16 and float32) is 4.9e27 at x = -0.613 compiled, 1.8e23 in
    NumPy: XLA:CPU's power of a subnormal base is off whether the base is a literal or an
    input. SUBNORMAL_INPUTS_UNCHECKED (power) leaves elements computed from a subnormal input
    uncompared; a subnormal Python-scalar operand feeds every element (it was not counted)."""
    from hlotrace.testing.tolerances import SUBNORMAL_INPUTS_UNCHECKED

    x = np.array([[-0.613281, 2.0], [1.1663108012064884e-38, -0.0]], BF16)
    sample = _sample(1.1663108012064884e-38, x)
    compiled = run_compiled(OPS["power"], sample).astype(np.float64)
    eager = run_eager(OPS["power"], sample).astype(np.float64)
    assert compiled[0, 0] > 1e27 and eager[0, 0] < 1e24  # the disagreement itself
    check_op(OPS["power"], sample)
    assert "power" in SUBNORMAL_INPUTS_UNCHECKED
    # A normal scalar base is still compared: power(0.5, x) agrees.
    check_op(OPS["power"], _sample(0.5, x))


def test_a_bfloat16_subnormal_tested_against_zero_is_kept_where_a_float32_one_is_flushed():
    """ci seed 3659024819: logical_xor(float32 1.1754942e-38, bfloat16 -9.18e-41) is True
    compiled (XLA:CPU flushes the float32 subnormal where it tests it against zero, keeps
    the bfloat16 one), False in NumPy with both kept or both flushed. The check accepts the
    result with only the non-bfloat16 operands flushed."""
    x = np.array([1.1754942e-38, 1.0, 0.0, 1.1754942e-38], np.float32)
    y = np.array([-9.18355e-41, -9.18355e-41, -9.18355e-41, 1.0], BF16)
    sample = _sample(x, y)
    assert run_compiled(OPS["logical_xor"], sample).tolist() == [True, False, True, True]
    assert run_eager(OPS["logical_xor"], sample).tolist() == [False, False, True, False]
    for name in ("logical_xor", "logical_and", "logical_or", "not_equal"):
        check_op(OPS[name], sample)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_half_cumsum_of_a_cast_input_may_skip_rounding_the_input_as_xla_gpu_does(monkeypatch, reverse):
    """make test-gpu on an H100 (gpu profile, seed 0): the bfloat16 cumsum of an int32 input
    gave 98 where the reference gives 97: XLA:GPU converts the int32 input to float32 directly
    for the float32 scan, the reference rounds each input to bfloat16 first (-355 to -356).
    UNROUNDED_CASTS widens such results by eps * the prefix sum of |x|; a wrong scan still fails.
    (Replayed here with XLA:GPU's values: XLA:CPU rounds the input as the reference does.)"""
    from hlotrace.testing import check
    from hlotrace.testing.tolerances import UNROUNDED_CASTS

    x = np.array([[452, 1, -355, 0, 8], [3, 554, -274, 226, 8], [-1, 540, -8, -571, -2]], np.int32)
    sample = _sample(x, axis=1, dtype=np.dtype(BF16), reverse=reverse)
    scan = (lambda a: np.flip(np.cumsum(np.flip(a, 1), 1), 1)) if reverse else (lambda a: np.cumsum(a, 1))
    gpu = scan(x.astype(np.float32)).astype(BF16)
    assert not np.array_equal(gpu, run_eager(OPS["cumsum"], sample))  # the disagreement itself
    assert "cumsum" in UNROUNDED_CASTS
    monkeypatch.setattr(check, "run_compiled", lambda op, sample, platform=None: gpu)
    check_op(OPS["cumsum"], sample)
    shifted = np.roll(gpu, 1 if not reverse else -1, axis=1)  # an exclusive-looking scan
    for wrong in (shifted, scan(np.flip(x, 1).astype(np.float32)).astype(BF16), gpu + BF16(4)):
        monkeypatch.setattr(check, "run_compiled", lambda op, sample, platform=None, w=wrong: w)
        with pytest.raises(AssertionError, match="cumsum"):
            check_op(OPS["cumsum"], sample)
