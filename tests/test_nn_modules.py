"""Conv1d, ConvTranspose2d, InstanceNorm1d/2d, PixelShuffle/PixelUnshuffle and Upsample
against NumPy references written out with loops, and a small encoder/decoder trained
compiled as eagerly."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np_conv1d(x, w, b, stride, padding, dilation):
    n, _, length = x.shape
    out_channels, _, k = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding)))
    out_len = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, out_channels, out_len))
    for t in range(out_len):
        for j in range(k):
            out[:, :, t] += xp[:, :, t * stride + j * dilation] @ w[:, :, j].T
    return out + b[None, :, None]


def _np_conv_transpose2d(x, w, b, stride, padding, output_padding):
    n, _, h, wd = x.shape
    _, out_channels, kh, kw = w.shape
    full = np.zeros((n, out_channels, (h - 1) * stride + kh + output_padding, (wd - 1) * stride + kw + output_padding))
    for i in range(h):
        for j in range(wd):
            for a in range(kh):
                for d in range(kw):
                    full[:, :, i * stride + a, j * stride + d] += x[:, :, i, j] @ w[:, :, a, d]
    out_h = (h - 1) * stride - 2 * padding + kh + output_padding
    out_w = (wd - 1) * stride - 2 * padding + kw + output_padding
    return full[:, :, padding : padding + out_h, padding : padding + out_w] + b[None, :, None, None]


@pytest.mark.parametrize(("stride", "padding", "dilation"), [(1, 0, 1), (2, 2, 1), (1, 1, 2)])
def test_conv1d_matches_numpy(stride, padding, dilation):
    conv = nn.Conv1d(3, 5, 3, stride=stride, padding=padding, dilation=dilation)
    x = _rand(2, 3, 11)
    expected = _np_conv1d(x, conv.weight.numpy(), conv.bias.numpy(), stride, padding, dilation)
    np.testing.assert_allclose(conv(ht.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert conv.weight.shape == (5, 3, 3) and list(conv.state_dict()) == ["weight", "bias"]
    bound = 1 / np.sqrt(3 * 3)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound


@pytest.mark.parametrize(("stride", "padding", "output_padding"), [(1, 0, 0), (2, 1, 1), (3, 0, 2)])
def test_conv_transpose2d_matches_numpy(stride, padding, output_padding):
    conv = nn.ConvTranspose2d(4, 3, 3, stride=stride, padding=padding, output_padding=output_padding)
    x = _rand(2, 4, 5, 4, seed=1)
    expected = _np_conv_transpose2d(x, conv.weight.numpy(), conv.bias.numpy(), stride, padding, output_padding)
    got = conv(ht.tensor(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert conv.weight.shape == (4, 3, 3, 3)
    assert np.abs(conv.weight.numpy()).max() <= 1 / np.sqrt(3 * 9)  # fan_in from dim 1, as PyTorch


@pytest.mark.parametrize(("module", "shape"), [(nn.InstanceNorm1d, (3, 4, 7)), (nn.InstanceNorm2d, (2, 4, 3, 5))])
def test_instance_norm_matches_numpy(module, shape):
    x = _rand(*shape, seed=2) * 2 + 1
    axes = tuple(range(2, len(shape)))
    normalized = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    np.testing.assert_allclose(module(4)(ht.tensor(x)).numpy(), normalized, rtol=1e-4, atol=1e-5)
    affine = module(4, affine=True)
    affine.weight._assign(ht.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
    channel = (1, 4) + (1,) * (len(shape) - 2)
    np.testing.assert_allclose(
        affine(ht.tensor(x)).numpy(), normalized * np.arange(1, 5).reshape(channel), rtol=1e-4, atol=1e-5
    )
    assert list(module(4).state_dict()) == []
    with pytest.raises(HlotraceError, match=r"expects an .* input with C=4"):
        module(4)(ht.tensor(_rand(2, 3, 5, 5, 5)))
    with pytest.raises(HlotraceError, match="track_running_stats=True is not supported"):
        module(4, track_running_stats=True)


def test_pixel_shuffle_and_unshuffle_match_the_index_formula():
    r, x = 2, _rand(2, 12, 3, 4, seed=3)
    got = nn.PixelShuffle(r)(ht.tensor(x)).numpy()
    expected = np.empty((2, 3, 6, 8), np.float32)
    for c in range(3):
        for h in range(6):
            for w in range(8):
                expected[:, c, h, w] = x[:, c * r * r + (h % r) * r + (w % r), h // r, w // r]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(nn.PixelUnshuffle(r)(ht.tensor(got)).numpy(), x)
    with pytest.raises(HlotraceError, match=r"PixelShuffle\(2\) expects \(N, C·4, H, W\)"):
        nn.PixelShuffle(2)(ht.tensor(_rand(1, 6, 2, 2)))


def test_upsample_nearest_by_factor_and_size():
    x = _rand(1, 2, 3, 4, seed=4)
    rows, cols = np.arange(6) // 2, np.arange(12) // 3
    expected = x[:, :, rows][:, :, :, cols]
    np.testing.assert_array_equal(nn.Upsample(scale_factor=(2, 3))(ht.tensor(x)).numpy(), expected)
    np.testing.assert_array_equal(nn.Upsample(size=(6, 12))(ht.tensor(x)).numpy(), expected)
    np.testing.assert_array_equal(
        nn.Upsample(scale_factor=2)(ht.tensor(x[:, :, 0])).numpy(), np.repeat(x[:, :, 0], 2, -1)
    )
    with pytest.raises(HlotraceError, match=r"nn.Upsample: mode='bicubic': expected one of 'nearest'"):
        nn.Upsample(scale_factor=2, mode="bicubic")
    # Not a multiple: PyTorch's nearest source index floor(i * in / out) (bilinear and the
    # other modes: tests/test_torch_namespace.py).
    rows, cols = (np.arange(5) * 3) // 5, (np.arange(8) * 4) // 8
    np.testing.assert_array_equal(nn.Upsample(size=(5, 8))(ht.tensor(x)).numpy(), x[:, :, rows][:, :, :, cols])


def test_an_encoder_decoder_trains_compiled_as_eagerly():
    class UNetish(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.InstanceNorm2d(4, affine=True), nn.ReLU()
            )
            self.pool = nn.MaxPool2d(2)
            self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
            self.mix = nn.Sequential(nn.Conv2d(8, 4, 1), nn.Upsample(scale_factor=1), nn.Conv2d(4, 1, 1))

        def forward(self, x):
            skip = self.down(x)
            return self.mix(F.concat([self.up(self.pool(skip)), skip], axis=1))

    def step(x, target, net, opt, gm):
        with gm:
            loss = F.smooth_l1_loss(net(x), target)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    def setup():
        nn.init.seed(2)
        net = UNetish()
        return net, optim.Adam(net.parameters(), lr=1e-2), GradManager().attach(net.parameters())

    eager, compiled = setup(), setup()
    traced = xla_trace(step)
    for i in range(3):
        x, target = ht.tensor(_rand(2, 1, 8, 8, seed=i)), ht.tensor(_rand(2, 1, 8, 8, seed=10 + i))
        np.testing.assert_allclose(traced(x, target, *compiled).numpy(), step(x, target, *eager).numpy(), rtol=1e-5)
    for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert traced.cache_size == 1


# -- additions for the ported PyTorch models (examples/resnet.py, gpt.py) ---------------------


def test_kaiming_and_xavier_normal_draw_with_pytorchs_std():
    w = ht.Parameter(np.zeros((64, 32, 3, 3), np.float32))
    ht.random.seed(5)
    assert nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu") is w
    # The same draw from the same host generator, scaled by PyTorch's std: gain / sqrt(fan).
    ht.random.seed(5)
    expected = ht.random.host_generator().normal(0.0, np.sqrt(2.0) / np.sqrt(64 * 9), size=w.shape)
    np.testing.assert_allclose(w.numpy(), expected.astype(np.float32), rtol=1e-6)
    ht.random.seed(5)
    nn.init.kaiming_normal_(w)  # fan_in, leaky_relu with a=0: sqrt(2 / fan_in)
    np.testing.assert_allclose(w.numpy().std(), np.sqrt(2.0 / (32 * 9)), rtol=0.02)
    nn.init.xavier_normal_(w, gain=2.0)
    np.testing.assert_allclose(w.numpy().std(), 2.0 * np.sqrt(2.0 / (32 * 9 + 64 * 9)), rtol=0.02)
    with pytest.raises(ht.OpError, match="mode must be 'fan_in' or 'fan_out'"):
        nn.init.kaiming_normal_(w, mode="fan")


def test_relu_accepts_inplace_and_returns_the_same_values():
    x = _rand(3, 4, seed=7)
    relu = nn.ReLU(inplace=True)
    np.testing.assert_array_equal(relu(ht.tensor(x)).numpy(), np.maximum(x, 0))
    assert repr(relu) == "ReLU(inplace=True)" and repr(nn.ReLU()) == "ReLU()"


def test_layer_norm_without_bias_matches_numpy():
    x = _rand(2, 5, 6, seed=8)
    ln = nn.LayerNorm(6, bias=False)
    assert [name for name, _ in ln.named_parameters()] == ["weight"] and ln.bias is None
    nn.init.normal_(ln.weight)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(var + 1e-5) * ln.weight.numpy()
    np.testing.assert_allclose(ln(ht.tensor(x)).numpy(), expected, rtol=1e-5, atol=1e-6)
