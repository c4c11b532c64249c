"""The pooling ops beyond what the generated property and gradient tests check: PyTorch's
formulas on hand-computed cases, the selection convention of the max pools' gradients
(first maximum, last NaN, never padding) eager and compiled, half-precision accumulation,
the NaN guard on XLA:CPU's vectorized path, CHW inputs, zero-size batches, attribute
errors, the nn modules, and the trace file round trip of the attributes."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.ops import OPS
from hlotrace.ops.pooling import adaptive_windows
from hlotrace.testing.check import CI_BASE_SEED, STRATEGY_EXAMPLES, property_test
from hlotrace.trace import Trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _both(fn, *args):
    """``fn(*args)`` eagerly and compiled (second call of an xla_trace), as NumPy arrays."""
    traced = xla_trace(fn)
    traced(*args)
    return fn(*args).numpy(), traced(*args).numpy()


def _max_pool_grad(x, **attrs):
    def loss(v):
        return F.max_pool2d(v, **attrs).sum()

    return _both(grad(loss), x)


def test_max_pool2d_pads_with_minus_infinity_and_strides():
    x = _t(np.arange(16).reshape(1, 1, 4, 4) - 20.0)  # all negative: zero padding would win
    for out in _both(lambda v: F.max_pool2d(v, 3, stride=2, padding=1), x):
        np.testing.assert_array_equal(out, [[[[-15.0, -13.0], [-7.0, -5.0]]]])
    # Rectangular kernel, stride larger than the kernel, default stride = kernel.
    y = F.max_pool2d(_t(np.arange(30).reshape(1, 1, 5, 6)), (2, 1), stride=(3, 4))
    np.testing.assert_array_equal(y.numpy(), [[[[6.0, 10.0], [24.0, 28.0]]]])
    assert F.max_pool2d(_t(np.zeros((2, 3, 5, 7))), 2).shape == (2, 3, 2, 3)


def test_max_pool2d_propagates_nan_and_admits_integers():
    x = _t([[[[1.0, np.nan], [3.0, 2.0]]]])
    for out in _both(lambda v: F.max_pool2d(v, 2), x):
        assert np.isnan(out).all()
    low = np.iinfo(np.int32).min
    ints = _t([[[[low, low + 1], [low, low]]]], "int32")
    for out in _both(lambda v: F.max_pool2d(v, 1, padding=0), ints):
        assert out.dtype == np.int32 and out.tolist() == [[[[low, low + 1], [low, low]]]]
    np.testing.assert_array_equal(F.max_pool2d(ints, 2, stride=1, padding=1).numpy()[0, 0, 0], [low, low + 1, low + 1])


def test_max_pool2d_nan_guard_on_large_non_overlapping_windows():
    # XLA:CPU reduces such windows on a vectorized path that skips NaN.
    x = np.random.default_rng(0).standard_normal((1, 1, 64, 64)).astype(np.float32)
    x[0, 0, 10, 13] = np.nan
    eager, compiled = _both(lambda v: F.max_pool2d(v, 2), _t(x))
    assert np.isnan(compiled[0, 0, 5, 6]) and np.isnan(eager[0, 0, 5, 6])
    assert np.isnan(compiled).sum() == 1
    adaptive = _both(lambda v: F.adaptive_max_pool2d(v, 2), _t(x))
    for out in adaptive:
        assert np.isnan(out[0, 0, 0, 0]) and np.isnan(out).sum() == 1


def test_max_pool2d_gradient_goes_to_the_first_maximum_and_overlaps_add():
    x = _t([[[[1.0, 3.0, 3.0], [3.0, 0.0, 3.0], [2.0, 3.0, 1.0]]]])
    for g in _max_pool_grad(x, kernel_size=2, stride=1):
        # Windows (0,0), (0,1), (1,0), (1,1) pick (0,1), (0,1), (1,0), (1,2).
        np.testing.assert_array_equal(g, [[[[0.0, 2.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]]])


def test_max_pool2d_gradient_in_a_nan_window_goes_to_its_last_nan():
    x = _t([[[[np.nan, 5.0], [np.nan, 1.0]]]])
    for g in _max_pool_grad(x, kernel_size=2):
        np.testing.assert_array_equal(g, [[[[0.0, 0.0], [1.0, 0.0]]]])


def test_max_pool2d_gradient_never_reaches_padding():
    # All -inf: the first element inside the input takes it (padding would come first).
    x = _t(np.full((1, 1, 2, 2), -np.inf))
    for g in _max_pool_grad(x, kernel_size=3, stride=1, padding=1):
        np.testing.assert_array_equal(g, [[[[4.0, 0.0], [0.0, 0.0]]]])
    # Padding along W only (where XLA's select_and_scatter expansion breaks ties late).
    x = _t([[[[1.0, 0.0, -1.0], [-1.0, -2.0, -2.0], [-2.0, -2.0, 2.0], [1.0, 2.0, 0.0]]]])
    for g in _max_pool_grad(x, kernel_size=2, stride=2, padding=(0, 1)):
        assert g[0, 0, 2, 2] == 1.0 and g[0, 0, 3, 1] == 0.0


def test_max_pool2d_second_order_gradient_gathers_at_the_selection():
    x = _t([[[[1.0, 3.0, 3.0], [3.0, 0.0, 3.0], [2.0, 3.0, 1.0]]]])
    w = _t(np.arange(1.0, 5.0).reshape(1, 1, 2, 2))
    v = _t(np.arange(9.0).reshape(1, 1, 3, 3))

    def inner(xx, ww):
        return (F.max_pool2d(xx, 2, stride=1) * ww).sum()

    def outer(xx, ww, vv):
        return (grad(inner)(xx, ww) * vv).sum()

    for g in _both(grad(outer, argnums=1), x, w, v):
        np.testing.assert_array_equal(g, [[[[1.0, 1.0], [3.0, 5.0]]]])  # v at (0,1), (0,1), (1,0), (1,2)


def test_avg_pool2d_divisor_with_and_without_padding():
    x = _t(np.ones((1, 1, 2, 2)))
    with_pad = [[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]]
    for out in _both(lambda v: F.avg_pool2d(v, 2, stride=1, padding=1), x):
        np.testing.assert_array_equal(out[0, 0], with_pad)
    for out in _both(lambda v: F.avg_pool2d(v, 2, stride=1, padding=1, count_include_pad=False), x):
        np.testing.assert_array_equal(out[0, 0], np.ones((3, 3)))
    # A window of -0.0 averages to +0.0 (the sum starts at +0.0, as PyTorch's).
    for out in _both(lambda v: F.avg_pool2d(v, 2), _t(np.full((1, 1, 2, 2), -0.0))):
        assert not np.signbit(out).any()


def test_avg_pool2d_gradient_spreads_over_the_window_with_the_same_divisor():
    def loss(v):
        return F.avg_pool2d(v, 2, stride=1, padding=1, count_include_pad=False).sum()

    for g in _both(grad(loss), _t(np.ones((1, 1, 2, 2)))):
        # Each element is in 4 windows of which it is the only input element of one (1/1),
        # shares two with one other (1/2 each) and one with all four (1/4).
        np.testing.assert_array_equal(g, np.full((1, 1, 2, 2), 1 + 0.5 + 0.5 + 0.25))


def test_half_precision_pools_accumulate_in_float32():
    x = np.array([[[[2048.0, 1.0, 1.0, 1.0]]]], np.float16)
    for out in _both(lambda v: F.avg_pool2d(v, (1, 4)), _t(x, "float16")):
        assert out.dtype == np.float16 and out[0, 0, 0, 0] == np.float16(2051.0 / 4)


def test_adaptive_windows_are_pytorchs():
    assert adaptive_windows(5, 3) == [(0, 2), (1, 4), (3, 5)]
    assert adaptive_windows(2, 3) == [(0, 1), (0, 2), (1, 2)]
    assert adaptive_windows(6, 3) == [(0, 2), (2, 4), (4, 6)]
    x = _t(np.arange(5.0).reshape(1, 1, 5, 1))
    for out in _both(lambda v: F.adaptive_avg_pool2d(v, (3, 1)), x):
        np.testing.assert_allclose(out[0, 0, :, 0], [0.5, 2.0, 3.5])
    for out in _both(lambda v: F.adaptive_max_pool2d(v, (3, None)), x):
        np.testing.assert_array_equal(out[0, 0, :, 0], [1.0, 3.0, 4.0])
    # Larger than the input: windows repeat rows.
    for out in _both(lambda v: F.adaptive_avg_pool2d(v, (7, 2)), _t(np.arange(2.0).reshape(1, 1, 2, 1))):
        assert out.shape == (1, 1, 7, 2)
        np.testing.assert_allclose(out[0, 0, :, 0], [0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.0])


def test_adaptive_max_pool2d_gradient_follows_the_max_pool_convention():
    x = _t([[[[2.0, 2.0, np.nan], [2.0, 1.0, np.nan]]]])

    def loss(v):
        return F.adaptive_max_pool2d(v, (1, 2)).sum()

    for g in _both(grad(loss), x):
        # Windows: columns 0-1 (first 2), columns 1-2 (last NaN).
        np.testing.assert_array_equal(g, [[[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]]])


def test_chw_inputs_and_zero_size_batches():
    chw = _t(np.arange(18.0).reshape(2, 3, 3))
    assert F.max_pool2d(chw, 2, stride=1).shape == (2, 2, 2)
    assert F.adaptive_avg_pool2d(chw, 1).shape == (2, 1, 1)
    empty = _t(np.zeros((0, 2, 4, 4)))
    for fn in (
        lambda v: F.max_pool2d(v, 2),
        lambda v: F.avg_pool2d(v, 3, padding=1),
        lambda v: F.adaptive_max_pool2d(v, 3),
    ):
        for out in _both(fn, empty):
            assert out.shape[:2] == (0, 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 4, 4))), 2, padding=2), "at most half the kernel"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 4, 4))), 3, padding=(0, 2)), "at most half the kernel"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 2, 4))), 3), "does not fit"),
        (lambda: F.max_pool2d(_t(np.zeros((4, 4))), 2), "rank 4"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 0, 4))), 1), "empty spatial dims"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 4, 4))), True), "int or a pair of ints"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 4, 4))), 2, stride=0), "must be positive"),
        (lambda: F.max_pool2d(_t(np.zeros((1, 1, 4, 4)), "bool"), 2), "float and int32/int64"),
        (lambda: F.avg_pool2d(_t(np.zeros((1, 1, 4, 4)), "int32"), 2), "float tensor"),
        (lambda: F.avg_pool2d(_t(np.zeros((1, 1, 4, 4))), 2, count_include_pad=1), "must be a bool"),
        (lambda: F.adaptive_avg_pool2d(_t(np.zeros((1, 1, 4, 4))), 0), "must be positive"),
        (lambda: F.adaptive_max_pool2d(_t(np.zeros((1, 1, 4, 4))), (1, 2, 3)), "an int or a pair"),
        (lambda: F.max_pool2d_backward(_t(np.zeros((1, 1, 4, 4))), _t(np.zeros((1, 1, 3, 3))), 2), "ct must be"),
        (lambda: F.avg_pool2d_backward(_t(np.zeros((1, 1, 2, 2))), (7, 7), 2), "gives"),
    ],
)
def test_bad_attributes_name_the_op_and_the_user_line(call, message):
    with pytest.raises(OpError, match=message) as info:
        call()
    assert "test_pooling_ops.py" in str(info.value)


def test_modules_call_the_functional_ops():
    x = _t(np.random.default_rng(1).standard_normal((2, 3, 6, 5)))
    pairs = [
        (nn.MaxPool2d(3, stride=2, padding=1), F.max_pool2d(x, 3, 2, 1)),
        (nn.AvgPool2d((2, 3), padding=(1, 1), count_include_pad=False), F.avg_pool2d(x, (2, 3), None, (1, 1), False)),
        (nn.AdaptiveAvgPool2d((4, None)), F.adaptive_avg_pool2d(x, (4, 5))),
        (nn.AdaptiveMaxPool2d(2), F.adaptive_max_pool2d(x, 2)),
    ]
    for module, expected in pairs:
        np.testing.assert_array_equal(module(x).numpy(), expected.numpy())
    assert "kernel_size=3, stride=2, padding=1" in repr(pairs[0][0])
    net = nn.Sequential(nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1))
    traced = xla_trace(net)
    traced(x)
    np.testing.assert_allclose(traced(x).numpy(), net(x).numpy(), rtol=1e-6)


def test_pooling_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def f(x):
        y = F.avg_pool2d(F.max_pool2d(x, (2, 1), stride=None, padding=(1, 0)), 1, count_include_pad=False)
        return F.adaptive_max_pool2d(y, (None, 2)) + F.adaptive_avg_pool2d(y, 1)

    x = _t(np.arange(24.0).reshape(1, 2, 3, 4))
    f(x)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.records == f.trace.records
    pool = next(r for r in loaded.records if r.op == "max_pool2d")
    assert tuple(pool.attrs["stride"]) == (2, 1) and tuple(pool.attrs["padding"]) == (1, 0)


def _drawn(name, dtype):
    drawn = []
    property_test(
        OPS[name], CI_BASE_SEED, dtype, checker=lambda op, s: drawn.append(s), max_examples=STRATEGY_EXAMPLES
    )()
    return drawn


def _pairs(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def test_window_samples_draw_the_attribute_space():
    samples = _drawn("max_pool2d", np.float32)
    kernels = {_pairs(s.attrs["kernel_size"]) for s in samples}
    strides = [s.attrs["stride"] for s in samples]
    assert {1, 2, 3} <= {k for pair in kernels for k in pair} and any(h != w for h, w in kernels)
    assert None in strides and any(
        s.attrs["stride"] is not None and max(_pairs(s.attrs["stride"])) > max(_pairs(s.attrs["kernel_size"]))
        for s in samples
    )
    assert any(max(_pairs(s.attrs["padding"])) > 0 for s in samples)
    x = [s.args[0] for s in samples]
    assert any(a.shape[0] == 0 for a in x) and any(a.size >= 4096 for a in x)
    assert any(np.isnan(a).any() for a in x) and any(a.size and (a == -np.inf).mean() > 0.4 for a in x)
    assert sum(len(np.unique(a)) <= 4 for a in x if a.size) >= 10  # ties
    assert {s.attrs["count_include_pad"] for s in _drawn("avg_pool2d", np.float32)} == {True, False}


def test_adaptive_samples_draw_output_sizes_dividing_the_input_or_not_and_larger():
    samples = _drawn("adaptive_avg_pool2d", np.float32)
    outs = [(s.args[0].shape[2:], _pairs(s.attrs["output_size"])) for s in samples]
    assert any(o is not None and n % o == 0 and o < n for size, out in outs for n, o in zip(size, out, strict=True))
    assert any(o is not None and n % o != 0 for size, out in outs for n, o in zip(size, out, strict=True))
    assert any(o is not None and o > n for size, out in outs for n, o in zip(size, out, strict=True))
    assert any(None in out for _, out in outs)
