"""Lowering rules for hlotrace/ops/conv/ (conv1d, conv2d, conv_transpose2d, conv2d_weight_grad).

Each op is one ``stablehlo.convolution`` on operands converted to the accumulating dtype
(float32 for float16/bfloat16, rounded once at the end, as the references do), with the
module's matmul precision for float32 (HIGHEST unless asked: GPUs would otherwise use TF32;
``hlo.precision_config``). The explicit float32 is
needed: XLA:CPU upcasts a float16 convolution itself, but XLA:CUDA (H100) accumulated one
in float16 (2048 + 1 + 1 gave 2048; tests/test_conv_ops.py checks it):

- conv1d/conv2d: dimension numbers NC(H)W / OI(H)W / NC(H)W, window strides = stride,
  padding (p, p) per dim, rhs_dilation = dilation, feature_group_count = groups.
- conv_transpose2d: lhs_dilation = stride, padding (d(k-1) - p, d(k-1) - p + output_padding)
  (negative crops), the kernel reversed along its spatial dims and read as (O, C/groups)
  (in/out swapped within each group: a reshape and transpose when groups > 1).
- conv2d_weight_grad: JAX's transposed-rhs convolution: x read with its channels as the
  batch and its batch as the features, ct as the kernel (its batch contracted, its
  channels the output features), window strides = dilation, rhs_dilation = stride, and the
  padding that reaches exactly the rows conv2d used. Groups use feature_group_count on a
  regrouped x (C/g, g*N), not batch_group_count (see the rule).

Padding and the zeros lhs_dilation inserts are not input elements: the references leave
them out. Backends differ on what a non-finite value meeting them gives (XLA:CPU mostly
leaves them out, XLA:CUDA multiplies): see "Non-finite values" in ops/conv.py.
"""

from __future__ import annotations

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace.dtypes import compute_dtype
from hlotrace.lowering.registry import rule
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def _numbers(rank, lhs=(0, 1), kernel=(0, 1), out=(0, 1)):
    """Dimension numbers: (batch, feature) dims of lhs and out, (output feature, input
    feature) dims of the kernel; the spatial dims follow in order."""
    spatial = list(range(2, 2 + rank))
    return stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs[0],
        input_feature_dimension=lhs[1],
        input_spatial_dimensions=spatial,
        kernel_output_feature_dimension=kernel[0],
        kernel_input_feature_dimension=kernel[1],
        kernel_spatial_dimensions=spatial,
        output_batch_dimension=out[0],
        output_feature_dimension=out[1],
        output_spatial_dimensions=spatial,
    )


def _convolution(lhs, rhs, out_shape, dtype, numbers, *, strides, padding, lhs_dilation, rhs_dilation, groups=(1, 1)):
    """``stablehlo.convolution``; ``padding`` is (low, high) per spatial dim, ``groups`` is
    (feature_group_count, batch_group_count)."""
    rank = len(strides)
    pads = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(rank, 2))
    return stablehlo.ConvolutionOp(
        hlo.tensor_type(out_shape, dtype),
        lhs,
        rhs,
        numbers,
        groups[0],
        groups[1],
        window_strides=list(strides),
        padding=pads,
        lhs_dilation=list(lhs_dilation),
        rhs_dilation=list(rhs_dilation),
        precision_config=hlo.precision_config(dtype),
    ).result


def _widened(ctx, a, b):
    """Both operands converted to the dtype the result accumulates in."""
    (aval_a, aval_b), out = ctx.in_avals, ctx.out_aval
    wide = compute_dtype(out.dtype)
    return hlo.convert(a, aval_a, wide), hlo.convert(b, aval_b, wide), wide


def _conv(ctx, x, w, *, stride, padding, dilation, groups):
    x, w, wide = _widened(ctx, x, w)
    rank = len(stride)
    result = _convolution(
        x,
        w,
        ctx.out_aval.shape,
        wide,
        _numbers(rank),
        strides=stride,
        padding=[(p, p) for p in padding],
        lhs_dilation=(1,) * rank,
        rhs_dilation=dilation,
        groups=(groups, 1),
    )
    return hlo.narrowed(result, wide, ctx.out_aval)


