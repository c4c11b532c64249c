"""``hlotrace.torch.nn.functional.interpolate`` and ``nn.Upsample`` (issue 36): nearest and
(bi/tri)linear resampling against a reference written from PyTorch's documented
source-coordinate formulas (and values checked by hand), eagerly and compiled, with gradients
against finite differences and the reference's adjoint. The rest of ``hlotrace.torch``:
tests/test_torch_namespace.py."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.torch.nn.functional as F
from hlotrace.autodiff import grad
from hlotrace.errors import ArgumentError, OpError
from hlotrace.jit import xla_trace
from hlotrace.testing.check import eager_then_compiled
from hlotrace.testing.gradcheck import central_differences
from hlotrace.torch import nn

RNG = np.random.default_rng(361)


# -- interpolate / Upsample: a reference written from PyTorch's formulas --------------------------


def _source(i, n_in, n_out, align_corners, scale_factor):
    """PyTorch's area_pixel_compute_source_index for the linear modes (one output index)."""
    if align_corners:
        return i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    scale = 1.0 / scale_factor if scale_factor else n_in / n_out
    return max((i + 0.5) * scale - 0.5, 0.0)


def _bilinear_reference(x, out_h, out_w, align_corners, scale_factors=(None, None)):
    """Each output pixel from its four neighbours (PyTorch's upsample_bilinear2d, written per
    pixel, not separably)."""
    n, c, h, w = x.shape
    y = np.zeros((n, c, out_h, out_w), np.float64)
    for i in range(out_h):
        sy = _source(i, h, out_h, align_corners, scale_factors[0])
        y0, ly = int(sy), sy - int(sy)
        y1 = y0 + (1 if y0 < h - 1 else 0)
        for j in range(out_w):
            sx = _source(j, w, out_w, align_corners, scale_factors[1])
            x0, lx = int(sx), sx - int(sx)
            x1 = x0 + (1 if x0 < w - 1 else 0)
            y[:, :, i, j] = (1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1]) + ly * (
                (1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]
            )
    return y


