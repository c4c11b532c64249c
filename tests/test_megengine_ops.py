"""The ops MegEngine's XLA backend lowers (issue 36) beyond what the generated property and
gradient tests check: the composite logsigmoid against NumPy (values, extremes, gradient),
the conventions chosen at the edges (hswish(-inf), relu6(-0.0), atanh(±1), logaddexp of
equal infinities), prelu's channel axis, and the modules (PReLU's learnable slopes trained
compiled as eagerly)."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager, grad
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace

INF, NAN = np.inf, np.nan


def _eager_and_compiled(fn, *arrays):
    """fn's results on ``arrays``, eagerly and from its compiled call (as NumPy arrays)."""
    tensors = [ht.tensor(a) for a in arrays]
    eager = fn(*tensors).numpy()
    step = xla_trace(fn)
    step(*tensors)
    return eager, step(*tensors).numpy()


def _same(actual, expected, rtol=1e-6):
    """Equal within rtol, NaN where NaN, and the sign of zero kept."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0)
    assert (np.signbit(actual) == np.signbit(expected))[expected == 0].all()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_logsigmoid_matches_numpy_without_overflow(dtype):
    x = np.array([-INF, -1e4, -100.0, -20.5, -1.0, -0.0, 0.0, 1e-8, 2.0, 30.0, 1e4, INF, NAN], dtype)
    wide = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (np.minimum(wide, 0) - np.log1p(np.exp(-np.abs(wide)))).astype(dtype)
    expected[expected == 0] = -0.0  # -softplus(-x) is -(+0.0) where exp(-x) underflows
    eager, compiled = _eager_and_compiled(F.logsigmoid, x)
    rtol = 1e-3 if dtype == "float16" else 1e-6
    _same(eager, expected, rtol)
    _same(compiled, eager, rtol)
    assert eager.dtype == np.dtype(dtype)


def test_logsigmoid_gradient_is_sigmoid_of_minus_x():
    x = np.array([-50.0, -3.0, -0.5, 0.0, 0.5, 3.0, 50.0])
    g = grad(lambda t: F.sum(F.logsigmoid(t)))(ht.tensor(x))
    np.testing.assert_allclose(g.numpy(), 1 / (1 + np.exp(x)), rtol=1e-12)


def test_piecewise_activations_follow_pytorchs_branches_at_the_edges():
    big = float(np.finfo(np.float32).max)
    x = np.array([-INF, -3.0, -2.0, -0.0, 0.0, 1.0, 3.0, 6.0, 7.0, big, INF, NAN], np.float32)
    hswish, compiled = _eager_and_compiled(F.hswish, x)
    _same(hswish, [0.0, 0.0, -1 / 3, -0.0, 0.0, 2 / 3, 3.0, 6.0, 7.0, big, INF, NAN])
    _same(compiled, hswish)
    hsigmoid, compiled = _eager_and_compiled(F.hsigmoid, x)
    _same(hsigmoid, [0.0, 0.0, 1 / 6, 0.5, 0.5, 2 / 3, 1.0, 1.0, 1.0, 1.0, 1.0, NAN])
    _same(compiled, hsigmoid)
    relu6, compiled = _eager_and_compiled(F.relu6, x)
    _same(relu6, [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 3.0, 6.0, 6.0, 6.0, 6.0, NAN])
    _same(compiled, relu6)
    assert F.hardswish is F.hswish and F.hardsigmoid is F.hsigmoid


def test_inverse_functions_and_logaddexp_at_their_special_values():
    x = np.array([-1.0, 1.0, 2.0, -0.0, 0.5], np.float32)
    atanh, compiled = _eager_and_compiled(F.atanh, x)
    _same(atanh, [-INF, INF, NAN, -0.0, np.arctanh(0.5)])
    _same(compiled, atanh)
    acosh, compiled = _eager_and_compiled(F.acosh, np.array([1.0, 0.5, 1e30, INF], np.float32))
    _same(acosh, [0.0, NAN, np.arccosh(1e30), INF])
    _same(compiled, acosh)
    assert F.asin(ht.tensor(np.int32(1))).dtype == np.float32  # ints give floats
    a = np.array([-INF, INF, INF, 1000.0, -1e30, NAN], np.float32)
    b = np.array([-INF, INF, -INF, 1000.0, -1e30 + 1e24, 0.0], np.float32)
    eager, compiled = _eager_and_compiled(F.logaddexp, a, b)
    with np.errstate(invalid="ignore"):  # NumPy warns on the NaN operand
        expected = np.logaddexp(a, b)
    _same(eager, expected)
    _same(compiled, eager)
    assert np.isfinite(eager[3]) and eager[3] == np.float32(1000.0 + np.log(2.0))


@pytest.mark.parametrize("shape, weight", [((2, 3, 4, 5), (3,)), ((2, 3, 4, 5), (1,)), ((4, 6), (6,)), ((5,), ())])
def test_prelu_broadcasts_its_weight_along_dim_1(shape, weight):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(-1, 1, weight).astype(np.float32)
    slope = w.reshape((1, -1) + (1,) * (len(shape) - 2)) if w.size > 1 else w
    eager, compiled = _eager_and_compiled(F.prelu, x, w)
    _same(eager, np.where(x > 0, x, x * slope))
    _same(compiled, eager)


def test_prelu_refuses_a_weight_per_element_or_of_another_dtype():
    x = ht.tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(HlotraceError, match=r"prelu.*one value or one per channel"):
        F.prelu(x, ht.tensor(np.ones(4, np.float32)))
    with pytest.raises(HlotraceError, match=r"prelu.*x's dtype"):
        F.prelu(x, ht.tensor(np.ones(3, np.float64)))


def test_modules_call_the_ops_and_prelu_has_pytorchs_parameter():
    x = ht.tensor(np.linspace(-8, 8, 24, dtype=np.float32).reshape(2, 3, 4))
    np.testing.assert_array_equal(nn.ReLU6()(x).numpy(), F.relu6(x).numpy())
    np.testing.assert_array_equal(nn.Hardsigmoid()(x).numpy(), F.hsigmoid(x).numpy())
    np.testing.assert_array_equal(nn.Hardswish()(x).numpy(), F.hswish(x).numpy())
    np.testing.assert_array_equal(nn.LogSigmoid()(x).numpy(), F.logsigmoid(x).numpy())
    act = nn.PReLU(num_parameters=3)
    assert list(act.state_dict()) == ["weight"] and act.weight.shape == (3,)
    np.testing.assert_array_equal(act.weight.numpy(), np.full(3, 0.25, np.float32))
    assert nn.PReLU().weight.shape == (1,) and nn.PReLU(init=0.1).weight.numpy()[0] == np.float32(0.1)
    xs = x.numpy()
    np.testing.assert_allclose(act(x).numpy(), np.where(xs > 0, xs, xs * 0.25))
    with pytest.raises(HlotraceError, match="num_parameters"):
        nn.PReLU(0)


def test_prelu_slopes_train_compiled_as_eagerly():
    def step(x, target, net, opt, gm):
        with gm:
            loss = F.mean((net(x) - target) ** 2)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    def setup():
        nn.init.seed(3)
        net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.PReLU(3), nn.Conv2d(3, 1, 1), nn.Hardswish())
        return net, optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())

    rng = np.random.default_rng(1)
    eager, compiled = setup(), setup()
    traced = xla_trace(step)
    for _ in range(3):
        x = ht.tensor(rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
        target = ht.tensor(rng.standard_normal((4, 1, 3, 3)).astype(np.float32))
        np.testing.assert_allclose(traced(x, target, *compiled).numpy(), step(x, target, *eager).numpy(), rtol=1e-5)
    slopes = compiled[0][1].weight.numpy()
    assert not np.allclose(slopes, 0.25)  # the slopes learned
    np.testing.assert_allclose(slopes, eager[0][1].weight.numpy(), rtol=1e-5, atol=1e-7)
