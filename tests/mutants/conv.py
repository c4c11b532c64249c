"""Mutants of hlotrace/lowering/rules/conv.py and of the VJPs in hlotrace/ops/conv/forward.py
and hlotrace/ops/conv/weight_grad.py (see TESTING.md). The rule mutants are killed by the property
tests, the VJP mutants by the gradient tests (``--columns gradient``)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/conv.py"
OPS = "hlotrace/ops/conv/forward.py"
GRAD_OPS = "hlotrace/ops/conv/weight_grad.py"
MUTANTS = [
    # -- conv1d / conv2d ------------------------------------------------------------------
    Mutant(
        id="conv-padding-dims-swapped",
        file=FILE,
        find="        padding=[(p, p) for p in padding],\n",
        replace="        padding=[(p, p) for p in reversed(padding)],\n",
        why="the H padding is applied to W and vice versa (the order of the per-dim pairs is reversed)",
        ops=("conv2d",),
    ),
    Mutant(
        id="conv-no-feature-groups",
        file=FILE,
        find="        rhs_dilation=dilation,\n        groups=(groups, 1),\n    )\n    return hlo.narrowed(result, wide, ctx.out_aval)\n\n\nrule(",
        replace="        rhs_dilation=dilation,\n        groups=(1, 1),\n    )\n    return hlo.narrowed(result, wide, ctx.out_aval)\n\n\nrule(",
        why="feature_group_count is left at 1: grouped convolutions mix every input channel",
        ops=("conv2d", "conv1d"),
    ),
    Mutant(
        id="conv-stride-and-dilation-swapped",
        file=FILE,
        find="        strides=stride,\n        padding=[(p, p) for p in padding],\n        lhs_dilation=(1,) * rank,\n"
        "        rhs_dilation=dilation,\n",
        replace="        strides=dilation,\n        padding=[(p, p) for p in padding],\n        lhs_dilation=(1,) * rank,\n"
        "        rhs_dilation=stride,\n",
        why="window strides and kernel dilation exchanged",
        ops=("conv2d", "conv1d"),
    ),
    Mutant(
        id="conv-accumulates-in-half-precision",
        file=FILE,
        find="    wide = compute_dtype(out.dtype)\n",
        replace="    wide = out.dtype\n",
        why="float16/bfloat16 operands are convolved in their own dtype instead of float32",
        ops=("conv2d", "conv1d", "conv_transpose2d", "conv2d_weight_grad"),
        equivalent=(
            "XLA:CPU upcasts float16/bfloat16 convolutions to float32 itself (checked: identical results); "
            "on XLA:CUDA (H100) it is not equivalent (2048 + 1 + 1 gave 2048) and "
            "tests/test_conv_ops.py::test_half_precision_accumulates_in_float32_and_dtypes_promote kills it"
        ),
    ),
    # -- conv_transpose2d -----------------------------------------------------------------
    Mutant(
        id="conv-transpose-kernel-not-flipped",
        file=FILE,
        find="    w = stablehlo.ReverseOp(w, [2, 3]).result\n",
        replace="",
        why="the transposed convolution uses the kernel unflipped (a correlation, not the adjoint)",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv-transpose-kernel-flipped-in-width-only",
        file=FILE,
        find="    w = stablehlo.ReverseOp(w, [2, 3]).result\n",
        replace="    w = stablehlo.ReverseOp(w, [3]).result\n",
        why="the kernel is reversed along W only (as if the flip were a 1-d one)",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv-transpose-output-padding-low",
        file=FILE,
        find="(d * (k - 1) - p, d * (k - 1) - p + op)",
        replace="(d * (k - 1) - p + op, d * (k - 1) - p)",
        why="output_padding is added before the first row instead of after the last",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv-transpose-groups-not-regrouped",
        file=FILE,
        find="        w = stablehlo.TransposeOp(w, [0, 2, 1, 3, 4]).result\n",
        replace="",
        why="the grouped kernel (C, O/g) is reshaped to (O, C/g) without swapping in/out within each group",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv-transpose-dilation-as-lhs",
        file=FILE,
        find="        lhs_dilation=stride,\n        rhs_dilation=dilation,\n",
        replace="        lhs_dilation=dilation,\n        rhs_dilation=stride,\n",
        why="the input is spread by the dilation and the kernel by the stride",
        ops=("conv_transpose2d",),
    ),
    # -- conv2d_weight_grad ---------------------------------------------------------------
    Mutant(
        id="weight-grad-stride-as-window-stride",
        file=FILE,
        find="        strides=dilation,\n        padding=pads,\n        lhs_dilation=(1, 1),\n        rhs_dilation=stride,\n",
        replace="        strides=stride,\n        padding=pads,\n        lhs_dilation=(1, 1),\n        rhs_dilation=dilation,\n",
        why="the weight gradient steps over the kernel taps by the stride and dilates ct by the dilation",
        ops=("conv2d_weight_grad",),
    ),
    Mutant(
        id="weight-grad-high-padding-symmetric",
        file=FILE,
        find="        (p, (m - 1) * s + d * (k - 1) + 1 - h - p)\n",
        replace="        (p, p)\n",
        why="the weight gradient pads x by p on both sides, ignoring the rows conv2d's stride left unused",
        ops=("conv2d_weight_grad",),
    ),
    Mutant(
        id="weight-grad-groups-batch-major",
        file=FILE,
        find="        x = stablehlo.TransposeOp(x, [2, 1, 0, 3, 4]).result\n",
        replace="        x = stablehlo.TransposeOp(x, [2, 0, 1, 3, 4]).result\n",
        why="x regrouped as (C/g, N, g): feature groups then hold a mix of batches and groups",
        ops=("conv2d_weight_grad",),
    ),
    Mutant(
        id="weight-grad-output-dims-oihw-swapped",
        file=FILE,
        find="_numbers(2, lhs=lhs_dims, kernel=(1, 0), out=(1, 0))",
        replace="_numbers(2, lhs=lhs_dims, kernel=(1, 0), out=(0, 1))",
        why="the weight gradient's output dims read as (I, O) instead of (O, I)",
        ops=("conv2d_weight_grad",),
    ),
    # -- VJPs -----------------------------------------------------------------------------
    Mutant(
        id="conv2d-vjp-no-output-padding",
        file=OPS,
        find="    output_padding = tuple(leftover(*a) for a in zip(x.shape[2:], kernel, stride,",
        replace="    output_padding = tuple(0 * leftover(*a) for a in zip(x.shape[2:], kernel, stride,",
        why="conv2d's input gradient ignores the rows the stride left over (dx comes out too short)",
        ops=("conv2d",),
    ),
    Mutant(
        id="conv-transpose-vjp-slices-the-first-rows",
        file=OPS,
        find="rows = (slice(None), slice(None), slice(0, x.shape[2]), slice(0, x.shape[3]))",
        replace="rows = (slice(None), slice(None), slice(dx.shape[2] - x.shape[2], None), slice(0, x.shape[3]))",
        why="when output_padding >= stride, dx keeps the last rows of conv2d(ct, w) instead of the first",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv-transpose-vjp-dw-unflipped-roles",
        file=OPS,
        find="    dw = F.conv2d_weight_grad(ct, x_ext, w.shape[2:], **attrs)\n",
        replace="    dw = F.transpose(F.conv2d_weight_grad(x_ext, ct, w.shape[2:], **attrs), (1, 0, 2, 3))\n",
        why="conv_transpose2d's weight gradient taken as conv2d's (x against ct) and transposed to (C, O/g)",
        ops=("conv_transpose2d",),
    ),
    Mutant(
        id="conv1d-vjp-unit-width",
        file=OPS,
        find='    attrs = {"stride": (1, *stride), "padding": (0, *padding), "dilation": (1, *dilation), "groups": groups}',
        replace='    attrs = {"stride": (*stride, 1), "padding": (*padding, 0), "dilation": (*dilation, 1), "groups": groups}',
        why="conv1d's VJP puts the length in the height but gives conv2d's attributes for it in the width",
        ops=("conv1d",),
    ),
    Mutant(
        id="weight-grad-vjp-x-without-output-padding",
        file=GRAD_OPS,
        find="    dx = F.conv_transpose2d(ct, ct_w, output_padding=output_padding, **attrs)\n",
        replace="    dx = F.conv_transpose2d(ct, ct_w, **attrs)\n",
        why="the weight gradient's VJP wrt x omits output_padding, so dx misses the rows the stride left over",
        ops=("conv2d_weight_grad",),
    ),
    Mutant(
        id="weight-grad-vjp-ct-transposed-kernel",
        file=GRAD_OPS,
        find="    dct = F.conv2d(x, ct_w, **attrs)\n",
        replace="    dct = F.conv2d(x, F.transpose(ct_w, (0, 1, 3, 2)) if ct_w.shape[2] == ct_w.shape[3] else ct_w, **attrs)\n",
        why="the weight gradient's VJP wrt ct convolves with the kernel's spatial dims transposed",
        ops=("conv2d_weight_grad",),
    ),
]
