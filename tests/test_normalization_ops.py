"""Normalization and activation ops beyond the generated property and gradient tests:
PyTorch's formulas (written in NumPy), the conventions at the edges (-inf, -0.0, the
softplus threshold), attribute and shape errors, the composites (layer_norm's affine,
group_norm, batch_norm's training mode with its gradient and running statistics, eagerly
and compiled) and the nn modules."""

import math

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager, grad
from hlotrace.dispatch import apply
from hlotrace.errors import HlotraceError, OpError
from hlotrace.jit import xla_trace
from hlotrace.ops import get_op


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _compiled(fn, *args):
    traced = xla_trace(fn)
    traced(*args)
    return traced(*args)


_erf = np.vectorize(math.erf)
SPECIALS = [-np.inf, -50.0, -3.0, -0.5, -0.0, 0.0, 0.5, 3.0, 50.0, np.inf, np.nan]


# -- activations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kwargs", "torch_formula"),
    [
        ("gelu", {}, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
        (
            "gelu",
            {"approximate": "tanh"},
            lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        ),
        ("silu", {}, lambda x: x / (1 + np.exp(-x))),
        ("leaky_relu", {"negative_slope": 0.2}, lambda x: np.where(x > 0, x, 0.2 * x)),
        ("elu", {"alpha": 1.5}, lambda x: np.where(x > 0, x, 1.5 * np.expm1(x))),
        ("softplus", {"beta": 2.0, "threshold": 5.0}, lambda x: np.where(2 * x > 5, x, np.log1p(np.exp(2 * x)) / 2)),
    ],
)
def test_activations_match_pytorch_formulas_on_moderate_values(name, kwargs, torch_formula):
    x = np.linspace(-4, 4, 41)
    expected = torch_formula(x)
    fn = getattr(F, name)
    np.testing.assert_allclose(fn(_t(x, "float64"), **kwargs).numpy(), expected, rtol=1e-12, atol=1e-15)
    compiled = _compiled(lambda v: fn(v, **kwargs), _t(x)).numpy()
    np.testing.assert_allclose(compiled, expected.astype(np.float32), rtol=2e-6, atol=1e-6)


def test_activation_limits_and_signed_zeros():
    x = _t(SPECIALS)
    gelu, silu = F.gelu(x).numpy(), F.silu(x).numpy()
    for out in (gelu, silu, F.gelu(x, approximate="tanh").numpy()):
        assert out[0] == 0 and np.signbit(out[0])  # the limit at -inf, from below
        assert out[4] == 0 and np.signbit(out[4]) and out[5] == 0 and not np.signbit(out[5])
        assert out[9] == np.inf and np.isnan(out[10])
    assert np.signbit(gelu[1]) and np.signbit(silu[1])  # underflow keeps the sign
    elu = F.elu(x, alpha=2.0).numpy()
    assert elu[0] == -2.0 and np.signbit(elu[4]) and elu[9] == np.inf and np.isnan(elu[10])
    leaky = F.leaky_relu(x, negative_slope=0.0).numpy()
    assert leaky[0] == 0 and np.signbit(leaky[0])  # not -inf * 0 = NaN
    negative_slope = F.leaky_relu(_t([0.0, -0.0, -2.0]), negative_slope=-0.5).numpy()
    assert np.signbit(negative_slope[0]) and not np.signbit(negative_slope[1]) and negative_slope[2] == 1.0
    soft = F.softplus(x).numpy()
    assert soft[0] == 0 and not np.signbit(soft[0]) and soft[9] == np.inf and np.isnan(soft[10])
    np.testing.assert_allclose(soft[4:6], [math.log(2)] * 2, rtol=1e-7)


@pytest.mark.parametrize("name", ["gelu", "silu", "elu", "softplus", "leaky_relu", "normal_cdf"])
def test_activation_specials_compile_to_the_eager_values(name):
    fn = getattr(F, name)
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        x = _t(SPECIALS, dtype)
        eager, compiled = fn(x).numpy(), _compiled(fn, x).numpy()
        assert compiled.dtype == eager.dtype == x.dtype
        number = ~np.isnan(eager)  # a NaN's sign bit means nothing
        np.testing.assert_array_equal(np.signbit(compiled)[number], np.signbit(eager)[number])
        np.testing.assert_allclose(compiled.astype(np.float64), eager.astype(np.float64), rtol=1e-2)


