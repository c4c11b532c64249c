"""Mutants of hlotrace/lowering/rules/normalization.py and of the VJPs in
hlotrace/ops/normalization.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/normalization.py"
OPS_FILE = "hlotrace/ops/normalization.py"

MUTANTS = [
    # -- rules -------------------------------------------------------------------------------
    Mutant(
        id="layer-norm-unbiased-variance",
        file=FILE,
        find="var = _mean(stablehlo.MulOp(centered, centered).result, wide, axis, count)",
        replace="var = _mean(stablehlo.MulOp(centered, centered).result, wide, axis, max(count - 1, 1))",
        why="the unbiased variance (divide by n - 1) where layer norm uses the biased one",
        ops=("layer_norm",),
    ),
    Mutant(
        id="layer-norm-eps-outside-sqrt",
        file=FILE,
        find=(
            "    scale = stablehlo.RsqrtOp(stablehlo.AddOp(var, hlo.constant(eps, wide.dtype, reduced)).result).result\n"
        ),
        replace=(
            "    scale = stablehlo.DivOp(hlo.constant(1.0, wide.dtype, reduced), stablehlo.AddOp(\n"
            "        stablehlo.SqrtOp(var).result, hlo.constant(eps, wide.dtype, reduced)).result).result\n"
        ),
        why="1 / (sqrt(var) + eps) instead of 1 / sqrt(var + eps)",
        ops=("layer_norm",),
    ),
    Mutant(
        id="layer-norm-last-axis-only",
        file=FILE,
        find="    keep = [d for d in range(len(shape)) if d not in axis]\n",
        replace="    keep = list(range(len(shape) - len(axis)))\n",
        why="the reduced statistics are broadcast back as if the normalized axes were the trailing ones",
        ops=("layer_norm",),
    ),
    Mutant(
        id="layer-norm-half-precision-statistics",
        file=FILE,
        find="    wide = Aval(shape, compute_dtype(aval.dtype))\n    value = hlo.convert(x, aval, wide.dtype)\n    rank",
        replace="    wide = aval\n    value = x\n    rank",
        why="float16/bfloat16 statistics computed in the input dtype instead of float32",
        ops=("layer_norm",),
    ),
    Mutant(
        id="layer-norm-no-shift",
        file=FILE,
        find="    shifted = stablehlo.SubtractOp(value, _spread(first, shape, axis)).result\n",
        replace="    shifted = value\n",
        why="without subtracting each slice's first element, a constant slice's mean is off by "
        "rounding and normalizes to noise instead of exactly 0",
        ops=("layer_norm",),
    ),
    Mutant(
        id="batch-norm-mean-on-last-axis",
        file=FILE,
        find="spread = hlo.broadcast_in_dim(hlo.convert(mean, mean_aval, wide.dtype), aval.shape, [1])",
        replace="spread = hlo.broadcast_in_dim(hlo.convert(mean, mean_aval, wide.dtype), aval.shape, [len(aval.shape) - 1])",
        why="the per-channel mean is broadcast along the last dim (channels-last) instead of dim 1",
        ops=("batch_norm_inference",),
    ),
    Mutant(
        id="batch-norm-std-instead-of-var",
        file=FILE,
        find="    var = hlo.convert(var, var_aval, wide.dtype)\n",
        replace="    var = stablehlo.MulOp(hlo.convert(var, var_aval, wide.dtype), hlo.convert(var, var_aval, wide.dtype)).result\n",
        why="the var input treated as a standard deviation and squared",
        ops=("batch_norm_inference",),
    ),
    Mutant(
        id="batch-norm-folds-minus-zero-mean",
        file=FILE,
        find="    if hlo.is_zero_constant(mean, -1.0):\n",
        replace="    if False:\n",
        why="x - (-0.0) left to XLA, which folds it to x and keeps -0.0 where IEEE gives +0.0",
        ops=("batch_norm_inference",),
    ),
    # -- VJPs --------------------------------------------------------------------------------
    Mutant(
        id="layer-norm-vjp-no-projection",
        file=OPS_FILE,
        find="return (rstd * (g - mean_g - xhat * mean_gx),)",
        replace="return (rstd * (g - mean_g),)",
        why="the gradient through the variance (the xhat * mean(g xhat) term) is dropped",
        ops=("layer_norm",),
    ),
    Mutant(
        id="layer-norm-vjp-no-mean-term",
        file=OPS_FILE,
        find="return (rstd * (g - mean_g - xhat * mean_gx),)",
        replace="return (rstd * (g - xhat * mean_gx),)",
        why="the gradient through the mean is dropped",
        ops=("layer_norm",),
    ),
    Mutant(
        id="batch-norm-vjp-var-factor",
        file=OPS_FILE,
        find="dvar = F.sum(g * (x - m), axis=others) * (rstd * rstd * rstd) * -0.5",
        replace="dvar = F.sum(g * (x - m), axis=others) * (rstd * rstd) * -0.5",
        why="d rsqrt(v + eps)/dv taken as -r²/2 instead of -r³/2",
        ops=("batch_norm_inference",),
    ),
    Mutant(
        id="batch-norm-vjp-mean-sign",
        file=OPS_FILE,
        find="dmean = F.negative(F.sum(g, axis=others) * rstd)",
        replace="dmean = F.sum(g, axis=others) * rstd",
        why="d(x - mean)/dmean taken as +1",
        ops=("batch_norm_inference",),
    ),
]
