"""Sample strategies of the pooling family (forward.py, backward.py; ``s`` is passed in):
NumPy draws only, called by ``sample=`` when tests run, so the ops never import hypothesis."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.pooling.window import MAX_POOL_DTYPES, pooled_shape


def draw_nchw(rng, low=(1, 1)) -> tuple:
    """An NCHW shape: batch 0 now and then, 1..3 channels, spatial sides low..7, <= 128 elements."""
    n = 0 if rng.random() < 1 / 12 else int(rng.integers(1, 3))
    c = int(rng.integers(1, 4))
    h, w = (int(rng.integers(lo, 8)) for lo in low)
    return (n, c if n * c * h * w <= 128 else 1, h, w)


def draw_window(rng):
    """(spelled attrs, kernel, stride, padding): kernels 1..3 (rectangular too), strides
    1..3 (larger than the kernel too, or None), padding 0..kernel//2 per dim."""
    kernel = [int(k) for k in rng.integers(1, 4, 2)]
    stride = [int(k) for k in rng.integers(1, 4, 2)]
    if rng.random() < 0.5:
        kernel[1], stride[1] = kernel[0], stride[0]
    padding = [int(rng.integers(0, k // 2 + 1)) for k in kernel]

    def spell(pair):
        return pair[0] if pair[0] == pair[1] and rng.random() < 0.5 else tuple(pair)

    spelled_stride = None if rng.random() < 1 / 4 else spell(stride)
    stride = kernel if spelled_stride is None else stride
    attrs = {"kernel_size": spell(kernel), "stride": spelled_stride, "padding": spell(padding)}
    return attrs, tuple(kernel), tuple(stride), tuple(padding)


def draw_values(s, draw, rng, dtype, shape, kind):
    """Operand values. ``kind="max"``: ties (values -1, 0, 1) a third of the time, else any
    values of the dtype; floats sometimes mostly -inf (all -inf windows) or with NaN planted.
    ``kind="sum"``: multiples of 1/16 in [-8, 8] (exact sums in any order), some specials;
    float16/bfloat16 sometimes 2048 (256) among values just under 1: exact sums in float32 only."""
    if kind == "sum":
        x = draw(s.arrays(dtype, shape, s.values(dtype, -8.0, 8.0, grid_bits=4, boundary_rate=0.0)))
        if dtype.itemsize == 2 and rng.random() < 1 / 4:
            # The others just below half a unit in the last place of the big ones (2): a half
            # precision sum loses each of them.
            big = np.asarray(2048.0 if dtype == dt.float16 else 256.0, dtype)
            x = np.where(rng.random(shape) < 0.2, big, rng.choice([0.75, 0.875, 0.9375], shape)).astype(dtype)
        return x
    if rng.random() < 1 / 3:
        elements = s.values(dtype, -1, 1, grid_bits=0, boundary_rate=0.0, special_rate=1 / 32)
    else:
        elements = s.values(dtype, special_rate=1 / 16)
    x = draw(s.arrays(dtype, shape, elements))
    if dtype in dt.FLOATING and rng.random() < 1 / 4:
        fill = -np.inf if rng.random() < 2 / 3 else np.nan
        x = np.where(rng.random(shape) < 0.6, np.asarray(fill, dtype), x).astype(dtype)
    return x


def window_case(s, draw, rng, dtype, kind, large=False):
    """(x, attrs, geometry) for the windowed pools; ``large``: one 64x64 plane pooled by
    non-overlapping windows with NaN planted (XLA:CPU's vectorized path drops NaN there)."""
    if large:
        k = int(rng.choice([2, 4]))
        attrs, kernel, stride, padding = {"kernel_size": k, "stride": None, "padding": 0}, (k, k), (k, k), (0, 0)
        return draw(s.long_arrays(dtype, (1, 1, 64, 64))), attrs, (kernel, stride, padding)
    attrs, kernel, stride, padding = draw_window(rng)
    shape = draw_nchw(rng, low=[max(1, k - 2 * p) for k, p in zip(kernel, padding, strict=True)])
    return draw_values(s, draw, rng, dtype, shape, kind), attrs, (kernel, stride, padding)


def window_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(MAX_POOL_DTYPES if name == "max_pool2d" else dt.FLOATING))
        rng = s.generator(draw)
        large = name == "max_pool2d" and dtype in dt.FLOATING and rng.random() < 1 / 10
        x, attrs, _ = window_case(s, draw, rng, dtype, "max" if name == "max_pool2d" else "sum", large)
        if name == "avg_pool2d":
            attrs["count_include_pad"] = bool(rng.random() < 0.5)
        return s.OpSample((x,), attrs)

    return sample()


def draw_output_size(rng, size):
    """(spelled, canonical) adaptive output sizes: 1 (windows of whole rows or columns),
    dividing the input or not, larger than it; an int, a pair, or a pair with None entries."""
    out = []
    for n in size:
        pick = rng.random()
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        out.append(1 if pick < 0.2 else int(rng.choice(divisors)) if pick < 0.5 else int(rng.integers(1, 9)))
    spelled = out[0] if out[0] == out[1] and rng.random() < 0.5 else tuple(out)
    if rng.random() < 1 / 6:
        keep = int(rng.integers(0, 2))
        spelled, out[keep] = tuple(None if i == keep else v for i, v in enumerate(out)), size[keep]
    return spelled, tuple(out)


def adaptive_case(s, draw, rng, dtype, kind, large=False):
    """(x, spelled output_size, canonical output_size) for the adaptive pools."""
    if large:
        x = draw(s.long_arrays(dtype, (1, 1, 64, 64)))
        out = tuple(int(v) for v in rng.choice([1, 2, 4], 2))
        return x, out, out
    shape = draw_nchw(rng)
    if rng.random() < 1 / 5:  # few rows, many columns: where a flat index h * H + w collides
        shape = (*shape[:2], int(rng.integers(2, 4)), int(rng.integers(5, 8)))
    spelled, out = draw_output_size(rng, shape[2:])
    return draw_values(s, draw, rng, dtype, shape, kind), spelled, out


def adaptive_sample(s, name):
    @s.st.composite
    def sample(draw):
        is_max = name == "adaptive_max_pool2d"
        dtype = draw(s.dtypes(MAX_POOL_DTYPES if is_max else dt.FLOATING))
        rng = s.generator(draw)
        large = is_max and dtype in dt.FLOATING and rng.random() < 1 / 10
        x, spelled, _ = adaptive_case(s, draw, rng, dtype, "max" if is_max else "sum", large)
        return s.OpSample((x,), {"output_size": spelled})

    return sample()


# -- the backward primitives' samples ------------------------------------------------------

# The dtypes the samples of these ops draw (each op admits every float dtype): bfloat16
# runs the same convert-accumulate-round path as float16, where XLA:CPU computes bfloat16
# in float32 and skips intermediate roundings (xla_allow_excess_precision), so float16 is
# the half type whose test shows a missing float32 accumulation; leaving bfloat16 out keeps
# the family's generated tests within their time budget.
SAMPLED_DTYPES = (dt.float16, dt.float32, dt.float64)


def max_backward_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(SAMPLED_DTYPES))
        rng = s.generator(draw)
        x, attrs, geometry = window_case(s, draw, rng, dtype, "max")
        shape = pooled_shape(x.shape, *geometry) if name == "max_pool2d_backward" else x.shape
        return s.OpSample((x, draw_values(s, draw, rng, dtype, shape, "sum")), attrs)

    return sample()


def avg_backward_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(SAMPLED_DTYPES))
        rng = s.generator(draw)
        attrs, kernel, stride, padding = draw_window(rng)
        shape = draw_nchw(rng, low=[max(1, k - 2 * p) for k, p in zip(kernel, padding, strict=True)])
        ct = draw_values(s, draw, rng, dtype, pooled_shape(shape, kernel, stride, padding), "sum")
        attrs.update(input_size=shape[2:], count_include_pad=bool(rng.random() < 0.5))
        return s.OpSample((ct,), attrs)

    return sample()


def adaptive_backward_sample(s, name):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(SAMPLED_DTYPES))
        rng = s.generator(draw)
        if name == "adaptive_avg_pool2d_backward":
            shape = draw_nchw(rng)
            _, out = draw_output_size(rng, shape[2:])
            ct = draw_values(s, draw, rng, dtype, (*shape[:2], *out), "sum")
            return s.OpSample((ct,), {"input_size": shape[2:]})
        x, spelled, out = adaptive_case(s, draw, rng, dtype, "max")
        if name == "adaptive_max_pool2d_backward":
            return s.OpSample((x, draw_values(s, draw, rng, dtype, (*x.shape[:2], *out), "sum")))
        return s.OpSample((x, draw_values(s, draw, rng, dtype, x.shape, "sum")), {"output_size": spelled})

    return sample()
