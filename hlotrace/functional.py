"""User-facing functions, one per registered op, plus composites built from them.

>>> import hlotrace as ht, hlotrace.functional as F
>>> F.softmax(ht.tensor([[1.0, 2.0, 3.0]]), axis=-1).numpy().sum()
1.0
"""

from __future__ import annotations

from hlotrace.ops import get_op
from hlotrace.ops.registry import apply

_OP_CACHE: dict = {}


def _op(name: str):
    op = _OP_CACHE.get(name)
    if op is None:
        op = _OP_CACHE[name] = get_op(name)
    return op


def _binary(name: str, doc: str):
    def fn(x, y):
        return apply(_op(name), x, y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _unary(name: str, doc: str):
    def fn(x):
        return apply(_op(name), x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# -- elementwise ------------------------------------------------------------------------
add = _binary("add", "x + y, NumPy broadcasting and promotion.")
subtract = _binary("subtract", "x - y.")
multiply = _binary("multiply", "x * y.")
divide = _binary("divide", "True division x / y (integer operands give float32).")
power = _binary("power", "x ** y.")
maximum = _binary("maximum", "Elementwise maximum; NaN propagates.")
minimum = _binary("minimum", "Elementwise minimum; NaN propagates.")
equal = _binary("equal", "x == y (bool).")
not_equal = _binary("not_equal", "x != y (bool).")
less = _binary("less", "x < y (bool).")
less_equal = _binary("less_equal", "x <= y (bool).")
greater = _binary("greater", "x > y (bool).")
greater_equal = _binary("greater_equal", "x >= y (bool).")
logical_and = _binary("logical_and", "Truth of x and y.")
logical_or = _binary("logical_or", "Truth of x or y.")

negative = _unary("negative", "-x.")
abs = _unary("abs", "|x|.")  # noqa: A001  (the op's name)
exp = _unary("exp", "e ** x.")
log = _unary("log", "Natural logarithm.")
sqrt = _unary("sqrt", "Square root.")
rsqrt = _unary("rsqrt", "1 / sqrt(x).")
tanh = _unary("tanh", "Hyperbolic tangent.")
sin = _unary("sin", "Sine.")
cos = _unary("cos", "Cosine.")
logical_not = _unary("logical_not", "not x.")


def where(cond, x, y):
    """``x`` where ``cond`` is true, else ``y`` (broadcast together)."""
    return apply(_op("where"), cond, x, y)


def astype(x, dtype):
    """Cast to ``dtype`` (``"float32"``, ``"bf16"``, ``np.int32``, ...)."""
    return apply(_op("astype"), x, dtype=dtype)


# -- reductions -------------------------------------------------------------------------
def sum(x, axis=None, keepdims=False):  # noqa: A001
    """Sum over ``axis`` (int, tuple or None for all)."""
    return apply(_op("sum"), x, axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    """Maximum over ``axis``; NaN propagates; empty reductions are an error."""
    return apply(_op("max"), x, axis=axis, keepdims=keepdims)


def min(x, axis=None, keepdims=False):  # noqa: A001
    """Minimum over ``axis``; NaN propagates; empty reductions are an error."""
    return apply(_op("min"), x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (integer inputs give float32)."""
    return apply(_op("mean"), x, axis=axis, keepdims=keepdims)


# -- linear algebra ---------------------------------------------------------------------
def matmul(a, b, transpose_a=False, transpose_b=False):
    """NumPy ``matmul`` with optional transposition of the last two dims of each operand.

    Ranks 1–5; batch dims broadcast: (5,3,2,8,7)ᵀ × (1,2,9,8)ᵀ → (5,3,2,7,9).
    """
    return apply(_op("matmul"), a, b, transpose_a=transpose_a, transpose_b=transpose_b)


# -- shape ------------------------------------------------------------------------------
def reshape(x, shape):
    """Reshape; one dim may be -1."""
    return apply(_op("reshape"), x, shape=tuple(shape) if not isinstance(shape, int) else (shape,))


def transpose(x, perm=None):
    """Permute dims (``None`` reverses them)."""
    return apply(_op("transpose"), x, perm=None if perm is None else tuple(perm))


def broadcast_to(x, shape):
    """NumPy ``broadcast_to``."""
    return apply(_op("broadcast_to"), x, shape=tuple(shape) if not isinstance(shape, int) else (shape,))


def expand_dims(x, axis):
    """Insert size-1 dims at ``axis`` (int or tuple), NumPy semantics."""
    return apply(_op("expand_dims"), x, axis=axis)


def squeeze(x, axis=None):
    """Remove size-1 dims (all of them, or those in ``axis``)."""
    return apply(_op("squeeze"), x, axis=axis)


def concat(tensors, axis=0):
    """Concatenate along ``axis`` (dtypes promote)."""
    return apply(_op("concat"), *tensors, axis=axis)


# -- indexing ---------------------------------------------------------------------------
def getitem(x, index):
    """Basic indexing ``x[index]``: ints, slices (any step), None, Ellipsis."""
    return apply(_op("getitem"), x, index=index)


# -- composites (not primitives: recorded as the ops they are made of) --------------------
def softmax(x, axis=-1):
    """Numerically stable softmax along ``axis``."""
    offset = max(x, axis=axis, keepdims=True).detach()
    exps = exp(x - offset)
    return exps / sum(exps, axis=axis, keepdims=True)
