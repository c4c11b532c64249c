"""The nn and creation ops beyond what the generated property tests check: the composites
built from them (cross_entropy, mse_loss, *_like), the conventions chosen at the edges
(relu(-0.0), clip's bounds and gradient, one_hot out of range), NumPy's arange, attribute
errors, and the trace file round trip of their attributes."""

import math

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.trace import Trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def test_relu_gives_positive_zero_and_keeps_nan():
    out = F.relu(_t([-0.0, np.nan, -1.0, 2.0, -np.inf])).numpy()
    np.testing.assert_array_equal(out, [0.0, np.nan, 0.0, 2.0, 0.0])
    assert not np.signbit(out[0])
    assert F.relu(_t([-3, 4], "int32")).numpy().tolist() == [0, 4]


def test_clip_follows_numpy_where_bounds_cross_and_promotes_like_weak_scalars():
    x = _t([-2.0, 0.5, 3.0, np.nan])
    np.testing.assert_array_equal(F.clip(x, 1.0, 0.0).numpy(), [0.0, 0.0, 0.0, np.nan])  # min > max: max
    np.testing.assert_array_equal(F.clip(x, max=1.0).numpy(), np.clip(x.numpy(), None, 1.0))
    ints = F.clip(_t([1, 5, 9], "int32"), 2, 6)
    assert ints.dtype == np.int32 and ints.numpy().tolist() == [2, 5, 6]
    halves = F.clip(_t([1, 5, 9], "int32"), 2.5)
    assert halves.dtype == np.float32 and halves.numpy().tolist() == [2.5, 5.0, 9.0]
    # A signed zero equal to a bound is kept as it is.
    assert np.signbit(F.clip(_t([-0.0]), min=0.0).numpy()[0])


def test_clip_gradient_passes_at_the_bounds_and_not_when_they_meet():
    x = _t([-1.0, 0.0, 0.5, 1.0, 2.0])
    g = grad(lambda v: F.clip(v, 0.0, 1.0).sum())(x).numpy()
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 1.0, 0.0])
    g = grad(lambda v: F.clip(v, 1.0, 1.0).sum())(x).numpy()
    np.testing.assert_array_equal(g, np.zeros(5))


def test_one_hot_of_labels_out_of_range_is_all_zero():
    out = F.one_hot(_t([[0, 3, -1], [2, 4, 1]], "int32"), 4).numpy()
    assert out.shape == (2, 3, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out.sum(-1), [[1, 1, 0], [1, 0, 1]])
    assert F.one_hot(_t([1], "int32"), 2, dtype="bool").numpy().tolist() == [[False, True]]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_cross_entropy_matches_numpy_eagerly_and_compiled(axis, reduction):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 5, 3)).astype(np.float32)
    label_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis % 3)
    labels = rng.integers(0, logits.shape[axis], label_shape).astype(np.int32)
    picked = np.take_along_axis(_log_softmax(logits, axis), np.expand_dims(labels, axis), axis)
    losses = -np.squeeze(picked, axis)
    expected = {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]

    def loss(x, y):
        return F.cross_entropy(x, y, axis=axis, reduction=reduction)

    np.testing.assert_allclose(loss(_t(logits), _t(labels, "int32")).numpy(), expected, rtol=1e-5)
    compiled = xla_trace(loss)
    compiled(_t(logits), _t(labels, "int32"))
    np.testing.assert_allclose(compiled(_t(logits), _t(labels, "int32")).numpy(), expected, rtol=1e-5)
    ops = [r.op for r in compiled.trace.records]
    assert ops[:2] == ["log_softmax", "one_hot"] and "where" in ops and "multiply" not in ops


def test_cross_entropy_with_masked_logits_stays_finite_and_its_gradient_is_softmax_minus_one_hot():
    logits = _t([[2.0, -np.inf, 0.5], [-np.inf, 1.0, -np.inf]])
    labels = _t([0, 1], "int32")
    loss = F.cross_entropy(logits, labels, reduction="none").numpy()
    assert np.isfinite(loss).all() and loss[1] == 0.0
    g = grad(lambda x: F.cross_entropy(x, labels, reduction="sum"))(logits).numpy()
    probs = np.exp(_log_softmax(logits.numpy(), -1))
    np.testing.assert_allclose(g, probs - np.eye(3)[[0, 1]], atol=1e-6)


def test_cross_entropy_of_an_out_of_range_label_is_positive_zero():
    loss = F.cross_entropy(_t([[1.0, 2.0]]), _t([7], "int32"), reduction="none").numpy()
    assert loss[0] == 0.0 and not np.signbit(loss[0])


def test_mse_loss_and_its_gradient():
    pred, target = _t([1.0, 2.0, 4.0]), _t([0.0, 2.0, 1.0])
    assert F.mse_loss(pred, target).numpy() == pytest.approx(10.0 / 3)
    assert F.mse_loss(pred, target, "sum").numpy() == pytest.approx(10.0)
    np.testing.assert_array_equal(F.mse_loss(pred, target, "none").numpy(), [1.0, 0.0, 9.0])
    g = grad(lambda p: F.mse_loss(p, target))(pred).numpy()
    np.testing.assert_allclose(g, 2 * (pred.numpy() - target.numpy()) / 3, rtol=1e-6)