rule("conv1d")(_conv)
rule("conv2d")(_conv)


@rule("conv_transpose2d")
def _conv_transpose2d(ctx, x, w, *, stride, padding, output_padding, dilation, groups):
    x, w, wide = _widened(ctx, x, w)
    c, o_g, *kernel = ctx.in_avals[1].shape
    kernel_dims = (1, 0)  # w is (C, O/groups, kH, kW): dim 1 holds the output features
    if groups > 1:
        # (C, O/g) -> (g, C/g, O/g) -> (g, O/g, C/g) -> (O, C/g): in/out swapped per group.
        w = hlo.reshape(w, (groups, c // groups, o_g, *kernel), wide)
        w = stablehlo.TransposeOp(w, [0, 2, 1, 3, 4]).result
        w = hlo.reshape(w, (groups * o_g, c // groups, *kernel), wide)
        kernel_dims = (0, 1)
    w = stablehlo.ReverseOp(w, [2, 3]).result
    pads = [
        (d * (k - 1) - p, d * (k - 1) - p + op)
        for k, p, op, d in zip(kernel, padding, output_padding, dilation, strict=True)
    ]
    spatial = ctx.in_avals[0].shape[2:]
    dilated = [(n - 1) * s + 1 for n, s in zip(spatial, stride, strict=True)]
    reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if 0 not in spatial and any(n < r for n, r in zip(dilated, reach, strict=True)) and any(s > 1 for s in stride):
        # XLA's simplifier swaps the operands of a convolution whose kernel is larger than its
        # input, and with a base (lhs) dilation builds an invalid one and aborts (a Check
        # failure in algebraic_simplifier.cc): dilate x explicitly with interior padding. Any
        # one spatial dimension where the kernel reaches further is enough (seed 308871127:
        # x (1, 2, 4, 2), w (2, 1, 2, 3), stride (2, 3), dilation (1, 2): 4 < 5 in the second).
        zero = hlo.constant(0, wide)
        x = stablehlo.PadOp(x, zero, [0] * 4, [0] * 4, [0, 0, *(s - 1 for s in stride)]).result
        stride = (1, 1)
    result = _convolution(
        x,
        w,
        ctx.out_aval.shape,
        wide,
        _numbers(2, kernel=kernel_dims),
        strides=(1, 1),
        padding=pads,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        groups=(groups, 1),
    )
    return hlo.narrowed(result, wide, ctx.out_aval)


@rule("conv2d_weight_grad")
def _conv2d_weight_grad(ctx, x, ct, *, kernel_size, stride, padding, dilation, groups):
    (n, c, *size), out_size = ctx.in_avals[0].shape, ctx.in_avals[1].shape[2:]
    x, ct, wide = _widened(ctx, x, ct)
    if groups > 1:
        # (N, C) -> (N, g, C/g) -> (C/g, g, N) -> (C/g, g*N): the channels of each group
        # become the batch, and its batch the features of feature group g (which meets ct's
        # channel group g). Not batch_group_count, as JAX does: XLA:CPU ran that as one
        # product over all groups, and a NaN in one group's ct reached the others.
        x = hlo.reshape(x, (n, groups, c // groups, *size), wide)
        x = stablehlo.TransposeOp(x, [2, 1, 0, 3, 4]).result
        x = hlo.reshape(x, (c // groups, groups * n, *size), wide)
        lhs_dims = (0, 1)
    else:
        lhs_dims = (1, 0)  # x's channels are the batch, its batch the features
    # High padding: up to the last row the last output position's window reached in conv2d
    # (negative where conv2d's stride left rows of the padded input unused).
    pads = [
        (p, (m - 1) * s + d * (k - 1) + 1 - h - p)
        for h, m, k, s, p, d in zip(size, out_size, kernel_size, stride, padding, dilation, strict=True)
    ]
    result = _convolution(
        x,
        ct,
        ctx.out_aval.shape,
        wide,
        _numbers(2, lhs=lhs_dims, kernel=(1, 0), out=(1, 0)),
        strides=dilation,
        padding=pads,
        lhs_dilation=(1, 1),
        rhs_dilation=stride,
        groups=(groups, 1),
    )
    return hlo.narrowed(result, wide, ctx.out_aval)
