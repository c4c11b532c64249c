"""Mutants of the VJPs (ops/*.py ``vjp=``) and of the autodiff engine (see TESTING.md).

Killed by the generated gradient tests (tests/test_gradients.py: finite differences in
float64, compiled vs eager gradients); run with ``make mutation ARGS="--only vjp --columns gradient"``.
"""

from hlotrace.testing.mutation import Mutant

ELEMENTWISE = "hlotrace/ops/elementwise.py"
REDUCTION = "hlotrace/ops/reduction.py"
LINALG = "hlotrace/ops/linalg.py"
SHAPE = "hlotrace/ops/shape.py"
ENGINE = "hlotrace/autodiff.py"

MUTANTS = [
    Mutant(
        id="subtract-sign",
        file=ELEMENTWISE,
        find='"subtract": lambda ct, out, x, y: (ct, F.negative(ct)),',
        replace='"subtract": lambda ct, out, x, y: (ct, ct),',
        why="d(x - y)/dy is taken as +1",
        ops=("subtract",),
    ),
    Mutant(
        id="multiply-swapped",
        file=ELEMENTWISE,
        find='"multiply": lambda ct, out, x, y: (F.multiply(ct, y), F.multiply(ct, x)),',
        replace='"multiply": lambda ct, out, x, y: (F.multiply(ct, x), F.multiply(ct, y)),',
        why="d(x*y)/dx is taken as x instead of y",
        ops=("multiply",),
    ),
    Mutant(
        id="divide-sign",
        file=ELEMENTWISE,
        find="(F.divide(ct, y), F.negative(F.divide(F.multiply(ct, out), y)))",
        replace="(F.divide(ct, y), F.divide(F.multiply(ct, out), y))",
        why="d(x/y)/dy = -x/y² loses its minus sign",
        ops=("divide",),
    ),
    Mutant(
        id="power-exponent-drops-out",
        file=ELEMENTWISE,
        find="dy = F.where(F.equal(x, 0), 0.0, F.multiply(out, F.log(x)))",
        replace="dy = F.where(F.equal(x, 0), 0.0, F.log(x))",
        why="d(x**y)/dy is taken as log(x), forgetting the factor x**y",
        ops=("power",),
    ),
    Mutant(
        id="maximum-gradient-to-loser",
        file=ELEMENTWISE,
        find="return F.where(first_wins(x, y), ct, half), F.where(first_wins(y, x), ct, half)",
        replace="return F.where(first_wins(y, x), ct, half), F.where(first_wins(x, y), ct, half)",
        why="maximum/minimum send the gradient to the operand that was not chosen",
        ops=("maximum", "minimum"),
    ),
    Mutant(
        id="abs-sign",
        file=ELEMENTWISE,
        find="F.where(F.greater(x, 0), ct, F.where(F.less(x, 0), F.negative(ct), F.multiply(ct, x)))",
        replace="F.where(F.greater(x, 0), ct, F.where(F.less(x, 0), ct, F.multiply(ct, x)))",
        why="abs's gradient is +1 for negative x too",
        ops=("abs",),
    ),
    Mutant(
        id="exp-uses-input",
        file=ELEMENTWISE,
        find='"exp": lambda ct, out, x: (F.multiply(ct, out),),',
        replace='"exp": lambda ct, out, x: (F.multiply(ct, x),),',
        why="d exp(x) is taken as x instead of exp(x)",
        ops=("exp",),
    ),
    Mutant(
        id="log-multiplies",
        file=ELEMENTWISE,
        find='"log": lambda ct, out, x: (F.divide(ct, x),),',
        replace='"log": lambda ct, out, x: (F.multiply(ct, x),),',
        why="d log(x) is taken as x instead of 1/x",
        ops=("log",),
    ),
    Mutant(
        id="sqrt-missing-half",
        file=ELEMENTWISE,
        find='"sqrt": lambda ct, out, x: (F.divide(F.multiply(ct, 0.5), out),),',
        replace='"sqrt": lambda ct, out, x: (F.divide(ct, out),),',
        why="d sqrt(x) = 1/(2 sqrt(x)) loses the 1/2",
        ops=("sqrt",),
    ),
    Mutant(
        id="rsqrt-sign",
        file=ELEMENTWISE,
        find="(F.divide(F.multiply(F.multiply(ct, -0.5), out), x),)",
        replace="(F.divide(F.multiply(F.multiply(ct, 0.5), out), x),)",
        why="d x^(-1/2) = -x^(-3/2)/2 loses its minus sign",
        ops=("rsqrt",),
    ),
    Mutant(
        id="tanh-plus",
        file=ELEMENTWISE,
        find="(F.multiply(ct, F.subtract(1.0, F.multiply(out, out))),)",
        replace="(F.multiply(ct, F.add(1.0, F.multiply(out, out))),)",
        why="d tanh = 1 + tanh² instead of 1 - tanh²",
        ops=("tanh",),
    ),
    Mutant(
        id="cos-sign",
        file=ELEMENTWISE,
        find='"cos": lambda ct, out, x: (F.negative(F.multiply(ct, F.sin(x))),),',
        replace='"cos": lambda ct, out, x: (F.multiply(ct, F.sin(x)),),',
        why="d cos = sin instead of -sin",
        ops=("cos",),
    ),
    Mutant(
        id="where-vjp-branches-swapped",
        file=ELEMENTWISE,
        find="(None, F.where(cond, ct, 0.0), F.where(cond, 0.0, ct))",
        replace="(None, F.where(cond, 0.0, ct), F.where(cond, ct, 0.0))",
        why="where sends each branch the other branch's gradient",
        ops=("where",),
    ),
    Mutant(
        id="sum-missing-keepdims",
        file=REDUCTION,
        find="    if not keepdims:\n        ct = F.reshape(ct, reduced_shape(x.shape, axis, True))",
        replace="    if False:\n        ct = F.reshape(ct, reduced_shape(x.shape, axis, True))",
        why="the reduced cotangent is broadcast back without restoring the reduced dims",
        ops=("sum", "mean"),
    ),
    Mutant(
        id="mean-not-divided",
        file=REDUCTION,
        find="return (F.divide(_spread(ct, x, axis, keepdims), float(count)),)",
        replace="return (_spread(ct, x, axis, keepdims),)",
        why="mean's gradient is not divided by the number of elements",
        ops=("mean",),
    ),
    Mutant(
        id="max-gradient-everywhere",
        file=REDUCTION,
        find="return (F.where(hit, _spread(F.divide(ct, count), x, axis, keepdims), 0.0),)",
        replace="return (_spread(F.divide(ct, count), x, axis, keepdims),)",
        why="max/min send the gradient to every element, not only the maximal ones",
        ops=("max", "min"),
    ),
    Mutant(
        id="matmul-lhs-grad-untransposed",
        file=LINALG,
        find="        da = F.matmul(ct1, b1, transpose_b=not tb)",
        replace="        da = F.matmul(ct1, b1, transpose_b=tb)",
        why="dA = ct·B instead of ct·Bᵀ (fails only for square B, else a shape error)",
        ops=("matmul",),
    ),
    Mutant(
        id="matmul-rhs-grad-transposed-flag",
        file=LINALG,
        find="        db = F.matmul(ct1, a1, transpose_a=True, transpose_b=ta)",
        replace="        db = F.matmul(ct1, a1, transpose_a=True, transpose_b=not ta)",
        why="the gradient of a transposed b ignores how a was stored",
        ops=("matmul",),
    ),
    Mutant(
        id="transpose-uses-perm",
        file=SHAPE,
        find="(F.transpose(ct, tuple(sorted(range(len(perm)), key=perm.__getitem__))),)",
        replace="(F.transpose(ct, perm),)",
        why="transpose's cotangent is permuted by perm instead of its inverse",
        ops=("transpose",),
    ),
    Mutant(
        id="concat-off-by-one",
        file=SHAPE,
        find="index = (slice(None),) * axis + (slice(start, start + x.shape[axis]),)",
        replace="index = (slice(None),) * axis + (slice(max(start - 1, 0), max(start - 1, 0) + x.shape[axis]),)",
        why="each concat input's cotangent slice starts one element early",
        ops=("concat",),
    ),
    Mutant(
        id="unbroadcast-mean",
        file=ENGINE,
        find="g = F.sum(g, axis=axes, keepdims=True)",
        replace="g = F.mean(g, axis=axes, keepdims=True)",
        why="cotangents of broadcast operands are averaged over the broadcast dims instead of summed",
        ops=("add", "multiply"),
    ),
]
