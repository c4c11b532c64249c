"""The conv family's sample strategies (``s`` is hlotrace.testing.strategies, passed in)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.conv.window import conv_output_size, conv_transpose_output_size

_MAX_ELEMENTS = 128  # per operand and result, batch 0 counted as 1


class ConvCase(NamedTuple):
    """Shapes and attributes (as a user writes them) of one drawn convolution."""

    x_shape: tuple
    w_shape: tuple
    out_shape: tuple
    attrs: dict
    specials: bool  # whether the first operand holds NaN/±inf


def _written(rng, values):
    """One per-dim attribute as a user writes it: an int when the dims agree (half the
    time), else a tuple, or a list now and then."""
    values = [int(v) for v in values]
    if len(set(values)) == 1 and rng.random() < 0.5:
        return values[0]
    return tuple(values) if rng.random() < 0.8 else values


def conv_case(rng: np.random.Generator, rank: int, transpose: bool = False) -> ConvCase:
    """Draw the attribute space: groups 1..3 (channels divisible), kernel 1..3, stride 1..3
    (often larger than the kernel), dilation 1..2, padding 0..2 per dim (H and W differ),
    batch 0..2 (0 rarely), spatial sizes 1..6 (inputs of conv_transpose 1..4, with every
    output_padding below max(stride, dilation))."""
    while True:
        groups = int(rng.choice([1, 1, 2, 3]))
        c, o = groups * int(rng.integers(1, 3)), groups * int(rng.integers(1, 3))
        batch = 0 if rng.random() < 1 / 12 else int(rng.integers(1, 3))
        kernel = [int(k) for k in rng.integers(1, 4, rank)]
        stride = [int(v) for v in rng.integers(1, 4, rank)]
        dilation = [int(v) for v in rng.integers(1, 3, rank)]
        padding = [int(v) for v in rng.integers(0, 3, rank)]
        if transpose:
            size = [int(v) for v in rng.integers(1, 5, rank)]
            output_padding = [int(rng.integers(0, max(s, d))) for s, d in zip(stride, dilation, strict=True)]
            out = [
                conv_transpose_output_size(*a)
                for a in zip(size, kernel, stride, padding, output_padding, dilation, strict=True)
            ]
            x_shape, w_shape = (batch, c, *size), (c, o // groups, *kernel)
        else:
            extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel, strict=True)]
            size = [int(rng.integers(max(1, e - 2 * p), 7)) for e, p in zip(extent, padding, strict=True)]
            out = [conv_output_size(*a) for a in zip(size, kernel, stride, padding, dilation, strict=True)]
            x_shape, w_shape = (batch, c, *size), (o, c // groups, *kernel)
        out_shape = (batch, o, *out)
        if (
            min(out) >= 1
            and max(np.prod((max(batch, 1), *shape[1:])) for shape in (x_shape, out_shape)) <= _MAX_ELEMENTS
        ):
            break
    attrs = {"stride": _written(rng, stride), "padding": _written(rng, padding), "dilation": _written(rng, dilation)}
    if transpose:
        attrs["output_padding"] = _written(rng, output_padding)
    attrs["groups"] = groups
    # NaN/±inf in the input x of ungrouped conv1d/conv2d one time in three; never where
    # backends differ (see "Non-finite values" in ops/conv.py): in the weight (or ct), in a
    # grouped convolution, in the inputs of conv_transpose2d and conv2d_weight_grad.
    specials = not transpose and groups == 1 and rng.random() < 1 / 3
    return ConvCase(x_shape, w_shape, out_shape, attrs, specials)


def conv_elements(s, rng: np.random.Generator, dtype, specials: bool):
    """Values on a grid, so every product and sum is exact in the accumulating type and the
    order of summation cannot matter: multiples of 1/16 in [-10, 10], or for float64 half the
    time multiples of 2**-20 in [-2, 2] (exact in float64, not in float32). NaN/±inf at a
    low rate when ``specials``; signed zeros come from :func:`arrays`."""
    if np.dtype(dtype) == dt.float64 and rng.random() < 0.5:
        return s.values(dtype, -2.0, 2.0, grid_bits=20, boundary_rate=0.0, special=specials, special_rate=1 / 32)
    return s.values(dtype, -10.0, 10.0, grid_bits=4, boundary_rate=0.0, special=specials, special_rate=1 / 32)


def conv_operands(s, draw, case: ConvCase, second_shape):
    """The two float operands of a case: the first of the primary dtype (holding NaN/±inf
    when ``case.specials``), the second often of it, else of another float dtype."""
    first = draw(s.dtypes(s.FLOATS))
    second = draw(s.other_dtypes(first, s.FLOATS))
    rng = s.generator(draw)
    a = draw(s.arrays(first, case.x_shape, conv_elements(s, rng, first, case.specials)))
    b = draw(s.arrays(second, second_shape, conv_elements(s, rng, second, False)))
    return a, b


def conv_sample(s, rank, transpose=False):
    """The sample strategy of conv1d (rank 1), conv2d and conv_transpose2d."""

    @s.st.composite
    def sample(draw):
        case = conv_case(s.generator(draw), rank, transpose)
        x, w = conv_operands(s, draw, case, case.w_shape)
        return s.OpSample((x, w), case.attrs)

    return sample()


def weight_grad_sample(s):
    """The sample strategy of conv2d_weight_grad: x and a cotangent of conv2d's result."""

    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        case = conv_case(rng, 2)._replace(specials=False)
        x, ct = conv_operands(s, draw, case, case.out_shape)
        kernel = case.w_shape[2:]
        written = kernel[0] if kernel[0] == kernel[1] and rng.random() < 0.5 else tuple(kernel)
        return s.OpSample((x, ct), {"kernel_size": written, **case.attrs})

    return sample()
