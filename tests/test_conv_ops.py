"""The convolution ops beyond what the generated property and gradient tests check: the
references against independent definitions (direct loops, adjointness) and PyTorch's
documented output sizes, the conventions chosen at the edges (padding adds nothing, float16
accumulates in float32, mixed dtypes, bias), attribute errors, second-order gradients, the
trace file round trip of the attributes, and nn.Conv2d."""

import itertools
import math

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager, grad
from hlotrace.errors import HlotraceError, OpError
from hlotrace.jit import xla_trace
from hlotrace.nn import init
from hlotrace.trace import Trace


def _t(values, dtype="float64"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _randn(rng, *shape):
    return rng.standard_normal(shape)


def _loop_conv2d(x, w, stride, padding, dilation, groups):
    """conv2d by its textbook definition, one output element at a time."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    for b, oc, i, j in itertools.product(range(n), range(o), range(ho), range(wo)):
        g = oc // (o // groups)
        for ci, a, e in itertools.product(range(cg), range(kh), range(kw)):
            r, q = i * sh - ph + a * dh, j * sw - pw + e * dw
            if 0 <= r < h and 0 <= q < wd:
                out[b, oc, i, j] += x[b, g * cg + ci, r, q] * w[oc, ci, a, e]
    return out


def _loop_conv_transpose2d(x, w, stride, padding, output_padding, dilation, groups):
    """conv_transpose2d as PyTorch documents it: every input element scatters x * w."""
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = stride, padding, output_padding, dilation
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oh + 1
    wo = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + ow + 1
    out = np.zeros((n, og * groups, ho, wo))
    cg = c // groups
    for b, ci, i, j, oc, a, e in itertools.product(
        range(n), range(c), range(h), range(wd), range(og), range(kh), range(kw)
    ):
        r, q = i * sh - ph + a * dh, j * sw - pw + e * dw
        if 0 <= r < ho and 0 <= q < wo:
            out[b, (ci // cg) * og + oc, r, q] += x[b, ci, i, j] * w[ci, oc, a, e]
    return out


CASES = [
    # stride, padding, dilation, groups, output_padding (for the transpose)
    ((1, 1), (0, 0), (1, 1), 1, (0, 0)),
    ((2, 3), (1, 2), (1, 2), 2, (1, 1)),
    ((3, 1), (2, 0), (2, 1), 3, (2, 0)),
    ((1, 2), (0, 1), (2, 2), 1, (1, 1)),  # output_padding >= stride in H (dilation allows it)
]


@pytest.mark.parametrize(("stride", "padding", "dilation", "groups", "output_padding"), CASES)
def test_references_match_direct_loops(stride, padding, dilation, groups, output_padding):
    rng = np.random.default_rng(sum(stride) + groups)
    x, w = _randn(rng, 2, 2 * groups, 5, 6), _randn(rng, 2 * groups, 2, 3, 2)
    got = F.conv2d(_t(x), _t(w), stride=stride, padding=padding, dilation=dilation, groups=groups).numpy()
    np.testing.assert_allclose(got, _loop_conv2d(x, w, stride, padding, dilation, groups), rtol=1e-12, atol=1e-12)
    got = F.conv_transpose2d(
        _t(x), _t(w), stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups
    ).numpy()
    expected = _loop_conv_transpose2d(x, w, stride, padding, output_padding, dilation, groups)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("stride", "padding", "dilation", "groups", "output_padding"), CASES)
def test_conv_transpose_is_the_adjoint_of_conv_and_weight_grad_its_weight_derivative(
    stride, padding, dilation, groups, output_padding
):
    # <conv2d(z, w), y> = <z, conv_transpose2d(y, w)> = <w, conv2d_weight_grad(z, y)>.
    rng = np.random.default_rng(7)
    w = _randn(rng, 2 * groups, 1, 2, 3)
    z = _randn(rng, 2, groups, 7, 8)
    conv = F.conv2d(_t(z), _t(w), stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = _randn(rng, *conv.shape)
    lhs = float(np.sum(conv.numpy() * y))
    leftover = [
        (n + 2 * p - d * (k - 1) - 1) % s
        for n, p, d, k, s in zip((7, 8), padding, dilation, (2, 3), stride, strict=True)
    ]
    back = F.conv_transpose2d(
        _t(y), _t(w), stride=stride, padding=padding, output_padding=leftover, dilation=dilation, groups=groups
    )
    assert back.shape == z.shape
    assert math.isclose(lhs, float(np.sum(z * back.numpy())), rel_tol=1e-12)
    dw = F.conv2d_weight_grad(_t(z), _t(y), (2, 3), stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert dw.shape == w.shape
    assert math.isclose(lhs, float(np.sum(w * dw.numpy())), rel_tol=1e-12)


def test_output_sizes_follow_pytorch_formulas():
    # The examples of PyTorch's Conv2d / ConvTranspose2d / Conv1d documentation (with one
    # channel and batch 1 instead of 16 and 20: the sizes depend on the spatial dims only).
    x = F.zeros((1, 1, 50, 100))
    assert F.conv2d(x, F.zeros((1, 1, 3, 5)), stride=2, padding=(4, 2)).shape == (1, 1, 28, 50)
    assert F.conv2d(x, F.zeros((1, 1, 3, 5)), stride=(2, 1), padding=(4, 2), dilation=(3, 1)).shape == (1, 1, 26, 100)
    assert F.conv1d(F.zeros((1, 1, 50)), F.zeros((3, 1, 3)), stride=2).shape == (1, 3, 24)
    up = F.conv_transpose2d(x, F.zeros((1, 3, 3, 5)), stride=(2, 1), padding=(4, 2))
    assert up.shape == (1, 3, 93, 100)
    # Upsampling that restores the size conv2d took (output_padding picks among candidates).
    down = F.conv2d(F.zeros((1, 2, 12, 12)), F.zeros((2, 2, 3, 3)), stride=2, padding=1)
    assert down.shape == (1, 2, 6, 6)
    back = F.conv_transpose2d(down, F.zeros((2, 2, 3, 3)), stride=2, padding=1, output_padding=1)
    assert back.shape == (1, 2, 12, 12)


def test_padding_adds_nothing_in_the_reference_and_non_finite_inputs_are_exact():
    w = np.ones((1, 1, 3, 3))
    w[0, 0, 0, 0] = np.inf  # reads above-left of each output position: padding for the first row/column
    out = F.conv2d(_t(np.ones((1, 1, 3, 3))), _t(w), padding=1).numpy()[0, 0]
    np.testing.assert_array_equal(out, [[4.0, 6.0, 4.0], [6.0, np.inf, np.inf], [4.0, np.inf, np.inf]])
    # NaN/inf in x reach exactly the outputs whose windows hold them, compiled as eagerly.
    x = np.ones((1, 1, 4, 4))
    x[0, 0, 0, 0], x[0, 0, 3, 3] = np.nan, -np.inf

    def f(x, w):
        return F.conv2d(x, w, padding=1, stride=2)

    expected = [[np.nan, 6.0], [6.0, -np.inf]]
    np.testing.assert_array_equal(f(_t(x), _t(np.ones((1, 1, 3, 3)))).numpy()[0, 0], expected)
    compiled = xla_trace(f)
    compiled(_t(x), _t(np.ones((1, 1, 3, 3))))
    np.testing.assert_array_equal(compiled(_t(x), _t(np.ones((1, 1, 3, 3)))).numpy()[0, 0], expected)


def test_half_precision_accumulates_in_float32_and_dtypes_promote():
    # 2048 + 1 + 1 in float16 steps is 2048; summed in float32 and rounded once, 2050.
    x = _t([[[2048.0, 1.0, 1.0]]], "float16")
    w = _t([[[1.0, 1.0, 1.0]]], "float16")
    compiled = xla_trace(lambda x, w: F.conv1d(x, w))
    compiled(x, w)
    for out in (F.conv1d(x, w), compiled(x, w)):
        assert out.dtype == np.float16 and out.numpy().tolist() == [[[2050.0]]]
    # bfloat16: 256 + eight 1s is 256 in bfloat16 steps, 264 in float32.
    x, w = _t([[[256.0] + [1.0] * 8]], "bfloat16"), _t(np.ones((1, 1, 9)), "bfloat16")
    compiled(x, w)
    for out in (F.conv1d(x, w), compiled(x, w)):
        assert out.dtype == ht.dtypes.bfloat16 and out.numpy().astype(np.float32).tolist() == [[[264.0]]]
    mixed = F.conv2d(_t(np.ones((1, 1, 2, 2)), "bfloat16"), _t(np.ones((1, 1, 1, 1)), "float16"))
    assert mixed.dtype == np.float32
    assert F.conv2d(_t(np.ones((1, 1, 2, 2)), "float32"), _t(np.ones((1, 1, 1, 1)))).dtype == np.float64


def test_zero_size_batch_and_all_zero_sums_are_positive_zero():
    out = F.conv2d(F.zeros((0, 2, 4, 4)), F.ones((3, 2, 2, 2)), padding=1)
    assert out.shape == (0, 3, 5, 5)
    neg = F.conv2d(_t(np.full((1, 1, 2, 2), -0.0)), _t(np.ones((1, 1, 2, 2))))
    assert neg.numpy()[0, 0, 0, 0] == 0 and not np.signbit(neg.numpy()[0, 0, 0, 0])


def test_bias_is_a_broadcast_add_over_channels():
    rng = np.random.default_rng(0)
    x, w, b = _randn(rng, 2, 3, 5, 5), _randn(rng, 4, 3, 3, 3), _randn(rng, 4)
    plain = F.conv2d(_t(x), _t(w), padding=1).numpy()
    np.testing.assert_allclose(F.conv2d(_t(x), _t(w), _t(b), padding=1).numpy(), plain + b[:, None, None])
    wt = np.transpose(w[:3], (1, 0, 2, 3))  # (3 in, 3 out, 3, 3)
    up = F.conv_transpose2d(_t(x), _t(wt), _t(b[:3]), stride=2)
    assert up.shape == (2, 3, 11, 11)
    np.testing.assert_allclose(up.numpy(), F.conv_transpose2d(_t(x), _t(wt), stride=2).numpy() + b[:3, None, None])
    line = F.conv1d(_t(x[:, :, 0]), _t(w[:, :, 0]), _t(b))
    np.testing.assert_allclose(line.numpy(), F.conv1d(_t(x[:, :, 0]), _t(w[:, :, 0])).numpy() + b[:, None])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: F.conv2d(_t(np.ones((1, 2, 4, 4)), "int32"), _t(np.ones((1, 2, 1, 1)))),
            "conv2d: input x must be a float",
        ),
        (lambda: F.conv2d(_t(np.ones((1, 2, 4))), _t(np.ones((1, 2, 1, 1)))), r"conv2d: input x must have rank 4"),
        (
            lambda: F.conv2d(_t(np.ones((1, 4, 4, 4))), _t(np.ones((3, 2, 1, 1))), groups=2),
            "groups=2 does not divide the 3",
        ),
        (lambda: F.conv2d(_t(np.ones((1, 4, 4, 4))), _t(np.ones((2, 3, 1, 1)))), r"weight dim 1 \(3\) times groups"),
        (lambda: F.conv2d(_t(np.ones((1, 1, 2, 2))), _t(np.ones((1, 1, 3, 3)))), "the kernel .* does not fit"),
        (lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 3, 3))), dilation=2), "extent 5"),
        (lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 1, 1))), stride=0), "stride must be >= 1"),
        (
            lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 1, 1))), padding=((1, 0), (0, 1))),
            "pairs are not",
        ),
        (lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 1, 1))), padding="same"), "strings are not"),
        (
            lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 1, 1))), padding=(1, 1, 1)),
            "needs an int or 2",
        ),
        (lambda: F.conv2d(_t(np.ones((1, 1, 4, 4))), _t(np.ones((1, 1, 1, 1))), groups=0), "groups must be >= 1"),
        (lambda: F.conv2d(_t(np.ones((1, 0, 4, 4))), _t(np.ones((1, 0, 1, 1)))), "empty channel or spatial dim"),
        (lambda: F.conv2d(_t(np.ones((1, 2, 4, 4))), _t(np.ones((3, 2, 1, 1))), _t(np.ones(2))), "bias of shape"),
        (lambda: F.conv1d(_t(np.ones((1, 2, 4))), _t(np.ones((3, 2, 1))), stride=(1, 1)), "conv1d: stride needs"),
        (
            lambda: F.conv_transpose2d(
                _t(np.ones((1, 2, 4, 4))), _t(np.ones((2, 1, 3, 3))), stride=2, output_padding=2
            ),
            "output_padding 2 of spatial dim 0 must be smaller than its stride",
        ),
        (
            lambda: F.conv_transpose2d(_t(np.ones((1, 2, 1, 1))), _t(np.ones((2, 1, 1, 1))), padding=1),
            "conv_transpose2d: the result's spatial dim 0 would have size -1",
        ),
        (
            lambda: F.conv_transpose2d(_t(np.ones((1, 2, 4, 4))), _t(np.ones((3, 1, 1, 1)))),
            r"weight dim 0 \(3\) must equal the input channels \(2\)",
        ),
        (
            lambda: F.conv2d_weight_grad(_t(np.ones((1, 2, 4, 4))), _t(np.ones((1, 3, 2, 2))), 2),
            r"ct of shape \(1, 3, 2, 2\) is not the shape of conv2d's result, \(1, 3, 3, 3\)",
        ),
        (
            lambda: F.conv2d_weight_grad(_t(np.ones((1, 2, 4, 4))), _t(np.ones((1, 3, 3, 3))), None),
            "conv2d_weight_grad: kernel_size must be an int",
        ),
    ],
)
def test_bad_inputs_name_the_op_and_the_user_line(call, message):
    with pytest.raises(OpError, match=message) as info:
        call()
    assert "test_conv_ops.py" in str(info.value)


def _second_order(x, w, stride, padding, dilation, groups):
    """sum(v * d/dx sum(u * conv2d(x, w)^2)) differentiated wrt w: a second-order gradient."""

    def inner(x, w, u):
        y = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return (u * y * y).sum()

    def outer(x, w, u, v):
        gx = grad(inner, argnums=0)(x, w, u)
        return (gx * v).sum()

    return outer, grad(outer, argnums=(0, 1))


def test_second_order_gradients_match_finite_differences_eagerly_and_compiled():
    rng = np.random.default_rng(3)
    attrs = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    x, w = _randn(rng, 2, 4, 5, 6), _randn(rng, 4, 2, 2, 2)
    outer, outer_grad = _second_order(x, w, **attrs)
    u = _randn(rng, *F.conv2d(_t(x), _t(w), **attrs).shape)
    v = _randn(rng, *x.shape)
    gx, gw = outer_grad(_t(x), _t(w), _t(u), _t(v))
    h = 1e-6
    for array, g in ((x, gx.numpy()), (w, gw.numpy())):
        for index in [tuple(rng.integers(0, d) for d in array.shape) for _ in range(6)]:
            plus, minus = array.copy(), array.copy()
            plus[index] += h
            minus[index] -= h
            args_p = (plus, w) if array is x else (x, plus)
            args_m = (minus, w) if array is x else (x, minus)
            fd = (
                float(outer(_t(args_p[0]), _t(args_p[1]), _t(u), _t(v)).numpy())
                - float(outer(_t(args_m[0]), _t(args_m[1]), _t(u), _t(v)).numpy())
            ) / (2 * h)
            assert math.isclose(g[index], fd, rel_tol=1e-5, abs_tol=1e-6), (index, g[index], fd)
    compiled = xla_trace(outer_grad)
    compiled(_t(x), _t(w), _t(u), _t(v))
    cx, cw = compiled(_t(x), _t(w), _t(u), _t(v))
    np.testing.assert_allclose(cx.numpy(), gx.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cw.numpy(), gw.numpy(), rtol=1e-12, atol=1e-12)
    ops = {r.op for r in compiled.trace.records}
    assert {"conv2d", "conv_transpose2d", "conv2d_weight_grad"} <= ops


def test_conv1d_gradients_are_conv2d_gradients_on_a_unit_height():
    rng = np.random.default_rng(4)
    x, w = _randn(rng, 2, 4, 9), _randn(rng, 6, 2, 3)
    attrs = dict(stride=2, padding=1, dilation=2, groups=2)
    g1 = grad(lambda x, w: (F.conv1d(x, w, **attrs) ** 2).sum(), argnums=(0, 1))(_t(x), _t(w))
    attrs2 = dict(stride=(1, 2), padding=(0, 1), dilation=(1, 2), groups=2)
    g2 = grad(lambda x, w: (F.conv2d(x, w, **attrs2) ** 2).sum(), argnums=(0, 1))(_t(x[:, :, None]), _t(w[:, :, None]))
    np.testing.assert_allclose(g1[0].numpy(), g2[0].numpy()[:, :, 0], rtol=1e-12)
    np.testing.assert_allclose(g1[1].numpy(), g2[1].numpy()[:, :, 0], rtol=1e-12)


def test_conv_transpose_gradient_when_output_padding_reaches_the_stride():
    # output_padding 1 with stride 1 (dilation 2 allows it): conv2d(ct, w) has a row more
    # than x; the VJP slices dx and zero-extends x for dw. Checked against finite differences.
    rng = np.random.default_rng(5)
    x, w = _randn(rng, 1, 2, 3, 3), _randn(rng, 2, 2, 2, 2)
    attrs = dict(stride=1, padding=0, output_padding=(1, 0), dilation=2)
    r = _randn(rng, *F.conv_transpose2d(_t(x), _t(w), **attrs).shape)

    def f(x, w):
        return (F.conv_transpose2d(x, w, **attrs) * _t(r)).sum()

    gx, gw = grad(f, argnums=(0, 1))(_t(x), _t(w))
    h = 1e-6
    for k, (array, g) in enumerate(((x, gx.numpy()), (w, gw.numpy()))):
        for index in np.ndindex(*array.shape):
            plus, minus = array.copy(), array.copy()
            plus[index] += h
            minus[index] -= h
            args_p, args_m = [x, w], [x, w]
            args_p[k], args_m[k] = plus, minus
            fd = (float(f(*map(_t, args_p)).numpy()) - float(f(*map(_t, args_m)).numpy())) / (2 * h)
            assert math.isclose(g[index], fd, rel_tol=1e-6, abs_tol=1e-8)


def test_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def f(x, w):
        return F.conv2d(x, w, stride=[2, 1], padding=1, groups=2) + 0.0

    x, w = _t(np.ones((1, 4, 4, 4)), "float32"), _t(np.ones((2, 2, 3, 3)), "float32")
    f(x, w)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.records == f.trace.records
    conv = next(r for r in loaded.records if r.op == "conv2d")
    assert conv.attrs == {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 2}


# -- nn.Conv2d -----------------------------------------------------------------------------


def test_conv2d_module_shapes_forward_and_repr():
    conv = nn.Conv2d(4, 6, (3, 1), stride=2, padding=(1, 0), groups=2)
    assert conv.weight.shape == (6, 2, 3, 1) and conv.bias.shape == (6,)
    assert [name for name, _ in conv.named_parameters()] == ["weight", "bias"]
    x = _t(np.random.default_rng(0).standard_normal((2, 4, 5, 5)), "float32")
    expected = F.conv2d(x, conv.weight, conv.bias, stride=2, padding=(1, 0), groups=2)
    np.testing.assert_array_equal(conv(x).numpy(), expected.numpy())
    assert conv(x).shape == (2, 6, 3, 3)
    assert "Conv2d(4, 6, kernel_size=(3, 1), stride=(2, 2), padding=(1, 0), groups=2)" in repr(conv)
    assert nn.Conv2d(1, 1, 1, bias=False).bias is None
    with pytest.raises(HlotraceError, match=r"nn.Conv2d: groups=2: expected a divisor of in_channels=3"):
        nn.Conv2d(3, 4, 1, groups=2)


def test_conv2d_module_init_bounds_and_seed():
    # PyTorch: kaiming_uniform_(a=sqrt(5)) on the weight and U(-k, k) on the bias, both with
    # k = 1/sqrt(fan_in), fan_in = in_channels / groups * kH * kW.
    init.seed(11)
    conv = nn.Conv2d(16, 32, 3, groups=2)
    bound = 1 / math.sqrt(8 * 9)
    w, b = conv.weight.numpy(), conv.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert w.max() > 0.95 * bound and w.min() < -0.95 * bound
    assert abs(float(w.mean())) < 0.05 * bound
    init.seed(11)
    again = nn.Conv2d(16, 32, 3, groups=2)
    np.testing.assert_array_equal(again.weight.numpy(), w)
    np.testing.assert_array_equal(again.bias.numpy(), b)


def _conv_net():
    init.seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, stride=2, groups=2))


def _train_step(x, *, net, opt, gm):
    with gm:
        loss = (net(x) ** 2).mean()
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def test_conv2d_module_trains_compiled_as_eagerly():
    nets = [_conv_net(), _conv_net()]
    setups = [(net, optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())) for net in nets]
    step = xla_trace(_train_step)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = _t(rng.standard_normal((2, 1, 6, 6)), "float32")
        eager = _train_step(x, net=setups[0][0], opt=setups[0][1], gm=setups[0][2])
        compiled = step(x, net=setups[1][0], opt=setups[1][1], gm=setups[1][2])
        np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5)
    for a, b in zip(nets[0].parameters(), nets[1].parameters(), strict=True):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert step.cache_size == 1
    assert {"conv2d", "conv_transpose2d", "conv2d_weight_grad"} <= {r.op for r in step.trace.records}
