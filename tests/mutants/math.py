"""Mutants of hlotrace/lowering/rules/math/ (unary.py, binary.py: property column), and of
the VJPs in hlotrace/ops/math/ (unary.py, binary.py: gradient column); see TESTING.md."""

from hlotrace.testing.mutation import Mutant

RULES = "hlotrace/lowering/rules/math/unary.py"
BINARY = "hlotrace/lowering/rules/math/binary.py"
OPS = "hlotrace/ops/math/unary.py"
OPS_BINARY = "hlotrace/ops/math/binary.py"
MUTANTS = [
    # -- float functions ------------------------------------------------------------------
    Mutant(
        id="log1p-as-log-of-one-plus-x",
        file=RULES,
        find='rule("log1p")(_float_unary(lambda x, aval: stablehlo.Log1pOp(x).result))',
        replace=(
            'rule("log1p")(_float_unary(lambda x, aval: stablehlo.LogOp('
            "stablehlo.AddOp(hlo.constant(1, aval.dtype, aval.shape), x).result).result))"
        ),
        why="log1p lowered as log(1 + x): 1 + x rounds away the low bits of small x",
        ops=("log1p",),
    ),
    Mutant(
        id="expm1-as-exp-minus-one",
        file=RULES,
        find='rule("expm1")(_float_unary(lambda x, aval: stablehlo.Expm1Op(x).result))',
        replace=(
            'rule("expm1")(_float_unary(lambda x, aval: stablehlo.SubtractOp('
            "stablehlo.ExpOp(x).result, hlo.constant(1, aval.dtype, aval.shape)).result))"
        ),
        why="expm1 lowered as exp(x) - 1: the subtraction cancels for small x",
        ops=("expm1",),
    ),
    Mutant(
        id="erf-wired-to-erfc",
        file=RULES,
        find="chlo.ErfOp(x).result",
        replace="chlo.ErfcOp(x).result",
        why="erf registered with the chlo op of the next line in the dialect (erfc)",
        ops=("erf",),
    ),
    Mutant(
        id="tan-wired-to-tanh",
        file=RULES,
        find="stablehlo.TanOp(x).result",
        replace="stablehlo.TanhOp(x).result",
        why="tan registered with stablehlo.tanh",
        ops=("tan",),
    ),
    Mutant(
        id="arctan-swapped-atan2",
        file=RULES,
        find="stablehlo.Atan2Op(x, hlo.constant(1, aval.dtype, aval.shape)).result",
        replace="stablehlo.Atan2Op(hlo.constant(1, aval.dtype, aval.shape), x).result",
        why="arctan as atan2(1, x) instead of atan2(x, 1)",
        ops=("arctan",),
    ),
    Mutant(
        id="sinh-chlo-everywhere",
        file=RULES,
        find="    return hlo.select(_large(x, aval), big, chlo.SinhOp(x).result)",
        replace="    return chlo.SinhOp(x).result",
        why="sinh left to chlo.sinh for all x: ~1e-5 off above |x| = 33 (float32) and inf just below the overflow",
        ops=("sinh",),
    ),
    Mutant(
        id="sinh-large-loses-sign",
        file=RULES,
        find="    big = hlo.select(negative, stablehlo.NegOp(big).result, big)\n",
        replace="",
        why="the large-|x| branch of sinh computes exp(|x|)/2 and forgets to restore x's sign",
        ops=("sinh",),
    ),
    Mutant(
        id="cosh-half-exp-overflows",
        file=RULES,
        find="    return stablehlo.MulOp(h, stablehlo.MulOp(h, half).result).result",
        replace=(
            "    e = stablehlo.ExpOp(stablehlo.AbsOp(x).result).result\n    return stablehlo.MulOp(e, half).result"
        ),
        why="exp(|x|) / 2 computed as written: exp overflows where the half is still finite",
        ops=("cosh", "sinh"),
    ),
    # -- rounding, sign, predicates -----------------------------------------------------------
    Mutant(
        id="round-half-away-from-zero",
        file=RULES,
        find='rule("round")(_rounding(stablehlo.RoundNearestEvenOp))',
        replace='rule("round")(_rounding(stablehlo.RoundOp))',
        why="round lowered with stablehlo.round_nearest_afz (C's round): 2.5 becomes 3, not 2",
        ops=("round",),
    ),
    Mutant(
        id="floor-as-round-of-x-minus-half",
        file=RULES,
        find='rule("floor")(_rounding(stablehlo.FloorOp))',
        replace=(
            '@rule("floor")\n'
            "def _floor(ctx, x):\n"
            "    aval = ctx.in_avals[0]\n"
            "    if aval.dtype not in dt.FLOATING:\n"
            "        return x\n"
            "    half = hlo.constant(0.5, aval.dtype, aval.shape)\n"
            "    return stablehlo.RoundNearestEvenOp(stablehlo.SubtractOp(x, half).result).result\n"
        ),
        why="floor as round(x - 0.5): an odd integer x gives x - 1 (3 - 0.5 rounds to 2)",
        ops=("floor",),
    ),
    Mutant(
        id="ceil-wired-to-floor",
        file=RULES,
        find='rule("ceil")(_rounding(stablehlo.CeilOp))',
        replace='rule("ceil")(_rounding(stablehlo.FloorOp))',
        why="ceil registered with the floor op (copy of the line above)",
        ops=("ceil",),
    ),
    Mutant(
        id="sign-keeps-negative-zero",
        file=RULES,
        find="    return hlo.plus_zero(signs, aval)",
        replace="    return signs",
        why="sign left to stablehlo.sign, which gives -0.0 for -0.0 (NumPy: +0.0)",
        ops=("sign",),
    ),
    Mutant(
        id="sign-of-nan-is-zero",
        file=RULES,
        find="    signs = stablehlo.SignOp(x).result\n",
        replace=(
            "    zero_ = hlo.constant(0, aval.dtype, aval.shape)\n"
            "    one, minus = hlo.constant(1, aval.dtype, aval.shape), hlo.constant(-1, aval.dtype, aval.shape)\n"
            '    signs = hlo.select(hlo.compare(x, zero_, "GT", aval.dtype), one, '
            'hlo.select(hlo.compare(x, zero_, "LT", aval.dtype), minus, zero_))\n'
        ),
        why="sign as select(x > 0, 1, select(x < 0, -1, 0)): NaN compares false and becomes 0",
        ops=("sign",),
    ),
    Mutant(
        id="isfinite-true-for-nan",
        file=RULES,
        find='rule("isfinite")(_predicate(lambda x, aval: stablehlo.IsFiniteOp(x).result, True))',
        replace=(
            'rule("isfinite")(_predicate(lambda x, aval: hlo.compare(stablehlo.AbsOp(x).result, '
            'hlo.constant(float("inf"), aval.dtype, aval.shape), "NE", aval.dtype), True))'
        ),
        why="isfinite as |x| != inf: NaN is not inf, so it counts as finite",
        ops=("isfinite",),
    ),
    Mutant(
        id="isinf-only-positive",
        file=RULES,
        find='            stablehlo.AbsOp(x).result, hlo.constant(float("inf"), aval.dtype, aval.shape), "EQ", aval.dtype',
        replace='            x, hlo.constant(float("inf"), aval.dtype, aval.shape), "EQ", aval.dtype',
        why="isinf as x == inf, missing -inf",
        ops=("isinf",),
    ),
    Mutant(
        id="isfinite-of-integers-false",
        file=RULES,
        find='rule("isfinite")(_predicate(lambda x, aval: stablehlo.IsFiniteOp(x).result, True))',
        replace='rule("isfinite")(_predicate(lambda x, aval: stablehlo.IsFiniteOp(x).result, False))',
        why="the constant for integer and bool inputs copied from isnan's line: integers are not finite",
        ops=("isfinite",),
    ),
    # -- atan2, mod, floor_divide ----------------------------------------------------------------
    Mutant(
        id="atan2-swapped-operands",
        file=BINARY,
        find="stablehlo.Atan2Op(lhs, rhs).result",
        replace="stablehlo.Atan2Op(rhs, lhs).result",
        why="atan2(x, y) lowered as atan2(y, x) (C's and NumPy's argument order confused)",
        ops=("atan2",),
    ),
    Mutant(
        id="float-mod-is-fmod",
        file=BINARY,
        find="        mod = hlo.select(step, stablehlo.AddOp(rem, b).result, rem)\n",
        replace="        mod = rem\n",
        why="float mod left as stablehlo.remainder (C's fmod): the result has the dividend's sign",
        ops=("mod",),
    ),
    Mutant(
        id="int-mod-is-truncated-remainder",
        file=BINARY,
        find="        result = hlo.select(step, stablehlo.AddOp(rem, safe).result, rem)",
        replace="        result = rem",
        why="integer mod left as stablehlo.remainder: -5 % 3 gives -2, not 1",
        ops=("mod",),
    ),
    Mutant(
        id="mod-zero-always-positive",
        file=BINARY,
        find="hlo.select(b_negative, const(-0.0), zero), mod)",
        replace="zero, mod)",
        why="a zero remainder is +0.0 whatever the divisor's sign (NumPy: mod(3, -3) is -0.0)",
        ops=("mod",),
    ),
    Mutant(
        id="int-floor-divide-truncates",
        file=BINARY,
        find="        result = hlo.select(step, stablehlo.SubtractOp(div, const(1)).result, div)",
        replace="        result = div",
        why="integer floor_divide left as stablehlo.divide, which truncates toward zero (-7 // 2 gives -3)",
        ops=("floor_divide",),
    ),
    Mutant(
        id="float-floor-divide-as-floor-of-quotient",
        file=BINARY,
        find="    div = stablehlo.DivOp(stablehlo.SubtractOp(a, rem).result, b).result\n",
        replace=(
            "    return hlo.convert(stablehlo.FloorOp(stablehlo.DivOp(a, b).result).result, aval, out.dtype)\n"
            "    div = stablehlo.DivOp(stablehlo.SubtractOp(a, rem).result, b).result\n"
        ),
        why="float floor_divide as floor(x / y): the rounded quotient differs from NumPy's divmod "
        "(1 // 0.1 is 9) and inf // y is inf, not NaN",
        ops=("floor_divide",),
    ),
    Mutant(
        id="floor-divide-without-snap",
        file=BINARY,
        find="    floor = hlo.select(above_half, stablehlo.AddOp(floor, const(1.0)).result, floor)\n",
        replace="",
        why="the quotient is floored without NumPy's snap to the nearest integer (k - tiny floors to k - 1)",
        ops=("floor_divide",),
    ),
    Mutant(
        id="floor-divide-zero-takes-divisor-sign",
        file=BINARY,
        find='    floor = hlo.select(cmp(div, zero, "EQ"), hlo.select(_signbit(ratio, aval), const(-0.0), zero), floor)\n',
        replace="",
        why="a zero quotient keeps the sign of (x - fmod) / y instead of x / y's (-0.0 // 3 gives +0.0)",
        ops=("floor_divide",),
    ),
    Mutant(
        id="int-floor-divide-by-zero-not-zero",
        file=BINARY,
        find="    return hlo.select(by_zero, zero, result)",
        replace="    return result",
        why="the result for a zero divisor is not replaced: x // 0 gives x (it was divided by 1)",
        ops=("floor_divide",),
    ),
    Mutant(
        id="int-min-floor-divide-minus-one",
        file=BINARY,
        find="        result = hlo.select(by_minus_one, stablehlo.NegOp(a).result, result)  # INT_MIN wraps to itself\n",
        replace="",
        why="the -1 divisor replaced by 1 (to keep INT_MIN / -1 off the hardware) is not negated back",
        ops=("floor_divide",),
    ),
    # -- inverse functions and logaddexp (issue 36) -------------------------------------------
    Mutant(
        id="acosh-wrong-branch",
        file=RULES,
        find='rule("acosh")(_float_unary(lambda x, aval: chlo.AcoshOp(x).result))',
        replace=(
            'rule("acosh")(_float_unary(lambda x, aval: stablehlo.LogOp(stablehlo.SubtractOp(x, stablehlo.SqrtOp('
            "stablehlo.SubtractOp(stablehlo.MulOp(x, x).result, hlo.constant(1, aval.dtype, aval.shape)).result"
            ").result).result).result))"
        ),
        why="acosh as log(x - sqrt(x² - 1)), the other root of cosh(y) = x: -acosh(x)",
        ops=("acosh",),
    ),
    Mutant(
        id="asin-wired-to-acos",
        file=RULES,
        find="chlo.AsinOp(x).result",
        replace="chlo.AcosOp(x).result",
        why="asin registered with the chlo op of the next line (acos)",
        ops=("asin",),
    ),
    Mutant(
        id="asinh-naive-log",
        file=RULES,
        find="    return hlo.select(zero, x, chlo.AsinhOp(x).result)\n",
        replace=(
            "    return hlo.select(zero, x, stablehlo.LogOp(stablehlo.AddOp(x, stablehlo.SqrtOp("
            "stablehlo.AddOp(stablehlo.MulOp(x, x).result, hlo.constant(1, aval.dtype, aval.shape)).result"
            ").result).result).result)\n"
        ),
        why="asinh as log(x + sqrt(x² + 1)): x² overflows for large |x| and the sum cancels for x << 0",
        ops=("asinh",),
    ),
    Mutant(
        id="asinh-zero-folded",
        file=RULES,
        find="    return hlo.select(zero, x, chlo.AsinhOp(x).result)\n",
        replace="    return chlo.AsinhOp(x).result\n",
        why="asinh without its zero guard: XLA folds asinh of a captured -0.0 to +0.0",
        ops=("asinh",),
    ),
    Mutant(
        id="atanh-as-log-ratio",
        file=RULES,
        find='rule("atanh")(_float_unary(lambda x, aval: chlo.AtanhOp(x).result))',
        replace=(
            'rule("atanh")(_float_unary(lambda x, aval: stablehlo.MulOp(hlo.constant(0.5, aval.dtype, aval.shape), '
            "stablehlo.LogOp(stablehlo.DivOp(stablehlo.AddOp(hlo.constant(1, aval.dtype, aval.shape), x).result, "
            "stablehlo.SubtractOp(hlo.constant(1, aval.dtype, aval.shape), x).result).result).result).result))"
        ),
        why="atanh as log((1 + x) / (1 - x)) / 2: 1 ± x rounds away the low bits of small x",
        ops=("atanh",),
    ),
    Mutant(
        id="logaddexp-without-max-shift",
        file=BINARY,
        find='    value = hlo.select(hlo.compare(a, b, "EQ", wide.dtype), tie, shifted)\n',
        replace=(
            "    value = stablehlo.LogOp(stablehlo.AddOp(stablehlo.ExpOp(a).result, stablehlo.ExpOp(b).result).result)"
            ".result\n"
        ),
        why="logaddexp as log(exp(x) + exp(y)): overflows to inf from x = 89 (float32), -inf far below 0",
        ops=("logaddexp",),
    ),
    Mutant(
        id="logaddexp-equal-infinities-nan",
        file=BINARY,
        find='    value = hlo.select(hlo.compare(a, b, "EQ", wide.dtype), tie, shifted)\n',
        replace="    value = shifted\n",
        why="no tie case: logaddexp(-inf, -inf) takes -inf - -inf = NaN as the gap",
        ops=("logaddexp",),
    ),
    # -- VJPs (gradient column) ---------------------------------------------------------------------
    Mutant(
        id="log1p-vjp-as-log",
        file=OPS,
        find="lambda ct, out, x: (F.divide(ct, F.add(x, 1.0)),),",
        replace="lambda ct, out, x: (F.divide(ct, x),),",
        why="d log1p(x) taken as 1 / x (log's derivative)",
        ops=("log1p",),
    ),
    Mutant(
        id="expm1-vjp-uses-out",
        file=OPS,
        find="lambda ct, out, x: (F.multiply(ct, F.exp(x)),),",
        replace="lambda ct, out, x: (F.multiply(ct, out),),",
        why="d expm1(x) taken as expm1(x) (exp's VJP copied: ct * out)",
        ops=("expm1",),
    ),
    Mutant(
        id="erf-vjp-without-factor",
        file=OPS,
        find="F.multiply(ct, 2.0 / math.sqrt(math.pi))",
        replace="ct",
        why="d erf(x) = 2/sqrt(pi) exp(-x²) without the 2/sqrt(pi)",
        ops=("erf",),
    ),
    Mutant(
        id="tan-vjp-as-tanh",
        file=OPS,
        find="(F.multiply(ct, F.add(F.square(out), 1.0)),)",
        replace="(F.multiply(ct, F.subtract(1.0, F.square(out))),)",
        why="d tan(x) taken as 1 - tan² (tanh's derivative)",
        ops=("tan",),
    ),
    Mutant(
        id="arctan-vjp-sign",
        file=OPS,
        find="(F.divide(ct, F.add(F.square(x), 1.0)),)",
        replace="(F.divide(ct, F.subtract(1.0, F.square(x))),)",
        why="d arctan(x) taken as 1 / (1 - x²) (atanh's derivative)",
        ops=("arctan",),
    ),
    Mutant(
        id="sinh-vjp-uses-sinh",
        file=OPS,
        find="(F.multiply(ct, F.cosh(x)),)",
        replace="(F.multiply(ct, F.sinh(x)),)",
        why="d sinh(x) taken as sinh(x)",
        ops=("sinh",),
    ),
    Mutant(
        id="cosh-vjp-negated",
        file=OPS,
        find="(F.multiply(ct, F.sinh(x)),)",
        replace="(F.negative(F.multiply(ct, F.sinh(x))),)",
        why="d cosh(x) taken as -sinh(x) (cos's derivative copied)",
        ops=("cosh",),
    ),
    Mutant(
        id="reciprocal-vjp-sign",
        file=OPS,
        find="(F.negative(F.multiply(ct, F.square(out))),)",
        replace="(F.multiply(ct, F.square(out)),)",
        why="d(1/x) = -1/x² loses its minus sign",
        ops=("reciprocal",),
    ),
    Mutant(
        id="square-vjp-without-two",
        file=OPS,
        find="return (F.multiply(F.multiply(ct, 2.0), x),)",
        replace="return (F.multiply(ct, x),)",
        why="d x² taken as x",
        ops=("square",),
    ),
    Mutant(
        id="atan2-vjp-swapped",
        file=OPS_BINARY,
        find="return F.divide(F.multiply(ct, y), norm), F.negative(F.divide(F.multiply(ct, x), norm))",
        replace="return F.divide(F.multiply(ct, x), norm), F.negative(F.divide(F.multiply(ct, y), norm))",
        why="atan2's partial derivatives given to the wrong operands",
        ops=("atan2",),
    ),
    Mutant(
        id="mod-vjp-divisor-sign",
        file=OPS_BINARY,
        find="return ct, F.negative(F.multiply(ct, F.floor_divide(x, y)))",
        replace="return ct, F.multiply(ct, F.floor_divide(x, y))",
        why="d mod(x, y)/dy = -floor(x / y) loses its minus sign",
        ops=("mod",),
    ),
    Mutant(
        id="acos-vjp-sign",
        file=OPS,
        find="(F.negative(F.multiply(ct, F.rsqrt(F.subtract(1.0, F.square(_as(x, out)))))),)",
        replace="(F.multiply(ct, F.rsqrt(F.subtract(1.0, F.square(_as(x, out))))),)",
        why="d acos(x) = -1 / sqrt(1 - x²) loses its minus sign (asin's VJP copied)",
        ops=("acos",),
    ),
    Mutant(
        id="atanh-vjp-as-arctan",
        file=OPS,
        find="(F.divide(ct, F.subtract(1.0, F.square(_as(x, out)))),)",
        replace="(F.divide(ct, F.add(1.0, F.square(_as(x, out)))),)",
        why="d atanh(x) taken as 1 / (1 + x²) (arctan's derivative)",
        ops=("atanh",),
    ),
    Mutant(
        id="acosh-vjp-uses-cosh",
        file=OPS,
        find="(F.divide(ct, F.sinh(out)),)",
        replace="(F.divide(ct, F.cosh(out)),)",
        why="d acosh(x) taken as 1 / cosh(acosh(x)) = 1 / x (asinh's VJP copied)",
        ops=("acosh",),
    ),
    Mutant(
        id="logaddexp-vjp-swapped",
        file=OPS_BINARY,
        find="return F.multiply(ct, F.sigmoid(F.subtract(x, y))), F.multiply(ct, F.sigmoid(F.subtract(y, x)))",
        replace="return F.multiply(ct, F.sigmoid(F.subtract(y, x))), F.multiply(ct, F.sigmoid(F.subtract(x, y)))",
        why="each operand of logaddexp given the other's weight sigmoid(y - x)",
        ops=("logaddexp",),
    ),
]