def test_bilinear_values_checked_by_hand():
    x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32)
    corners = F.interpolate(ht.tensor(x), scale_factor=2, mode="bilinear", align_corners=True).numpy()[0, 0]
    # align_corners=True: source i * (2 - 1) / (4 - 1): row 0 is 0, 1/3, 2/3, 1; (1, 1) is 1/3 * 2 + 1/3 = 1
    np.testing.assert_allclose(corners[0], [0, 1 / 3, 2 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(corners[1, 1], 1.0, rtol=1e-6)
    centers = F.interpolate(ht.tensor(x), scale_factor=2, mode="bilinear", align_corners=False).numpy()[0, 0]
    # align_corners=False: source (j + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25
    np.testing.assert_allclose(centers[0], [0, 0.25, 0.75, 1], rtol=1e-6)
    np.testing.assert_allclose(centers[1, 1], 0.75 * (0.75 * 0 + 0.25 * 1) + 0.25 * (0.75 * 2 + 0.25 * 3), rtol=1e-6)
    np.testing.assert_allclose(centers[3, 3], 3.0, rtol=1e-6)


IMAGE = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize(
    ("options", "out"),
    [
        ({"scale_factor": 2}, (10, 14)),
        ({"size": (8, 3)}, (8, 3)),  # up one dim, down the other
        ({"scale_factor": (1.5, 0.5)}, (7, 3)),
        ({"size": 1}, (1, 1)),
    ],
    ids=["x2", "size", "fractional", "to-1x1"],
)
def test_bilinear_against_pytorchs_formulaeager_then_compiled(options, out, align_corners):
    got = eager_then_compiled(
        lambda t: F.interpolate(t, mode="bilinear", align_corners=align_corners, **options), IMAGE, rtol=1e-5
    )
    factor = options.get("scale_factor")
    factors = factor if isinstance(factor, tuple) else (factor, factor)
    expected = _bilinear_reference(IMAGE.astype(np.float64), *out, align_corners, factors)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_nearest_linear_and_trilinear():
    x = RNG.standard_normal((1, 2, 5)).astype(np.float32)
    got = eager_then_compiled(lambda t: F.interpolate(t, size=8, mode="nearest"), x)
    np.testing.assert_array_equal(got, x[:, :, np.floor(np.arange(8) * 5 / 8).astype(int)])
    got = eager_then_compiled(lambda t: F.interpolate(t, scale_factor=2, mode="linear", align_corners=True), x)
    np.testing.assert_allclose(got, _bilinear_reference(x[:, :, None], 1, 10, True)[:, :, 0], rtol=1e-5, atol=1e-6)
    volume = RNG.standard_normal((1, 1, 2, 3, 4)).astype(np.float32)
    got = F.interpolate(ht.tensor(volume), scale_factor=2, mode="trilinear", align_corners=True).numpy()
    assert got.shape == (1, 1, 4, 6, 8)
    np.testing.assert_allclose(got[:, :, 0], _bilinear_reference(volume[:, :, 0], 6, 8, True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, :, 3], _bilinear_reference(volume[:, :, 1], 6, 8, True), rtol=1e-5, atol=1e-6)
    with pytest.raises(OpError, match="align_corners applies to the linear modes"):
        F.interpolate(ht.tensor(x), size=8, align_corners=True)
    with pytest.raises(OpError, match="mode 'bilinear' expects"):
        F.interpolate(ht.tensor(x), size=8, mode="bilinear")
    with pytest.raises(OpError, match="mode must be one of"):
        F.interpolate(ht.tensor(x), size=8, mode="bicubic")
    with pytest.raises(OpError, match="needs a float tensor"):
        F.interpolate(ht.tensor([[[1, 2]]]), size=4, mode="linear")
    np.testing.assert_array_equal(F.interpolate(ht.tensor([[[1, 2]]]), size=4).numpy(), [[[1, 1, 2, 2]]])


@pytest.mark.parametrize("align_corners", [True, False])
def test_bilinear_gradient_matches_finite_differences_and_compiled(align_corners):
    x64 = IMAGE[:1, :2].astype(np.float64)
    weights = RNG.standard_normal((1, 2, 8, 9))

    def loss(x):
        return (F.interpolate(x, size=(8, 9), mode="bilinear", align_corners=align_corners) * weights).sum()

    (analytic,) = grad(loss, argnums=(0,))(x64)
    central_differences(lambda a: float(loss(a).numpy()), [x64], [analytic.numpy()], points=6, seed=7)
    # Bilinear resampling is linear: the gradient is the reference's adjoint, sum over outputs
    # of weight * d out / d x, each output's four bilinear weights put back on its neighbours.
    basis = np.eye(x64[0, 0].size).reshape(-1, 1, 1, *x64.shape[2:])
    columns = np.stack([(_bilinear_reference(b, 8, 9, align_corners) * weights[:, :1]).sum() for b in basis])
    np.testing.assert_allclose(analytic.numpy()[0, 0].ravel(), columns, rtol=1e-10)
    step = xla_trace(grad(loss, argnums=(0,)))
    x32 = ht.tensor(x64.astype(np.float32))
    step(x32)
    np.testing.assert_allclose(step(x32)[0].numpy(), analytic.numpy(), rtol=1e-4, atol=1e-5)


def test_upsample_modules():
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    np.testing.assert_allclose(
        up(ht.tensor(IMAGE)).numpy(), _bilinear_reference(IMAGE.astype(np.float64), 10, 14, True), rtol=1e-5, atol=1e-6
    )
    assert "align_corners=True" in repr(up)
    nearest = nn.Upsample(scale_factor=1.5)(ht.tensor(IMAGE)).numpy()  # not a whole factor: floor(i / 1.5)
    np.testing.assert_array_equal(nearest, IMAGE[:, :, [0, 0, 1, 2, 2, 3, 4]][:, :, :, [0, 0, 1, 2, 2, 3, 4, 4, 5, 6]])
    with pytest.raises(ArgumentError, match="align_corners"):
        nn.Upsample(scale_factor=2, align_corners=True)
