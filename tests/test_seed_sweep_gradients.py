"""Minimal cases of what the seed sweep (issue 24, `make test-seeds`) found in the gradient
checks (finite differences and the compiled gradient), with the exact values, so none
depends on a seed; the property-check cases are in tests/test_seed_sweep_regressions.py.
"""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
from hlotrace.ops import OPS
from hlotrace.testing.sampling import OpSample

BF16 = ml_dtypes.bfloat16


def _sample(*args, captured=(), **attrs):
    return OpSample(tuple(args), attrs, frozenset(captured))


def test_finite_differences_skip_only_the_non_finite_outputs():
    """rsqrt's fd gradient test found nothing to compare under seed 2297100651: a single
    rsqrt(0) = inf or rsqrt(-1) = NaN in the sample made sum(w * y) non-finite for every
    step, so every element was skipped. Non-finite outputs now get no weight."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    x = np.array([5.0, 0.0, -1.0, 0.25], np.float16)
    assert check_vjp_fd(OPS["rsqrt"], _sample(x), np.random.default_rng(0)) >= 2  # 5.0 and 0.25 (before: 0)
    assert check_vjp_fd(OPS["log"], _sample(x), np.random.default_rng(0)) >= 2


def test_compiled_gradient_flushes_a_subnormal_attribute_as_xla_does():
    """clip(x=-5e-324, max=-5e-324) in float64: XLA:CPU compares the flushed -0.0 <= -0.0
    (the gradient passes), eager compared -0.0 <= -5e-324 (it did not): clip's compiled
    gradient, seed 3067397598. The check now flushes subnormal float attributes too."""
    from hlotrace.testing.gradcheck import check_compiled_grad

    sample = _sample(np.array(-5e-324), min=-7.100545831456593, max=-5e-324)
    assert check_compiled_grad(OPS["clip"], sample, np.random.default_rng(0))


def test_a_gradient_computed_in_a_narrower_result_dtype_uses_its_tolerance():
    """Seed 3552269493 (ci): cumsum of 4,133 float32 values with dtype=float16; its gradient
    is a reverse cumsum of the float16 cotangent, whose sums XLA and NumPy round in another
    order (32.19 vs 32.22): the compiled-gradient check now uses the coarser of the input's
    and the result's dtype rows (it used float32's)."""
    from hlotrace.testing.gradcheck import check_compiled_grad

    values = np.array([2.75, 0.25, -9.1875, -4.625, -8.5, -3.875], np.float32)
    x = np.random.default_rng(0).choice(values, 4133)
    sample = _sample(x, reverse=False, dtype=np.dtype("float16"), axis=-1)
    assert check_compiled_grad(OPS["cumsum"], sample, np.random.default_rng(1))


def test_the_gradient_of_a_variance_of_large_values_is_checked_at_their_scale():
    """Seed 2720010352 (ci): var over axis 0 of float32 values near -1000 (std ~6): the
    gradient 2 (x - mean) / n cancels, and compiled and eager means differ by eps * 1000, so
    gradients near 0.07 differed by 4e-5 (rtol 8e-6). CANCELLING_GRADIENTS scales the
    check's atol with max|x| along the reduced axis (this fails without the row)."""
    from hlotrace.testing.gradcheck import check_compiled_grad
    from hlotrace.testing.tolerances import CANCELLING_GRADIENTS

    x = np.array(
        [
            [[[-997.25, np.inf], [-1004.625, -1003.875], [-1009.1875, -1008.5]],
             [[-1009.6875, -1006.5], [-993.6875, -997.0], [-991.75, -999.9375]]],
            [[[-997.875, -990.5625], [-995.375, -997.375], [-999.125, -998.8125]],
             [[-991.25, -1004.4375], [-993.6875, -996.5625], [-1010.0, -1002.125]]],
            [[[-992.8125, -998.9375], [-1009.375, -994.6875], [-995.375, -993.0625]],
             [[-1006.5, -1008.25], [-992.6875, -1009.5625], [-np.inf, -1008.4375]]],
        ],
        np.float32,
    )  # fmt: skip
    assert "var" in CANCELLING_GRADIENTS
    assert check_compiled_grad(OPS["var"], _sample(x, axis=0, keepdims=True, ddof=0), np.random.default_rng(0))