def test_softplus_never_overflows_below_a_large_threshold():
    x = _t([100.0, 200.0, -200.0])
    out = F.softplus(x, threshold=1000.0).numpy()  # PyTorch's log1p(exp(x)) is inf here
    np.testing.assert_allclose(out, [100.0, 200.0, 0.0])
    np.testing.assert_allclose(_compiled(lambda v: F.softplus(v, threshold=1000.0), x).numpy(), out)
    # The linear branch is exact: x itself.
    assert F.softplus(_t([30.0]), beta=1.0).numpy()[0] == 30.0


def test_activation_gradients_at_the_conventions():
    x = _t([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(grad(lambda v: F.leaky_relu(v, 0.1).sum())(x).numpy(), [0.1, 0.1, 1.0])
    np.testing.assert_allclose(grad(lambda v: F.elu(v, 2.0).sum())(x).numpy(), [2 * math.exp(-1), 2.0, 1.0], 1e-6)
    g = grad(lambda v: F.gelu(v).sum())(_t([0.0])).numpy()
    np.testing.assert_allclose(g, [0.5])
    g = grad(lambda v: F.softplus(v, beta=2.0, threshold=4.0).sum())(_t([0.0, 3.0])).numpy()
    np.testing.assert_allclose(g, [0.5, 1.0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x: F.gelu(x, approximate="erf"), "approximate"),
        (lambda x: F.softplus(x, beta=0.0), "beta= must be positive"),
        (lambda x: F.softplus(x, threshold=float("nan")), "threshold"),
        (lambda x: F.leaky_relu(x, negative_slope=float("inf")), "finite"),
        (lambda x: F.elu(x, alpha="1"), "number"),
        (lambda x: F.silu(x.astype("int32")), "float tensors only"),
        (lambda x: apply(get_op("gelu"), x, alpha=1.0), "unknown attributes"),
    ],
)
def test_activation_attribute_errors(call, match):
    with pytest.raises(OpError, match=match):
        call(_t([1.0]))


def test_activation_modules():
    x = _t([-1.0, 0.5, 2.0])
    pairs = [
        (nn.GELU(approximate="tanh"), F.gelu(x, approximate="tanh")),
        (nn.SiLU(), F.silu(x)),
        (nn.LeakyReLU(0.3), F.leaky_relu(x, 0.3)),
        (nn.ELU(0.5), F.elu(x, 0.5)),
        (nn.Softplus(2.0, 3.0), F.softplus(x, 2.0, 3.0)),
        (nn.Sigmoid(), F.sigmoid(x)),
        (nn.Tanh(), F.tanh(x)),
    ]
    for module, expected in pairs:
        np.testing.assert_array_equal(module(x).numpy(), expected.numpy())
        assert list(module.parameters()) == []
    assert "approximate='tanh'" in repr(nn.GELU(approximate="tanh"))


# -- layer_norm and group_norm ----------------------------------------------------------------


def _normalize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def test_layer_norm_matches_pytorch_with_affine():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5))
    w, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    expected = _normalize(x, (2, 3), 1e-3) * w + b
    out = F.layer_norm(_t(x, "float64"), (4, 5), _t(w, "float64"), _t(b, "float64"), eps=1e-3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    compiled = _compiled(lambda v, w, b: F.layer_norm(v, (4, 5), w, b, eps=1e-3), _t(x), _t(w), _t(b))
    np.testing.assert_allclose(compiled.numpy(), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(F.layer_norm(_t(x), 5).numpy(), _normalize(x, (3,), 1e-5), rtol=1e-5, atol=1e-5)


def test_layer_norm_constant_slices_are_exactly_zero_and_nan_spreads_over_its_slice():
    x = np.array([[0.1, 0.1, 0.1, 0.1, 0.1], [1.0, 2.0, np.nan, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    for out in (F.layer_norm(_t(x), (5,)), _compiled(lambda v: F.layer_norm(v, (5,)), _t(x))):
        out = out.numpy()
        assert (out[0] == 0).all() and not np.signbit(out[0]).any()
        assert np.isnan(out[1]).all() and np.isfinite(out[2]).all()


def test_layer_norm_half_precision_computes_statistics_in_float32():
    # An offset of 1000 with spread 1: float16 holds the values, but sums of squares in
    # float16 would overflow (6 * 1000² > 65504) and lose the variance.
    x = (1000 + np.arange(6) % 3).astype(np.float16)
    expected = _normalize(x.astype(np.float64), (0,), 1e-5)
    for out in (F.layer_norm(_t(x, "float16"), (6,)), _compiled(lambda v: F.layer_norm(v, (6,)), _t(x, "float16"))):
        assert out.dtype == np.float16
        np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def test_layer_norm_and_group_norm_errors_name_the_shapes():
    x = _t(np.zeros((2, 4, 3)))
    with pytest.raises(OpError, match=r"normalized_shape \(4,\) must be a non-empty suffix"):
        F.layer_norm(x, (4,))
    with pytest.raises(OpError, match=r"weight must have shape \(3,\)"):
        F.layer_norm(x, 3, weight=_t(np.ones(4)))
    with pytest.raises(OpError, match="eps= must be finite and >= 0"):
        F.layer_norm(x, 3, eps=-1.0)
    with pytest.raises(OpError, match="num_groups=3 must divide the 4 channels"):
        F.group_norm(x, 3)
    with pytest.raises(OpError, match=r"bias must have shape \(4,\)"):
        F.group_norm(x, 2, bias=_t(np.ones(3)))


def _group_norm_numpy(x, groups, w, b, eps):
    n, c = x.shape[:2]
    y = _normalize(x.reshape(n, groups, -1), (2,), eps).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * w.reshape(shape) + b.reshape(shape)


@pytest.mark.parametrize(("shape", "groups"), [((2, 4, 3, 2), 2), ((3, 6), 3), ((1, 4, 5), 4), ((2, 3, 2), 1)])
def test_group_norm_matches_pytorch_and_its_gradient_finite_differences(shape, groups):
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal(shape), rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    expected = _group_norm_numpy(x, groups, w, b, 1e-3)
    out = F.group_norm(_t(x, "float64"), groups, _t(w, "float64"), _t(b, "float64"), eps=1e-3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    compiled = _compiled(lambda v, w, b: F.group_norm(v, groups, w, b, eps=1e-3), _t(x), _t(w), _t(b))
    np.testing.assert_allclose(compiled.numpy(), expected, rtol=1e-4, atol=1e-5)

    weights = rng.standard_normal(shape)
    grads = grad(lambda *a: (F.group_norm(a[0], groups, a[1], a[2], eps=1e-3) * weights).sum(), argnums=(0, 1, 2))(
        _t(x, "float64"), _t(w, "float64"), _t(b, "float64")
    )
    for k, (value, g) in enumerate(zip((x, w, b), grads, strict=True)):
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            args = [x, w, b]
            plus, minus = value.copy(), value.copy()
            plus[i] += 1e-6
            minus[i] -= 1e-6
            args[k] = plus
            fp = (_group_norm_numpy(*args[:1], groups, *args[1:], 1e-3) * weights).sum()
            args[k] = minus
            fm = (_group_norm_numpy(*args[:1], groups, *args[1:], 1e-3) * weights).sum()
            numeric[i] = (fp - fm) / 2e-6
        np.testing.assert_allclose(g.numpy(), numeric, rtol=1e-6, atol=1e-7)


def test_norm_modules_have_pytorch_parameters():
    ln = nn.LayerNorm((3, 4))
    assert [(n, p.shape) for n, p in ln.named_parameters()] == [("weight", (3, 4)), ("bias", (3, 4))]
    assert list(nn.LayerNorm(4, elementwise_affine=False).parameters()) == []
    gn = nn.GroupNorm(2, 4)
    np.testing.assert_array_equal(gn.weight.numpy(), np.ones(4))
    x = _t(np.random.default_rng(2).standard_normal((2, 4, 3)))
    np.testing.assert_allclose(gn(x).numpy(), F.group_norm(x, 2).numpy())
    np.testing.assert_allclose(nn.LayerNorm(3)(x).numpy(), F.layer_norm(x, 3).numpy())
    with pytest.raises(HlotraceError, match=r"nn.GroupNorm: num_groups=3: expected a divisor of num_channels=4"):
        nn.GroupNorm(3, 4)


# -- batch_norm -------------------------------------------------------------------------------


def _bn_train_numpy(x, w, b, eps):
    axes = tuple(d for d in range(x.ndim) if d != 1)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return xhat * w.reshape(shape) + b.reshape(shape), mean, var


def _bn_train_grads_numpy(x, w, b, eps, g):
    """PyTorch's closed-form batch-norm backward (training mode)."""
    axes = tuple(d for d in range(x.ndim) if d != 1)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    n = x.size // x.shape[1]
    mean, var = x.mean(axis=axes).reshape(shape), x.var(axis=axes).reshape(shape)
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    dxhat = g * w.reshape(shape)
    dx = (
        rstd
        / n
        * (n * dxhat - dxhat.sum(axis=axes, keepdims=True) - xhat * (dxhat * xhat).sum(axis=axes, keepdims=True))
    )
    return dx, (g * xhat).sum(axis=axes), g.sum(axis=axes)


def test_batch_norm_training_forward_gradient_and_running_statistics():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((4, 3, 2, 2)), rng.standard_normal(3), rng.standard_normal(3)
    g = rng.standard_normal(x.shape)
    expected, mean, var = _bn_train_numpy(x, w, b, 1e-3)
    rm, rv = _t(np.full(3, 0.5), "float64"), _t(np.full(3, 2.0), "float64")
    out = F.batch_norm(_t(x, "float64"), rm, rv, _t(w, "float64"), _t(b, "float64"), training=True, eps=1e-3)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    # MegEngine's momentum: running = 0.9 * running + 0.1 * batch (unbiased variance).
    np.testing.assert_allclose(rm.numpy(), 0.9 * 0.5 + 0.1 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.9 * 2.0 + 0.1 * var * 16 / 15, rtol=1e-12)

    def loss(x, w, b):
        return (F.batch_norm(x, None, None, w, b, training=True, eps=1e-3) * g).sum()

    grads = grad(loss, argnums=(0, 1, 2))(_t(x, "float64"), _t(w, "float64"), _t(b, "float64"))
    for got, want in zip(grads, _bn_train_grads_numpy(x, w, b, 1e-3, g), strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # And against central differences of the NumPy forward.
    dx = grads[0].numpy()
    for i in [(0, 0, 0, 0), (1, 2, 1, 0), (3, 1, 1, 1), (2, 0, 0, 1)]:
        plus, minus = x.copy(), x.copy()
        plus[i] += 1e-6
        minus[i] -= 1e-6
        numeric = ((_bn_train_numpy(plus, w, b, 1e-3)[0] - _bn_train_numpy(minus, w, b, 1e-3)[0]) * g).sum() / 2e-6
        np.testing.assert_allclose(dx[i], numeric, rtol=1e-6, atol=1e-8)


def test_batch_norm_eval_uses_running_statistics_and_leaves_them():
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    rm, rv = _t([1.0, 2.0, 3.0]), _t([4.0, 1.0, 0.25])
    out = F.batch_norm(_t(x), rm, rv, eps=0.0).numpy()
    expected = (x - np.array([1, 2, 3]).reshape(1, 3, 1)) / np.sqrt(np.array([4, 1, 0.25]).reshape(1, 3, 1))
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_array_equal(rm.numpy(), [1, 2, 3])
    compiled = _compiled(lambda v, m, s: F.batch_norm(v, m, s, eps=0.0), _t(x), rm, rv)
    np.testing.assert_allclose(compiled.numpy(), expected, rtol=1e-6)


def test_batch_norm_half_precision_statistics_in_float32():
    x = (1000 + np.arange(24) % 4).astype(np.float16).reshape(3, 2, 4)
    out = F.batch_norm(_t(x, "float16"), None, None, training=True)
    assert out.dtype == np.float16
    expected = _bn_train_numpy(x.astype(np.float64), np.ones(2), np.zeros(2), 1e-5)[0]
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def test_batch_norm_errors():
    with pytest.raises(OpError, match="more than one value per channel"):
        F.batch_norm(_t(np.ones((1, 3))), _t(np.zeros(3)), _t(np.ones(3)), training=True)
    with pytest.raises(OpError, match=r"running_mean must have shape \(3,\)"):
        F.batch_norm(_t(np.ones((2, 3))), _t(np.zeros(4)), _t(np.ones(3)))
    with pytest.raises(OpError, match="both running_mean and running_var"):
        F.batch_norm(_t(np.ones((2, 3))), _t(np.zeros(3)), None)
    with pytest.raises(OpError, match=r"shape \(N, C, \.\.\.\)"):
        F.batch_norm(_t(np.ones(3)), None, None)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3, momentum=0.8)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.bn(x))


def _bn_step(x, *, net, opt, gm):
    with gm:
        y = net(x)
        loss = (y * y).mean()
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _bn_setup():
    net = _Net()
    opt = optim.SGD(net.parameters(), lr=0.1)
    return net, opt, GradManager().attach(net.parameters())


def test_batch_norm_module_updates_running_statistics_eagerly_and_compiled_alike():
    eager, compiled = _bn_setup(), _bn_setup()
    step = xla_trace(_bn_step)
    rng = np.random.default_rng(4)
    for i in range(3):  # call 1 records, calls 2 and 3 run the executable
        x = _t(rng.standard_normal((4, 3, 2, 2)) * (i + 1) + i)
        le = _bn_step(x, net=eager[0], opt=eager[1], gm=eager[2])
        lc = step(x, net=compiled[0], opt=compiled[1], gm=compiled[2])
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
        for (name, a), (_, b) in zip(compiled[0].bn.named_buffers(), eager[0].bn.named_buffers(), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, err_msg=f"{name} after step {i + 1}")
        for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert step.cache_size == 1
    assert not np.allclose(eager[0].bn.running_mean.numpy(), 0)

    # Eval mode selects another program that reads the running statistics and leaves them.
    net = compiled[0].eval()
    before = [b.numpy().copy() for b in net.buffers()]
    forward = xla_trace(lambda x, *, net: net(x))
    x = _t(rng.standard_normal((2, 3, 2, 2)))
    forward(x, net=net)
    out = forward(x, net=net).numpy()
    for a, b in zip(net.buffers(), before, strict=True):
        np.testing.assert_array_equal(a.numpy(), b)
    mean, var = (b.reshape(1, 3, 1, 1) for b in before[:2])  # then num_batches_tracked
    assert int(before[2]) == 3 and int(eager[0].bn.num_batches_tracked.numpy()) == 3
    w, b = (p.numpy().reshape(1, 3, 1, 1) for p in (net.bn.weight, net.bn.bias))
    expected = F.gelu(_t((x.numpy() - mean) / np.sqrt(var + 1e-5) * w + b)).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_batch_norm_module_buffers_modes_and_options():
    bn = nn.BatchNorm2d(2)
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var", "num_batches_tracked"]
    np.testing.assert_array_equal(bn.running_var.numpy(), [1, 1])
    x = _t(np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2))
    bn(x)
    assert not np.array_equal(bn.running_mean.numpy(), [0, 0])
    saved = bn.running_mean.numpy().copy()
    bn.eval()(x)
    np.testing.assert_array_equal(bn.running_mean.numpy(), saved)
    plain = nn.BatchNorm2d(2, affine=False, track_running_stats=False).eval()
    assert list(plain.parameters()) == [] and list(plain.buffers()) == []
    np.testing.assert_allclose(plain(x).numpy(), F.batch_norm(x, None, None, training=True).numpy())
    with pytest.raises(HlotraceError, match=r"\(N, C, H, W\)"):
        bn(_t(np.ones((2, 2))))


def test_attributes_round_trip_through_trace_files(tmp_path):
    from hlotrace.trace import Trace

    @xla_trace
    def f(x, m, v):
        y = F.softplus(x, beta=2.0, threshold=float("inf")) + F.gelu(x, approximate="tanh")
        y = F.layer_norm(y, (2, 3)) + F.group_norm(y, 2) + F.leaky_relu(y, -0.0)
        return F.batch_norm(y, m, v, eps=0.0)

    args = (_t(np.arange(12).reshape(2, 2, 3) - 5.5), _t([0.0, 1.0]), _t([1.0, 2.0]))
    f(*args)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.records == f.trace.records
    ops = {r.op: r.attrs for r in loaded.records}
    assert ops["softplus"]["threshold"] == float("inf") and ops["layer_norm"]["axis"] in ((1, 2), (2,))
    assert math.copysign(1.0, ops["leaky_relu"]["negative_slope"]) == -1.0
