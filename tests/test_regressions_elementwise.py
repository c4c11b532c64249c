"""Minimal cases for elementwise mismatches found between XLA and NumPy, and special values."""

import numpy as np

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.jit import xla_trace
from hlotrace.ops import OPS
from hlotrace.testing.check import check_op
from hlotrace.testing.strategies import OpSample
from hlotrace.testing.tolerances import EXACT, assert_close


def _compiled(fn, *arrays):
    traced = xla_trace(fn)
    tensors = [ht.tensor(a) for a in arrays]
    eager = traced(*tensors).numpy()
    return traced(*tensors).numpy(), eager


def test_bool_divided_by_false_is_nan():
    # XLA's simplifier turned convert(pred) / 0 into select(pred, inf, 0): False/False gave 0.
    compiled, eager = _compiled(lambda x: F.divide(x, False), np.array([False, True]))
    np.testing.assert_array_equal(np.isnan(compiled), [True, False])
    np.testing.assert_array_equal(compiled, eager)


def test_where_does_not_leak_inf_or_nan_from_the_unselected_branch():
    # MegEngine's where as mask*x + (1-mask)*y turns inf in the other branch into NaN.
    cond = np.array([True, False, True])
    x = np.array([1.0, np.inf, np.nan], "float32")
    y = np.array([np.inf, 2.0, 3.0], "float32")
    compiled, eager = _compiled(F.where, cond, x, y)
    np.testing.assert_array_equal(compiled, [1.0, 2.0, np.nan])
    np.testing.assert_array_equal(compiled, eager)


def test_signed_zero_and_infinities_follow_numpy():
    x = np.array([-0.0, 0.0, -np.inf, np.inf, -1.0], "float32")
    for fn in (F.sqrt, F.log, F.negative, F.abs, F.exp, F.rsqrt, F.tanh):
        compiled, eager = _compiled(fn, x)
        assert_close(compiled, eager, EXACT._replace(rtol=1e-6, atol=0.0), what=fn.__name__)
        finite_zero = (eager == 0) & np.isfinite(eager)
        np.testing.assert_array_equal(np.signbit(compiled[finite_zero]), np.signbit(eager[finite_zero]), fn.__name__)


def test_nan_comparisons_are_ieee():
    x = np.array([np.nan, 1.0], "float32")
    for fn in (F.equal, F.not_equal, F.less, F.greater_equal):
        compiled, eager = _compiled(lambda a, f=fn: f(a, a), x)
        np.testing.assert_array_equal(compiled, eager)
    assert _compiled(lambda a: F.not_equal(a, a), x)[0].tolist() == [True, False]


def test_zero_size_broadcasting():
    compiled, eager = _compiled(F.add, np.zeros((0, 3), "float32"), np.ones((1, 3), "int32"))
    assert compiled.shape == eager.shape == (0, 3) and compiled.dtype == np.float32


def test_adding_a_zero_constant_turns_negative_zero_positive():
    # XLA folds x + 0.0 to x, keeping -0.0; IEEE (and NumPy) give +0.0.
    x = np.array([-0.0, 0.0, 1.0], "float32")
    for fn in (lambda t: t + 0.0, lambda t: 0 + t, lambda t: t + np.zeros((2, 3), "float32"), lambda t: t + False):
        compiled, eager = _compiled(fn, x)
        assert not np.signbit(eager).any()
        np.testing.assert_array_equal(np.signbit(compiled), np.signbit(eager))
    # -0.0 is the true additive identity: x + (-0.0) keeps -0.0, also compiled.
    compiled, _ = _compiled(lambda t: t + -0.0, x)
    np.testing.assert_array_equal(np.signbit(compiled), [True, False, False])


def test_subnormal_inputs_compare_as_zero_on_xla_cpu_or_as_numpy():
    # XLA:CPU runs with denormals-are-zero; the property check accepts either answer.
    check_op(OPS["greater"], OpSample((np.array([1e-45, -1e-45, 0.0], "float32"), 0.0)))


def test_subtracting_a_negative_zero_constant_turns_negative_zero_positive():
    # XLA folds x - (-0.0) to x, keeping -0.0; IEEE: -0.0 - (-0.0) = +0.0.
    x = np.array([-0.0, 0.0, 2.0], "float32")
    compiled, eager = _compiled(lambda t: t - -0.0, x)
    np.testing.assert_array_equal(np.signbit(eager), [False, False, False])
    np.testing.assert_array_equal(np.signbit(compiled), np.signbit(eager))


def test_asinh_of_a_captured_negative_zero_keeps_its_sign():
    # Fuzzer (seed 3982831695, session seed 13): XLA's constant folder gives asinh(-0.0) = +0.0
    # for a splat constant (at run time it keeps the sign). The rule returns a zero as itself.
    for dtype in ("float16", "float32", "float64"):
        c = ht.tensor(np.full((1, 3), -0.0, dtype))
        step = xla_trace(lambda: F.asinh(c), capture_as_const=True)
        eager, compiled = step().numpy(), step().numpy()
        assert np.signbit(eager).all(), dtype
        np.testing.assert_array_equal(np.signbit(compiled), np.signbit(eager), err_msg=dtype)