def test_like_functions_record_creation_ops_with_explicit_attributes():
    @xla_trace
    def f(x):
        return F.zeros_like(x) + F.ones_like(x, dtype="float16") + F.full_like(x, -0.0)

    x = _t([[1.0, 2.0]])
    f(x)
    np.testing.assert_array_equal(f(x).numpy(), [[1.0, 1.0]])
    attrs = {r.op: r.attrs for r in f.trace.records}
    assert attrs["zeros"] == {"shape": (1, 2), "dtype": np.dtype("float32")}
    assert attrs["ones"] == {"shape": (1, 2), "dtype": np.dtype("float16")}
    assert math.copysign(1.0, attrs["full"]["value"]) == -1.0 and attrs["full"]["dtype"] == np.float32
    assert F.full((2,), 3).dtype == np.int32 and F.full(2, True).dtype == np.bool_
    assert F.zeros(3).dtype == np.float32 and F.zeros(()).shape == ()


@pytest.mark.parametrize(
    "args", [(5,), (2, 9), (9, 2, -2), (0, 1, 0.25), (-1.5, 2.0, 0.5), (3, 3), (3, 1), (0, 10, 3), (-7, 0, 4)]
)
def test_arange_follows_numpy(args):
    out = F.arange(*args).numpy()
    expected = np.arange(*args)
    assert out.dtype == (np.int32 if expected.dtype.kind == "i" else np.float32)
    np.testing.assert_array_equal(out, expected.astype(out.dtype))


def test_arange_dtype_and_negative_step_starting_at_zero():
    out = F.arange(0.0, -2.0, -0.5).numpy()
    np.testing.assert_array_equal(out, [0.0, -0.5, -1.0, -1.5])
    assert not np.signbit(out[0])
    assert F.arange(4, dtype="bfloat16").dtype == ht.tensor(np.ones(1), dtype="bfloat16").dtype


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.one_hot(_t([1], "int32"), 0), "one_hot: num_classes must be positive"),
        (lambda: F.one_hot(_t([1.0]), 3), "one_hot: labels must be integer"),
        (lambda: F.clip(_t([1.0])), "clip: needs min= or max="),
        (lambda: F.clip(_t([1.0]), min=float("nan")), "clip: min= must not be NaN"),
        (lambda: F.clip(_t([1.0]), min=_t([0.0])), "clip: min= must be a Python number"),
        (lambda: F.clip(_t([True], "bool"), 0), "clip: defined for integer and float tensors only"),
        (lambda: F.zeros((2, -1)), r"zeros: negative dimension -1 in shape \(2, -1\)"),
        (lambda: F.full(3, 2.5, "int32"), "full: value 2.5 is not an integer"),
        (lambda: F.arange(0, 1, 0), "arange: step must not be zero"),
        (lambda: F.arange(0.5, dtype="int32"), "arange: an integer dtype needs int"),
        (lambda: F.arange(2**31 - 1, 2**31 + 1), "arange: values from"),
        (lambda: F.log_softmax(_t(1.0)), "log_softmax: needs a tensor of rank >= 1"),
        (lambda: F.log_softmax(_t([1.0]), axis=1), "log_softmax: axis 1 is out of bounds"),
        (lambda: F.sigmoid(_t([1], "int32")), "sigmoid: defined for float tensors only"),
        (lambda: F.cross_entropy(_t([[1.0]]), _t([0], "int32"), reduction="avg"), "cross_entropy: unknown reduction"),
        (lambda: F.cross_entropy(_t([[1.0]]), _t([0.0])), "cross_entropy: labels must be integer"),
        (lambda: F.cross_entropy(_t([[1.0]]), _t([0, 1], "int32")), "cross_entropy: labels of shape"),
        (lambda: F.mse_loss(_t([1.0]), _t([1.0, 2.0])), "mse_loss: pred shape"),
        (lambda: F.mse_loss(_t([1.0]), _t([1.0]), reduction="max"), "mse_loss: unknown reduction"),
    ],
)
def test_bad_attributes_name_the_op_and_the_user_line(call, message):
    with pytest.raises(OpError, match=message) as info:
        call()
    assert "test_nn_ops.py" in str(info.value)


def test_creation_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def f(x):
        return x + F.full(x.shape, -0.0) + F.arange(0.0, 1.0, 0.5) + F.one_hot(F.arange(2), 2)[0]

    x = _t([1.0, 2.0])
    f(x)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.records == f.trace.records
    full = next(r for r in loaded.records if r.op == "full")
    assert math.copysign(1.0, full.attrs["value"]) == -1.0 and full.attrs["dtype"] == np.float32
