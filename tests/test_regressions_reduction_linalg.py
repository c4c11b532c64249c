"""Minimal cases for reductions and matmul: each guards a mismatch found while writing them
or a semantic choice the property tests cannot reach (their samples are small)."""

import ml_dtypes
import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.ops import OPS
from hlotrace.testing.check import check_op, run_compiled, run_eager
from hlotrace.testing.strategies import OpSample


def _reduce(name, x, axis=None, keepdims=False):
    return OpSample((x,), {"axis": axis, "keepdims": keepdims})


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_large_max_min_propagate_nan(name, dtype, axis):
    # XLA:CPU sends float max/min reductions of 4096+ elements to YNNPACK, which skips NaN
    # (jax.numpy.max returns 0.0 here); the rule adds an explicit any-NaN reduction.
    x = np.zeros((2, 4096), dtype)
    x[1, 3] = np.nan
    check_op(OPS[name], _reduce(name, x, axis))


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_over_empty_axis_is_an_error(name):
    # NumPy: "zero-size array to reduction operation maximum which has no identity".
    with pytest.raises(OpError, match="axis 0 of length 0"):
        getattr(F, name)(ht.tensor(np.zeros((0, 3), np.float32)), axis=0)
    with pytest.raises(OpError, match="no identity"):
        getattr(F, name)(ht.tensor(np.zeros((0, 0), np.float32)), axis=0)


def test_max_over_nonempty_axis_of_empty_tensor_is_empty():
    # Only a reduced axis of length 0 is an error: (3, 0) over axis 0 gives shape (0,).
    check_op(OPS["max"], _reduce("max", np.zeros((3, 0), np.float32), 0))


def test_empty_sum_is_zero_and_empty_mean_is_nan():
    x = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(run_compiled(OPS["sum"], _reduce("sum", x, 1)), np.zeros(3, np.float32))
    assert np.isnan(run_compiled(OPS["mean"], _reduce("mean", x, 1))).all()
    assert np.isnan(run_eager(OPS["mean"], _reduce("mean", x, 1))).all()


def test_int32_sum_wraps():
    # NumPy would give int64 4 * 2**30 = 2**32; hlotrace's int32 result wraps to 0.
    x = np.full((4,), 2**30, np.int32)
    assert run_eager(OPS["sum"], _reduce("sum", x)) == 0
    check_op(OPS["sum"], _reduce("sum", x))


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_float16_sum_accumulates_in_float32(name):
    # In float16, 2048 + 1 + 1 stays 2048 (the spacing there is 2); accumulated in float32
    # the sum is 2050, which float16 holds exactly. Reference and rule must both widen.
    x = np.array([2048, 1, 1], np.float16)
    expected = {"sum": 2050.0, "mean": np.float16(2050 / 3)}[name]
    assert run_eager(OPS[name], _reduce(name, x)) == expected
    assert run_compiled(OPS[name], _reduce(name, x)) == expected


def test_bool_reductions():
    x = np.array([[True, False], [True, True]])
    assert run_compiled(OPS["sum"], _reduce("sum", x)).dtype == np.int32
    np.testing.assert_array_equal(run_compiled(OPS["max"], _reduce("max", x, 1)), [True, True])
    np.testing.assert_array_equal(run_compiled(OPS["min"], _reduce("min", x, 1)), [False, True])
    assert run_compiled(OPS["mean"], _reduce("mean", x)) == np.float32(0.75)


def test_axis_is_recorded_normalized():
    @xla_trace
    def f(x):
        return F.sum(x, axis=(-1, 0), keepdims=True)

    f(ht.tensor(np.ones((2, 3, 4), np.float32)))
    assert f.trace.records[0].attrs == {"axis": (0, 2), "keepdims": True}


def _matmul(a, b, transpose_a=False, transpose_b=False):
    return OpSample((a, b), {"transpose_a": transpose_a, "transpose_b": transpose_b})


def test_matmul_batched_transposed_example():
    # The documented example: (5,3,2,8,7)ᵀ × (1,2,9,8)ᵀ → (5,3,2,7,9), batch dims broadcast.
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 4, (5, 3, 2, 8, 7)).astype(np.float32)
    b = rng.integers(-4, 4, (1, 2, 9, 8)).astype(np.float32)
    sample = _matmul(a, b, True, True)
    assert run_eager(OPS["matmul"], sample).shape == (5, 3, 2, 7, 9)
    check_op(OPS["matmul"], sample)


def test_matmul_zero_size_contracting_dim_gives_zeros():
    sample = _matmul(np.ones((2, 3, 0), np.float32), np.ones((0, 4), np.float32))
    np.testing.assert_array_equal(run_compiled(OPS["matmul"], sample), np.zeros((2, 3, 4), np.float32))


