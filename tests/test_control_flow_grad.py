"""Gradients through control flow: scan (and int-bound fori_loop) == the unrolled loop and
finite differences, eagerly and compiled; cond/switch for each branch with zeros for unused
operands; closed-over tensors get their gradients (the bug of pytorch/pytorch#184528);
second order; while_loop under reverse mode is an OpError."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.autodiff import GradManager, grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace

RNG = np.random.default_rng(0)


def _t(a):
    return ht.tensor(np.asarray(a))


def _close(a, b, rtol=1e-10):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=rtol, atol=1e-12)


def _compiled(fn, *args, **options):
    traced = xla_trace(fn, **options)
    traced(*args)
    return traced(*args)


def _finite_differences(loss, args, position, eps=1e-6):
    base = [a.numpy().astype(np.float64) for a in args]
    out = np.zeros_like(base[position])
    for i in np.ndindex(base[position].shape):
        plus, minus = [b.copy() for b in base], [b.copy() for b in base]
        plus[position][i] += eps
        minus[position][i] -= eps
        out[i] = (float(loss(*map(_t, plus)).numpy()) - float(loss(*map(_t, minus)).numpy())) / (2 * eps)
    return out


def _step(h, x, w):
    return F.tanh(h * w + x), F.sum(h * h * w)


def _scan_loss(reverse):
    def loss(h0, w, xs):
        h, ys = F.scan(lambda h, x: _step(h, x, w), h0, xs, reverse=reverse)  # w is closed over
        return F.sum(h) + F.sum(ys * F.arange(1.0, 5.0, dtype="float64"))

    return loss


def _unrolled_loss(reverse):
    def loss(h0, w, xs):
        h, ys = h0, [None] * 4
        for t in reversed(range(4)) if reverse else range(4):
            h, ys[t] = _step(h, xs[t], w)
        return F.sum(h) + sum(y * float(k + 1) for k, y in enumerate(ys))

    return loss


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_gradients_equal_the_unrolled_loops_and_finite_differences(reverse):
    args = (_t(RNG.standard_normal(3)), _t(RNG.standard_normal(3)), _t(RNG.standard_normal((4, 3))))
    g_scan = grad(_scan_loss(reverse), argnums=(0, 1, 2))
    g_unrolled = grad(_unrolled_loss(reverse), argnums=(0, 1, 2))
    expected = g_unrolled(*args)
    _close(g_scan(*args), expected)
    _close(_compiled(g_scan, *args), expected)
    traced = xla_trace(g_scan)
    traced(*args)
    # The forward scan outputs the carries each step started from: no third scan recomputes them.
    assert [r.op for r in traced.trace.records].count("scan") == 2
    for position in range(3):
        fd = _finite_differences(_scan_loss(reverse), args, position)
        np.testing.assert_allclose(g_scan(*args)[position].numpy(), fd, rtol=1e-5, atol=1e-7)


def test_closed_over_parameter_gets_its_gradient_with_a_non_differentiable_init():
    """pytorch/pytorch#184528: a parameter closed over in the body, the init not watched."""
    w = _t(RNG.standard_normal(3))
    init = _t(np.ones(3))
    xs = _t(RNG.standard_normal((5, 3)))

    def scanned(w):
        h, _ = F.scan(lambda h, x: (F.sin(h * w) + x, None), init, xs)
        return F.sum(h)

    def unrolled(w):
        h = init
        for t in range(5):
            h = F.sin(h * w) + xs[t]
        return F.sum(h)

    expected = grad(unrolled)(w)
    _close([grad(scanned)(w)], [expected])
    _close([_compiled(grad(scanned), w, capture_as_const=True)], [expected])  # init, xs: constants
    assert np.abs(expected.numpy()).max() > 0


def test_closed_over_module_parameters_train_in_a_compiled_step():
    from hlotrace import nn, optim

    net = nn.Linear(3, 3)
    for p in net.parameters():
        p._assign(_t(RNG.standard_normal(p.shape).astype(np.float32)))
    opt = optim.SGD(net.parameters(), lr=0.1)
    gm = GradManager().attach(net.parameters())

    def step(x, net, opt, gm, scanned):
        with gm:
            if scanned:
                h, _ = F.scan(lambda h, _: (F.tanh(net(h)), None), x, length=3)
            else:
                h = x
                for _ in range(3):
                    h = F.tanh(net(h))
            loss = F.sum(h * h)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    x = _t(RNG.standard_normal((2, 3)).astype(np.float32))
    start = [p.numpy().copy() for p in net.parameters()]
    step(x, net, opt, gm, False)
    unrolled = [p.numpy().copy() for p in net.parameters()]
    for p, value in zip(net.parameters(), start, strict=True):
        p._assign(_t(value))
    compiled = xla_trace(step)
    compiled(x, net, opt, gm, True)
    for p, value in zip(net.parameters(), unrolled, strict=True):
        np.testing.assert_allclose(p.numpy(), value, rtol=1e-5, atol=1e-6)