def test_finite_differences_do_not_step_across_a_pole():
    """Seed 1636961270 (ci): divide of int64 values up to 9e18 by bfloat16 values, one of
    them -9.2e-41: the step (1e-6) straddled y = 0 and, with the sum dominated by 1e56-sized
    terms, the central difference came out 0 against the VJP's -6.5e80. Nonzero values within
    ten steps of zero are now redrawn, like huge ones (the exact sample)."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    x = np.array(
        [
            [[[3, 764824518918699310], [-5, -1426169044194109711], [-8700966310982802676, -9]]],
            [[[3147464910579887016, -7], [7, 3], [9, 8869846436000548159]]],
            [[[-9007199254740993, 10], [5, 3], [2147483647, 4085738726870942741]]],
            [[[9, -3500419557471072744], [-1, 7184782400059388739], [-10, -2]]],
            [[[1319492481107666385, -9007199254740993], [-10, -2990010140291132350], [5, 7]]],
        ],
        np.int64,
    )
    y = (
        np.array(
            [
                -1.1754943508222875e-38,
                -7.125,
                -np.inf,
                0.0,
                -1.53125,
                0.0,
                -1.8125,
                0.9921875,
                -9.4375,
                5.0625,
                0.76171875,
                -3.40625,
                5.78125,
                -3.9375,
                -16777216.0,
                -7.3125,
                1.1754943508222875e-38,
                -5.9375,
                0.5,
                1.6947656946257677e38,
                -np.inf,
                -1.1754943508222875e-38,
                9.625,
                9.25,
                1.1663108012064884e-38,
                0.82421875,
                -4.46875,
                -6.78125,
                9.375,
                0.322265625,
                -7.6875,
                2.46875,
                -9.183549615799121e-41,
                2.265625,
                3.3895313892515355e38,
                0.0,
                -9.183549615799121e-41,
                1.0078125,
                1.1663108012064884e-38,
                -16777216.0,
                7.0625,
                1.859375,
                -4.8125,
                6.8125,
                0.189453125,
                0.2177734375,
                5.0625,
                -7.03125,
                6.40625,
                np.inf,
                5.75,
                16777216.0,
                1.0078125,
                -6.1875,
                -8.375,
                0.5,
                7.21875,
                7.53125,
                -1.1754943508222875e-38,
                -4.53125,
                -9.875,
                1.6947656946257677e38,
                4.40625,
                -np.inf,
                -4.375,
                16777216.0,
                2.78125,
                -1.1754943508222875e-38,
                9.25,
                -7.0,
                -0.35546875,
                7.90625,
                -1.546875,
                1.7890625,
                0.0,
                3.46875,
                8.375,
                9.183549615799121e-41,
                7.71875,
                3.203125,
                0.5,
                5.375,
                -5.78125,
                6.625,
                -8.75,
                0.0,
                -6.71875,
                -2.5,
                0.5,
                3.828125,
            ],
            np.float64,
        )
        .reshape((5, 3, 3, 2))
        .astype(BF16)
    )
    assert check_vjp_fd(OPS["divide"], _sample(x, y), np.random.default_rng(0)) > 0


def test_finite_differences_skip_a_jump():
    """Seed 2981992792 (ci): adaptive_max_pool2d_backward of an all-zero x: nudging one zero
    makes it the maximum of every window holding it, so f jumps there and the central
    difference measured 1.1e7 where the VJP (rightly, almost everywhere) gives 0. Such an
    element is now recognised as a jump (the difference with an eighth of the step is not the
    same) and skipped; a smooth element whose VJP is wrong still fails."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    x = np.zeros((2, 2, 2, 3), np.float16)
    ct = (
        np.array(
            [
                7.3125,
                0.0625,
                np.nan,
                0.875,
                -0.375,
                np.nan,
                -4.3125,
                -2.875,
                -2.0,
                -1.1875,
                np.nan,
                -0.0,
                -1.875,
                0.6875,
                7.75,
                np.inf,
                -1.25,
                4.875,
                4.1875,
                3.375,
                3.5625,
                0.0,
                1.0,
                -0.0,
                -4.375,
                -0.5,
                -6.5,
                5.5625,
            ],
            np.float64,
        )
        .reshape((2, 2, 1, 7))
        .astype(np.float16)
    )
    check_vjp_fd(OPS["adaptive_max_pool2d_backward"], _sample(x, ct), np.random.default_rng(100000000))


def test_the_gradient_of_a_long_bfloat16_cumprod_is_checked_at_its_products_scale():
    """Seed 1050692632 (ci): the compiled gradient of a bfloat16 cumprod of 4,112 values (±1
    and a few others) was 0.14 away from the eager one at elements near 0.2. Its VJP sums
    ct * out over the scan; XLA:CPU keeps the bfloat16 products in float32 (it drops the
    convert round trip), NumPy rounds each first. ROUNDED_PRODUCT_GRADIENTS bounds the
    difference by eps * sum|ct * out| / |x| (this case fails without the row)."""
    from hlotrace.testing import gradcheck

    rng = np.random.default_rng(1)
    x = rng.choice(np.array([1.0, -1.0]), 4112)
    x[[808, 2289, 2700]] = rng.choice([1.25, -1.5, 1.75, 2.5, 3.5, -2.75, 3.25], 3)
    sample = _sample(x.astype(BF16), reverse=False, axis=0)
    assert "cumprod" in gradcheck.ROUNDED_PRODUCT_GRADIENTS
    assert gradcheck.check_compiled_grad(OPS["cumprod"], sample, np.random.default_rng(1))


