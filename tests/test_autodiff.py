"""The autodiff front ends: GradManager, grad/value_and_grad, detach, in-place updates,
gradients of gradients. Per-op VJPs are checked by the generated tests in test_gradients.py."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F
from hlotrace.autodiff import GradManager, grad, value_and_grad
from hlotrace.errors import OpError


def _t(values, dtype=np.float32):
    return ht.tensor(np.asarray(values, dtype=dtype))


def test_grad_of_a_composite_matches_the_formula():
    x = _t([0.5, -1.0, 2.0])
    g = grad(lambda x: F.sum(F.tanh(x) * x))(x)
    expected = np.tanh(x.numpy()) + x.numpy() * (1 - np.tanh(x.numpy()) ** 2)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-6)


def test_value_and_grad_with_several_argnums_and_broadcasting():
    a, b = _t([[1.0, 2.0], [3.0, 4.0]]), _t([10.0, 20.0])
    value, (ga, gb) = value_and_grad(lambda a, b: F.sum(a * b), argnums=(0, 1))(a, b)
    assert float(value) == 1 * 10 + 2 * 20 + 3 * 10 + 4 * 20
    np.testing.assert_array_equal(ga.numpy(), [[10, 20], [10, 20]])
    np.testing.assert_array_equal(gb.numpy(), [4, 6])  # summed over the broadcast dim


def test_unused_argument_gets_zeros_and_integer_argument_is_refused():
    x, y = _t([1.0, 2.0]), _t([3.0])
    _, gy = grad(lambda x, y: F.sum(x * x), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gy.numpy(), [0.0])
    with pytest.raises(OpError, match="only floating-point"):
        grad(lambda i: F.sum(i))(ht.tensor([1, 2]))
    with pytest.raises(OpError, match="scalar floating-point"):
        grad(lambda x: x * 2)(x)


def test_non_differentiable_ops_give_zero_gradients_not_errors():
    x = _t([1.0, -2.0, 3.0])
    g = grad(lambda x: F.sum(F.where(x > 0, x, 0.0) + F.astype(x > 1, "float32")))(x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 1.0])


def test_detach_stops_gradients():
    x = _t([2.0, 3.0])
    g = grad(lambda x: F.sum(x * x.detach()))(x)
    np.testing.assert_array_equal(g.numpy(), x.numpy())  # d(x * c)/dx = c, not 2x


def test_grad_of_grad_elementwise_and_matmul():
    x = _t([0.3, -0.7, 1.1])
    d2 = grad(lambda x: F.sum(grad(lambda y: F.sum(F.sin(y) * y))(x)))(x)
    # d/dx (cos(x) x + sin(x)) = 2 cos(x) - x sin(x)
    xs = x.numpy()
    np.testing.assert_allclose(d2.numpy(), 2 * np.cos(xs) - xs * np.sin(xs), rtol=1e-5)
    a = _t(np.arange(6).reshape(2, 3) / 5)
    w = _t(np.arange(12).reshape(3, 4) / 7)
    # f(w) = sum((a @ w)^2); df/dw = 2 aᵀ(a w); sum of that, differentiated again: 2 aᵀ a 1 1ᵀ
    h = grad(lambda w: F.sum(grad(lambda v: F.sum(F.matmul(a, v) ** 2))(w)))(w)
    an = a.numpy().astype(np.float64)
    expected = 2 * an.T @ an @ np.ones((3, 4))
    np.testing.assert_allclose(h.numpy(), expected, rtol=1e-5)


def test_in_place_update_keeps_identity_and_gradient_flows_through_the_new_value():
    x = _t([1.0, 2.0])

    def f(x):
        y = x * 1.0
        y *= 3.0  # y is the same object, holding 3x
        y += x  # 4x
        return F.sum(y * y)  # 16 x², gradient 32 x

    np.testing.assert_allclose(grad(f)(x).numpy(), 32 * x.numpy())
    z = _t([1.0])
    before = id(z)
    z += 1
    assert id(z) == before and z.numpy().tolist() == [2.0]


def test_in_place_update_refuses_shape_change_and_float_into_int():
    x = _t([1.0, 2.0])
    with pytest.raises(OpError, match="change its shape"):
        x += _t([[1.0], [2.0]])
    i = ht.tensor([1, 2])
    with pytest.raises(OpError, match="float-to-integer"):
        i += 0.5


def test_grad_manager_accumulates_until_cleared_and_runs_callbacks():
    w = ht.Parameter(np.array([1.0, -2.0], np.float32))
    seen = []

    def clip(param, g):
        seen.append(param is w)
        return F.clip(g, -1.0, 1.0) if hasattr(F, "clip") else F.minimum(F.maximum(g, -1.0), 1.0)

    gm = GradManager().attach([w], callbacks=[clip])
    for _ in range(2):
        with gm:
            loss = F.sum(w * w)  # grad 2w = [2, -4] → clipped to [1, -1]
            gm.backward(loss)
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, -2.0])
    assert seen == [True, True]
    w.grad = None
    with gm:
        gm.backward(F.sum(w * 0.25), dy=None)
    np.testing.assert_array_equal(w.grad.numpy(), [0.25, 0.25])


def test_grad_manager_backward_outside_with_is_an_error():
    gm = GradManager().attach([ht.Parameter(np.zeros(2, np.float32))])
    with pytest.raises(OpError, match="outside"):
        gm.backward(_t(1.0))


def test_missing_vjp_names_the_op_and_the_line():
    from hlotrace.ops.registry import OPS

    op = OPS["tanh"]
    saved = op.vjp
    object.__setattr__(op, "vjp", None)
    try:
        with pytest.raises(OpError, match=r"tanh: no VJP .*test_autodiff.py"):
            grad(lambda x: F.sum(F.tanh(x)))(_t([1.0]))
    finally:
        object.__setattr__(op, "vjp", saved)


def _second_order_cases():
    from hlotrace.ops import OPS
    from hlotrace.ops.registry import is_differentiable

    names = [n for n, op in sorted(OPS.items()) if op.family == "elementwise" and is_differentiable(op)]
    return [*(n for n in names if n not in ("where", "astype")), "matmul"]


@pytest.mark.parametrize("name", _second_order_cases())
def test_gradient_of_gradient_matches_finite_differences(name):
    """For every differentiable elementwise op (and matmul): the gradient of
    sum(v * grad(sum(w * op(x, y)))) — taped VJPs differentiated again — against central
    differences of the first-order gradient, in float64 on a domain where every op is smooth."""
    from hlotrace.ops import OPS

    op = OPS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    arity = 1 if name in ("negative", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos") else 2
    shapes = [(3, 4), (4, 2)] if name == "matmul" else [(3,)] * arity
    xs = [rng.uniform(0.5, 2.0, s) for s in shapes]
    out_shape = _apply(op, *[ht.tensor(x) for x in xs]).shape
    w, v = rng.standard_normal(out_shape), rng.standard_normal(shapes[0])

    def first(x0, *rest):
        return grad(lambda a: F.sum(ht.tensor(w) * _apply(op, a, *rest)))(x0)

    def second(x0):
        return grad(lambda a: F.sum(first(a, *rest) * ht.tensor(v)))(x0)

    rest = [ht.tensor(x) for x in xs[1:]]
    analytic = second(ht.tensor(xs[0])).numpy()
    h = 1e-6
    numeric = np.zeros_like(xs[0])
    for i in np.ndindex(xs[0].shape):
        plus, minus = xs[0].copy(), xs[0].copy()
        plus[i] += h
        minus[i] -= h
        fp = np.sum(first(ht.tensor(plus), *rest).numpy() * v)
        fm = np.sum(first(ht.tensor(minus), *rest).numpy() * v)
        numeric[i] = (fp - fm) / (2 * h)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)


def _apply(op, *args):
    from hlotrace.dispatch import apply

    return apply(op, *args)


def test_a_vjp_returning_a_gradient_of_another_shape_of_the_same_size_is_an_error():
    """The engine sums broadcast dims; a gradient in another layout (a (4, 5) gradient of a
    (5, 4) input, the mutant vjp/matmul-shared-b-grad-swapped) used to be reshaped silently."""
    from hlotrace.autodiff import unbroadcast
    from hlotrace.errors import OpError

    with pytest.raises(OpError, match=r"gradient of shape \[4, 5\] for an input of shape \[5, 4\]"):
        unbroadcast(ht.tensor(np.ones((4, 5), np.float32)), ht.tensor(np.ones((5, 4), np.float32)))
    summed = unbroadcast(ht.tensor(np.ones((2, 3, 5), np.float32)), ht.tensor(np.ones((1, 5), np.float64)))
    assert summed.shape == (1, 5) and summed.dtype == np.float64 and (summed.numpy() == 6).all()
