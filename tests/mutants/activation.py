"""Mutants of hlotrace/lowering/rules/activation.py and of the VJPs in
hlotrace/ops/activation/ (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/activation.py"
OPS_FILE = "hlotrace/ops/activation/smooth.py"
PIECEWISE = "hlotrace/ops/activation/piecewise.py"

MUTANTS = [
    # -- rules -------------------------------------------------------------------------------
    Mutant(
        id="normal-cdf-erfc-of-x",
        file=FILE,
        find="scaled = _mul(x, const(-SQRT_HALF))",
        replace="scaled = _mul(x, const(SQRT_HALF))",
        why="Φ(x) as erfc(x / sqrt(2)) / 2: the sign of the argument is lost, giving 1 - Φ(x)",
        ops=("normal_cdf", "gelu"),
    ),
    Mutant(
        id="gelu-minus-inf-nan",
        file=FILE,
        find='    return hlo.narrowed(_zero_at_minus_inf(x, value, wide, const), wide.dtype, ctx.out_aval)\n\n\n@rule("silu")',
        replace='    return hlo.narrowed(value, wide.dtype, ctx.out_aval)\n\n\n@rule("silu")',
        why="gelu as the bare product x * Φ(x): -inf * 0 gives NaN instead of the limit -0.0",
        ops=("gelu",),
    ),
    Mutant(
        id="gelu-tanh-drops-factor-two",
        file=FILE,
        find="inner = _mul(stablehlo.AddOp(cubic, x).result, const(2 * SQRT_2_OVER_PI))",
        replace="inner = _mul(stablehlo.AddOp(cubic, x).result, const(SQRT_2_OVER_PI))",
        why="x * sigmoid(u) instead of x * sigmoid(2u): the tanh form 1 + tanh(u) is 2 sigmoid(2u)",
        ops=("gelu",),
    ),
    Mutant(
        id="silu-exp-ratio",
        file=FILE,
        find=(
            "    value = _mul(x, stablehlo.LogisticOp(x).result)\n"
            "    return hlo.narrowed(_zero_at_minus_inf(x, value, wide, const), wide.dtype, ctx.out_aval)\n"
        ),
        replace=(
            "    e = stablehlo.ExpOp(stablehlo.NegOp(x).result).result\n"
            "    return hlo.narrowed(stablehlo.DivOp(x, stablehlo.AddOp(const(1.0), e).result).result, wide.dtype, ctx.out_aval)\n"
        ),
        why="silu as the textbook x / (1 + exp(-x)): -inf / inf is NaN where the limit is -0.0",
        ops=("silu",),
    ),
    Mutant(
        id="leaky-relu-ge-zero",
        file=FILE,
        find='value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)\n    return hlo.narrowed(value, wide.dtype, ctx.out_aval)\n\n\n@rule("elu")',
        replace='value = hlo.select(hlo.compare(x, const(0.0), "GE", wide.dtype), x, negative)\n    return hlo.narrowed(value, wide.dtype, ctx.out_aval)\n\n\n@rule("elu")',
        why="x >= 0 keeps zeros as they are: leaky_relu(+0.0) with a negative slope should be -0.0",
        ops=("leaky_relu",),
    ),
    Mutant(
        id="leaky-relu-max-form",
        file=FILE,
        find='value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)\n    return hlo.narrowed(value, wide.dtype, ctx.out_aval)\n\n\n@rule("elu")',
        replace='value = stablehlo.MaxOp(x, negative).result\n    return hlo.narrowed(value, wide.dtype, ctx.out_aval)\n\n\n@rule("elu")',
        why="leaky_relu as max(x, slope * x): right only for slopes in [0, 1]",
        ops=("leaky_relu",),
    ),
    Mutant(
        id="elu-exp-minus-one",
        file=FILE,
        find="negative = _mul(stablehlo.Expm1Op(x).result, const(alpha))",
        replace="negative = _mul(stablehlo.SubtractOp(stablehlo.ExpOp(x).result, const(1.0)).result, const(alpha))",
        why="exp(x) - 1 instead of expm1(x): elu(-0.0) becomes +0.0 and small |x| lose precision",
        ops=("elu",),
    ),
    Mutant(
        id="softplus-naive-log1p-exp",
        file=FILE,
        find="smooth = stablehlo.DivOp(stablehlo.AddOp(positive, tail).result, const(beta)).result",
        replace=("smooth = stablehlo.DivOp(stablehlo.Log1pOp(stablehlo.ExpOp(z).result).result, const(beta)).result"),
        why="PyTorch's log1p(exp(beta x)) / beta: overflows to inf below a large threshold",
        ops=("softplus",),
    ),
    Mutant(
        id="softplus-threshold-on-x",
        file=FILE,
        find='value = hlo.select(hlo.compare(z, const(threshold), "GT", wide.dtype), x, smooth)',
        replace='value = hlo.select(hlo.compare(x, const(threshold), "GT", wide.dtype), x, smooth)',
        why="the threshold is compared with x instead of beta * x",
        ops=("softplus",),
    ),
    # -- VJPs --------------------------------------------------------------------------------
    Mutant(
        id="normal-cdf-vjp-density-sign",
        file=OPS_FILE,
        find="return F.exp(x * x * -0.5) * INV_SQRT_2PI",
        replace="return F.exp(x * x * 0.5) * INV_SQRT_2PI",
        why="the normal density as exp(+x²/2)",
        ops=("normal_cdf", "gelu"),
    ),
    Mutant(
        id="gelu-vjp-drops-density-term",
        file=OPS_FILE,
        find="return (ct * (normal_cdf(x) + x * _normal_density(x)),)",
        replace="return (ct * normal_cdf(x),)",
        why="d(x Φ(x))/dx taken as Φ(x), forgetting the product rule",
        ops=("gelu",),
    ),
    Mutant(
        id="gelu-tanh-vjp-cubic-derivative",
        file=OPS_FILE,
        find="d_inner = (x * x * (3 * GELU_CUBIC) + 1.0) * (2 * SQRT_2_OVER_PI)",
        replace="d_inner = (x * x * GELU_CUBIC + 1.0) * (2 * SQRT_2_OVER_PI)",
        why="the derivative of 0.044715 x³ taken as 0.044715 x²",
        ops=("gelu",),
    ),
    Mutant(
        id="silu-vjp-sigmoid-only",
        file=OPS_FILE,
        find="return (ct * (s * (x * (1.0 - s) + 1.0)),)",
        replace="return (ct * s,)",
        why="d(x sigmoid(x))/dx taken as sigmoid(x)",
        ops=("silu",),
    ),
    Mutant(
        id="leaky-relu-vjp-slope-one",
        file=OPS_FILE,
        find="return (F.where(F.greater(x, 0), ct, ct * negative_slope),)",
        replace="return (F.where(F.greater(x, 0), ct, ct * 0.01),)",
        why="the default slope 0.01 hard-coded in the gradient",
        ops=("leaky_relu",),
    ),
    Mutant(
        id="elu-vjp-drops-alpha",
        file=OPS_FILE,
        find="ct * (F.exp(F.minimum(x, 0.0)) * alpha)",
        replace="ct * F.exp(F.minimum(x, 0.0))",
        why="d(alpha expm1(x))/dx taken as exp(x)",
        ops=("elu",),
    ),
    Mutant(
        id="softplus-vjp-unscaled",
        file=OPS_FILE,
        find="return (F.where(F.greater(z, threshold), ct, ct * F.sigmoid(z)),)",
        replace="return (F.where(F.greater(z, threshold), ct, ct * F.sigmoid(_up(x))),)",
        why="the gradient as sigmoid(x), ignoring beta",
        ops=("softplus",),
    ),
    # -- the piecewise activations (issue 36) --------------------------------------------------
    Mutant(
        id="relu6-upper-clamp-by-less-than",
        file=FILE,
        find="    return hlo.select(_greater(x, 6.0, wide, const), const(6.0), lower)",
        replace='    return hlo.select(hlo.compare(lower, const(6.0), "LT", wide.dtype), lower, const(6.0))',
        why="relu6's upper clamp written as 'keep x where x < 6, else 6': NaN (no compare holds) becomes 6",
        ops=("relu6", "hsigmoid"),
    ),
    Mutant(
        id="relu6-nan-to-zero",
        file=FILE,
        find="    lower = hlo.select(_greater(x, 0.0, wide, const), x, hlo.select(is_nan, x, const(0.0)))",
        replace="    lower = hlo.select(_greater(x, 0.0, wide, const), x, const(0.0))",
        why="relu6 as select(x > 0, x, 0): NaN gives 0 instead of propagating",
        ops=("relu6", "hsigmoid"),
    ),
    Mutant(
        id="hsigmoid-without-shift",
        file=FILE,
        find="    shifted = stablehlo.AddOp(x, const(3.0)).result\n",
        replace="    shifted = x\n",
        why="hsigmoid as relu6(x) / 6: the + 3 forgotten (0 on [-3, 0], 1 only from 6)",
        ops=("hsigmoid",),
    ),
    Mutant(
        id="hswish-bare-product",
        file=FILE,
        find="    value = hlo.select(below, const(0.0), middle)\n",
        replace="    value = middle\n",
        why="hswish as x * relu6(x + 3) / 6 without the x <= -3 branch: -inf * 0 is NaN, x < -3 gives -0.0",
        ops=("hswish",),
    ),
    Mutant(
        id="hswish-large-x-overflows",
        file=FILE,
        find='    value = hlo.select(hlo.compare(x, const(3.0), "GE", wide.dtype), x, value)\n',
        replace="",
        why="no x >= 3 branch: x * (x + 3) overflows for |x| above sqrt(max) and x * 6 / 6 rounds",
        ops=("hswish",),
    ),
    Mutant(
        id="prelu-weight-on-last-axis",
        file=FILE,
        find=(
            "    slope = hlo.reshape(hlo.convert(weight, w_aval, wide.dtype), shape, wide.dtype)\n"
            "    slope = hlo.broadcast_in_dim(slope, wide.shape, tuple(range(len(shape))))\n"
        ),
        replace="    slope = hlo.to_aval(weight, w_aval, wide)\n",
        why="the per-channel weight broadcast NumPy-style against x's last dim (NHWC), not dim 1",
        ops=("prelu",),
    ),
    Mutant(
        id="prelu-slope-on-positive-side",
        file=FILE,
        find="    return hlo.narrowed(hlo.select(positive, x, _mul(x, slope)), wide.dtype, ctx.out_aval)",
        replace="    return hlo.narrowed(hlo.select(positive, _mul(x, slope), x), wide.dtype, ctx.out_aval)",
        why="prelu's select branches swapped: the slope scales x > 0",
        ops=("prelu",),
    ),
    Mutant(
        id="hswish-vjp-slope-sign",
        file=PIECEWISE,
        find="    slope = x / 3.0 + 0.5  # d/dx x (x + 3) / 6 on [-3, 3]",
        replace="    slope = x / 3.0 - 0.5  # d/dx x (x + 3) / 6 on [-3, 3]",
        why="d hswish(x) on [-3, 3] taken as x/3 - 1/2: a sign error in the constant",
        ops=("hswish",),
    ),
    Mutant(
        id="hsigmoid-vjp-without-sixth",
        file=PIECEWISE,
        find="    return (F.where(_between(x, -3.0, 3.0), ct / 6.0, F.zeros_like(ct)),)",
        replace="    return (F.where(_between(x, -3.0, 3.0), ct, F.zeros_like(ct)),)",
        why="d hsigmoid(x) taken as 1 on (-3, 3) (relu6's gradient, without the 1/6)",
        ops=("hsigmoid",),
    ),
    Mutant(
        id="prelu-vjp-weight-sign",
        file=PIECEWISE,
        find="    contributions = F.where(positive, F.zeros_like(ct), _up(ct) * _up(x))",
        replace="    contributions = F.where(positive, F.zeros_like(ct), -(_up(ct) * _up(x)))",
        why="the weight's cotangent of prelu with its sign flipped",
        ops=("prelu",),
    ),
    Mutant(
        id="relu6-vjp-open-at-zero-only",
        file=PIECEWISE,
        find="    return (F.where(_between(x, 0.0, 6.0), ct, F.zeros_like(ct)),)",
        replace="    return (F.where(F.greater(x, 0.0), ct, F.zeros_like(ct)),)",
        why="relu6's gradient taken as relu's: 1 above 6 too",
        ops=("relu6",),
    ),
]