def test_matmul_transposing_a_vector_is_a_no_op():
    a, b = np.arange(3, dtype=np.float32), np.arange(6, dtype=np.float32).reshape(3, 2)
    for flags in [(True, False), (False, False)]:
        sample = _matmul(a, b, *flags)
        np.testing.assert_array_equal(run_compiled(OPS["matmul"], sample), a @ b)


@pytest.mark.parametrize("dtype, big", [(np.float16, 2048), (ml_dtypes.bfloat16, 256)])
@pytest.mark.parametrize("transpose_a", [False, True])
def test_matmul_low_precision_accumulates_in_float32(dtype, big, transpose_a):
    # big + 1 + 1 rounds back to big at every step in dtype (the spacing there is 2), but is
    # big + 2 with a float32 accumulator. b's batch dim with a transposed 2-D a is the
    # layout where a bf16 x bf16 -> f32 dot_general crashed XLA:CPU (DotThunk::Execute).
    row = np.array([big, 1, 1, 0], dtype)
    a = np.stack([row, np.zeros(4, dtype)])
    a = a.T.copy() if transpose_a else a
    sample = _matmul(a, np.ones((3, 4, 5), dtype), transpose_a=transpose_a)
    assert (run_eager(OPS["matmul"], sample)[:, 0] == big + 2).all()
    assert (run_compiled(OPS["matmul"], sample)[:, 0] == big + 2).all()


def test_matmul_int32_wraps_and_bool_is_logical():
    a = np.array([[2**30, 2**30, 2**30, 2**30]], np.int32)
    check_op(OPS["matmul"], _matmul(a, np.ones((4, 1), np.int32)))
    assert run_compiled(OPS["matmul"], _matmul(a, np.ones((4, 1), np.int32)))[0, 0] == 0
    p = np.array([[True, False], [False, False]])
    q = np.array([[False, True], [True, True]])
    np.testing.assert_array_equal(run_compiled(OPS["matmul"], _matmul(p, q)), np.matmul(p, q))


def test_matmul_shape_errors_name_the_dims():
    with pytest.raises(OpError, match="contracting dims differ"):
        F.matmul(ht.tensor(np.ones((2, 3), np.float32)), ht.tensor(np.ones((4, 5), np.float32)))
    with pytest.raises(OpError, match="batch dims"):
        F.matmul(ht.tensor(np.ones((2, 2, 3), np.float32)), ht.tensor(np.ones((3, 3, 5), np.float32)))
    with pytest.raises(OpError, match="scalar"):
        F.matmul(ht.tensor(np.float32(2.0)), ht.tensor(np.ones((3,), np.float32)))


def test_float_sums_are_never_negative_zero():
    # NumPy starts a sum at +0.0; XLA drops the start value of a one-element sum and
    # constant-folds a sum of -0.0s to -0.0.
    @xla_trace(capture_as_const=True)
    def sums(x):
        return F.sum(x, axis=0), F.mean(x, axis=()), F.sum(constant), F.mean(constant, axis=0)

    constant = ht.tensor(np.array([-0.0, -0.0], "float32"))
    x = ht.tensor(np.full((1, 3), -0.0, "float32"))
    sums(x)
    for result in sums(x):
        assert not np.signbit(result.numpy()).any()


EMPTY_REDUCTIONS = {
    "sum-float32": lambda x, w, y: x.sum() + y,
    "sum-axis-int32": lambda x, w, y: x.astype("int32").sum(axis=0) + y,
    "mean-axis-keepdims": lambda x, w, y: F.sum(x, axis=(0,), keepdims=True) * 1.0 + y,
    "matmul-k0": lambda x, w, y: F.matmul(x.transpose(1, 0), w) + y,
    "linear-k0": lambda x, w, y: F.linear(x.transpose(1, 0), w.transpose(1, 0)) + y,
}


@pytest.mark.parametrize("name", sorted(EMPTY_REDUCTIONS))
def test_a_result_computed_from_empty_operands_plus_negative_zero_is_positive_zero(name):
    # Fuzzer (seed 542567736, shrunk): sum over a zero-size array + (-0.0) gave -0.0 compiled,
    # +0.0 eagerly. XLA folded the empty sum to the constant 0 and then 0 + y to y. The builder
    # puts results computed only from zero-size operands behind an optimization barrier.
    fn = EMPTY_REDUCTIONS[name]
    x, w = np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)
    y = np.full((3, 3) if "k0" in name else (3,), -0.0, np.float32)
    if name == "sum-float32":
        y = np.float32(-0.0).reshape(())
    step = xla_trace(fn)
    args = [ht.tensor(a) for a in (x, w, y)]
    eager = step(*args).numpy()
    compiled = step(*args).numpy()
    assert not np.signbit(eager).any(), eager
    np.testing.assert_array_equal(compiled, eager)
    np.testing.assert_array_equal(np.signbit(compiled), np.signbit(eager))