def test_finite_differences_of_an_empty_output_skip_a_non_finite_vjp():
    """Seed 3594143097 (ci): batch_norm_inference of an empty x (1, 4, 0) with a subnormal
    var, which finite differences redraw (here to a value where var + eps < 0): the VJP for
    mean is an empty sum times NaN (rsqrt of a negative), the central difference 0. With
    outputs, that channel's NaN outputs mark the element as not compared; with none, a
    non-finite VJP element is skipped the same way (this rng failed before)."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    sample = _sample(
        np.zeros((1, 4, 0), BF16),
        np.array([-3.6875, -7.34375, -7.75, 5.0], BF16),
        np.array([1.1754943508222875e-38, 4.75, 4.3125, -0.0], BF16),
        eps=0.001,
    )
    check_vjp_fd(OPS["batch_norm_inference"], sample, np.random.default_rng(4))


def test_the_compiled_gradient_at_a_subnormal_python_scalar_may_see_it_flushed():
    """Seed 2198290105 (ci): minimum(x, -9.2e-41) with x = +0.0: XLA:CPU flushes the literal
    where it meets the run-time x, so they tie and the gradient goes to x (w), where NumPy's
    eager gradient goes to the scalar (0). The compiled-gradient check also accepts the eager
    gradient with the subnormal scalar flushed (this fails without it)."""
    from hlotrace.testing.gradcheck import check_compiled_grad

    x = np.array([[-0.0, -9.1875, np.nan, 6.25, 0.0], [2.125, 4.59375, 0.99609375, 8.6875, np.nan]], BF16)
    assert check_compiled_grad(OPS["minimum"], _sample(x, -9.183549615799121e-41), np.random.default_rng(0))


def test_the_compiled_gradient_of_power_at_a_subnormal_scalar_base_is_taken_at_zero():
    """ci seed 3965948841: the gradient of sum(w * power(1.166e-38, y)) for y = -0.77 in
    bfloat16 is -3.1e36 compiled, -8.7e30 eager (XLA:CPU's power of a subnormal base, see
    test_power_of_a_subnormal_python_scalar_base_is_not_compared). For the ops of
    SUBNORMAL_INPUTS_UNCHECKED the compiled-gradient check flushes a subnormal Python-scalar
    operand on both sides, as it does array operands."""
    from hlotrace.testing.gradcheck import check_compiled_grad

    sample = _sample(1.1663108012064884e-38, np.array([-0.0, 1.1663108012064884e-38, -0.76953125], BF16))
    assert check_compiled_grad(OPS["power"], sample, np.random.default_rng(0))


def test_a_tie_whose_ends_have_equal_weights_is_checked_beside_the_point():
    """Seed 3099572356 (ci): a float16 descending sort with 675 elements tied at 8.40625.
    Nudged up, a tied element moves to the group's top, nudged down to its bottom, so the
    one-sided differences are those two places' weights (-0.6074 and -0.6077, equal within
    the kink rule by chance) and the VJP is the weight at the element's own place (-0.242).
    Here the same with three ties and weights drawn alike by rng 3620: the check now asks
    the VJP a step away on each side, which matches a one-sided difference."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    x = np.full(3, 2.0, np.float16)
    sample = _sample(x, axis=0, descending=True)
    w = np.random.default_rng(3620).standard_normal(3)
    assert abs(w[0] - w[2]) < 1e-3 * (abs(w[0]) + abs(w[2])) < abs(w[1] - w[0])  # the chance that hid the tie
    assert check_vjp_fd(OPS["sort"], sample, np.random.default_rng(3620)) == 3


def test_a_wrong_gradient_at_a_tie_still_fails():
    """The rule above accepts a VJP only where the VJP a step away matches a difference: a
    sort VJP that sends every cotangent to the wrong place fails on the same tie."""
    from hlotrace.testing.gradcheck import check_vjp_fd

    sort = OPS["sort"]
    wrong = dataclasses.replace(sort, vjp=lambda *a, **k: [2 * g for g in sort.vjp(*a, **k)])
    with pytest.raises(AssertionError):
        check_vjp_fd(wrong, _sample(np.full(3, 2.0, np.float16), axis=0, descending=True), np.random.default_rng(3620))