def test_int_bound_fori_loop_is_differentiable():
    def loss(x, w):
        return F.sum(F.fori_loop(0, 3, lambda i, x: F.tanh(x * w) + F.astype(i, "float64"), x))

    args = (_t(RNG.standard_normal(3)), _t(RNG.standard_normal(3)))
    g = grad(loss, argnums=(0, 1))
    for position in range(2):
        np.testing.assert_allclose(
            g(*args)[position].numpy(), _finite_differences(loss, args, position), rtol=1e-5, atol=1e-7
        )
    _close(_compiled(g, *args), g(*args))


@pytest.mark.parametrize("pred", [True, False])
def test_cond_gradients_for_each_branch(pred):
    def loss(x, y, p):
        return F.sum(F.cond(p, lambda x, y: F.sin(x) * y, lambda x, y: x * x, x, y))

    x, y = _t(RNG.standard_normal(3)), _t(RNG.standard_normal(3))
    gx, gy = grad(loss, argnums=(0, 1))(x, y, _t(pred))
    if pred:
        np.testing.assert_allclose(gx.numpy(), np.cos(x.numpy()) * y.numpy())
        np.testing.assert_allclose(gy.numpy(), np.sin(x.numpy()))
    else:
        np.testing.assert_allclose(gx.numpy(), 2 * x.numpy())
        np.testing.assert_array_equal(gy.numpy(), np.zeros(3))  # y is unused by false_fn
    _close(_compiled(grad(loss, argnums=(0, 1)), x, y, _t(pred)), (gx, gy))


def test_switch_gradients_with_a_clamped_index_and_closure():
    w = _t(RNG.standard_normal(3))

    def loss(x, w, k):
        return F.sum(F.switch(k, [lambda x: x * w, lambda x: F.exp(x), lambda x: x * x * w], x))

    x = _t(RNG.standard_normal(3))
    for k, expected in ((-4, (w.numpy(), x.numpy())), (1, (np.exp(x.numpy()), 0 * x.numpy())), (9, None)):
        gx, gw = grad(loss, argnums=(0, 1))(x, w, _t(np.int32(k)))
        if expected is None:
            expected = (2 * x.numpy() * w.numpy(), x.numpy() ** 2)
        np.testing.assert_allclose(gx.numpy(), expected[0])
        np.testing.assert_allclose(gw.numpy(), expected[1])
        _close(_compiled(grad(loss, argnums=(0, 1)), x, w, _t(np.int32(k))), (gx, gw))


def test_second_order_through_scan_and_cond():
    def f(x):
        h, _ = F.scan(lambda h, _: (F.sin(h) * x, None), x, length=2)
        return F.sum(F.cond(F.sum(x) > -100, lambda h: h * h, lambda h: h, h))

    def unrolled(x):
        h = x
        for _ in range(2):
            h = F.sin(h) * x
        return F.sum(h * h)

    x = _t(RNG.standard_normal(3))
    second = grad(lambda x: F.sum(grad(f)(x)))
    expected = grad(lambda x: F.sum(grad(unrolled)(x)))(x)
    _close([second(x)], [expected], rtol=1e-9)
    _close([_compiled(second, x)], [expected], rtol=1e-9)


def test_while_loop_under_reverse_mode_is_an_error_pointing_to_scan():
    def loss(x):
        return F.sum(F.while_loop(lambda c: F.sum(c) < 10.0, lambda c: c * 2.0, x))

    with pytest.raises(
        OpError, match=r"F.while_loop is not supported.*test_control_flow_grad\.py:\d+.*F.scan.*F.fori_loop"
    ):
        grad(loss)(_t(np.ones(2)))
    # Forward use under a tape, without a cotangent reaching the loop, is fine.
    assert float(F.while_loop(lambda c: c < 3, lambda c: c + 1, ht.tensor(0)).numpy()) == 3


@pytest.mark.parametrize("unroll", [2, 3])
def test_unrolled_scan_gradients(unroll):
    def loss(h0, w, xs):
        h, ys = F.scan(lambda h, x: _step(h, x, w), h0, xs, unroll=unroll)
        return F.sum(h) + F.sum(ys * F.arange(1.0, 5.0, dtype="float64"))

    args = (_t(RNG.standard_normal(3)), _t(RNG.standard_normal(3)), _t(RNG.standard_normal((4, 3))))
    expected = grad(_unrolled_loss(False), argnums=(0, 1, 2))(*args)
    _close(_compiled(grad(loss, argnums=(0, 1, 2)), *args), expected)
