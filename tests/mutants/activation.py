"""Mutants of hlotrace/lowering/rules/activation.py and of the VJPs in
hlotrace/ops/activation/ (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/activation.py"
OPS_FILE = "hlotrace/ops/activation/smooth.py"

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
        find='    return _narrowed(ctx, _zero_at_minus_inf(x, value, wide, const), wide)\n\n\n@rule("silu")',
        replace='    return _narrowed(ctx, value, wide)\n\n\n@rule("silu")',
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
            "    return _narrowed(ctx, _zero_at_minus_inf(x, value, wide, const), wide)\n"
        ),
        replace=(
            "    e = stablehlo.ExpOp(stablehlo.NegOp(x).result).result\n"
            "    return _narrowed(ctx, stablehlo.DivOp(x, stablehlo.AddOp(const(1.0), e).result).result, wide)\n"
        ),
        why="silu as the textbook x / (1 + exp(-x)): -inf / inf is NaN where the limit is -0.0",
        ops=("silu",),
    ),
    Mutant(
        id="leaky-relu-ge-zero",
        file=FILE,
        find='value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)\n    return _narrowed(ctx, value, wide)\n\n\n@rule("elu")',
        replace='value = hlo.select(hlo.compare(x, const(0.0), "GE", wide.dtype), x, negative)\n    return _narrowed(ctx, value, wide)\n\n\n@rule("elu")',
        why="x >= 0 keeps zeros as they are: leaky_relu(+0.0) with a negative slope should be -0.0",
        ops=("leaky_relu",),
    ),
    Mutant(
        id="leaky-relu-max-form",
        file=FILE,
        find='value = hlo.select(hlo.compare(x, const(0.0), "GT", wide.dtype), x, negative)\n    return _narrowed(ctx, value, wide)\n\n\n@rule("elu")',
        replace='value = stablehlo.MaxOp(x, negative).result\n    return _narrowed(ctx, value, wide)\n\n\n@rule("elu")',
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
]
