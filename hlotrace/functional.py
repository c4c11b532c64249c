"""User-facing functions, one per registered op, plus composites built from them.

>>> import hlotrace as ht, hlotrace.functional as F
>>> F.softmax(ht.tensor([[1.0, 2.0, 3.0]]), axis=-1).numpy().sum()
1.0
"""

from __future__ import annotations

from hlotrace.dispatch import apply
from hlotrace.ops import get_op
from hlotrace.ops.common import as_tensor, composite_error
from hlotrace.torch_compat import dim_alias as _dim_alias
from hlotrace.trace import scope

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
divide = _binary("divide", "True division x / y (int32/bool operands give float32, int64 float64).")
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
    """Mean over ``axis`` (int32/bool inputs give float32, int64 float64)."""
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


@_dim_alias
def cat(tensors, axis=0):
    """PyTorch's ``torch.cat(tensors, dim=0)``: :func:`concat` (``dim=`` or ``axis=``)."""
    return concat(tensors, axis=axis)


# -- indexing ---------------------------------------------------------------------------
def getitem(x, index):
    """Basic indexing ``x[index]``: ints, slices (any step), None, Ellipsis."""
    return apply(_op("getitem"), x, index=index)


def getitem_transpose(x, shape, index):
    """Zeros of ``shape`` with ``x`` placed where ``zeros[index]`` reads (getitem's VJP)."""
    return apply(_op("getitem_transpose"), x, shape=tuple(shape), index=index)


# -- composites (not primitives: recorded as the ops they are made of) --------------------
@_dim_alias
def softmax(x, axis=-1):
    """Numerically stable softmax along ``axis`` (or PyTorch's ``dim=``)."""
    with scope("hlotrace.softmax"):
        offset = max(x, axis=axis, keepdims=True)._stop_gradient()  # an intermediate: no copy
        exps = exp(x - offset)
        return exps / sum(exps, axis=axis, keepdims=True)


# -- nn and creation ops (hlotrace/ops/nn.py, hlotrace/ops/creation/) --------------------
def relu(x):
    """max(x, 0): NaN propagates, relu(-0.0) is +0.0 (integers and floats)."""
    return apply(_op("relu"), x)


def sigmoid(x):
    """1 / (1 + exp(-x)), stable for large |x| (floats)."""
    return apply(_op("sigmoid"), x)


@_dim_alias
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along ``axis`` (or PyTorch's ``dim=``), stable (floats, rank >= 1)."""
    return apply(_op("log_softmax"), x, axis=axis)


def one_hot(labels, num_classes, dtype="float32"):
    """``labels[..., None] == arange(num_classes)`` as ``dtype``; integer labels; a label
    outside [0, num_classes) gives an all-zero row (as jax.nn.one_hot)."""
    return apply(_op("one_hot"), labels, num_classes=num_classes, dtype=dtype)


def clip(x, min=None, max=None, *, lower=None, upper=None):  # noqa: A002  (NumPy's and PyTorch's names)
    """Clip to the scalar bounds [min, max] (either may be None); NaN propagates and
    min > max gives max (NumPy). Tensor bounds: use maximum/minimum. ``lower``/``upper``
    are MegEngine's names for ``min``/``max``."""
    if lower is not None or upper is not None:
        if min is not None or max is not None:
            raise TypeError("clip: give the bounds as min/max or as lower/upper, not both")
        min, max = lower, upper  # noqa: A001
    return apply(_op("clip"), x, min=min, max=max)


def zeros(shape, dtype="float32"):
    """A tensor of zeros."""
    return apply(_op("zeros"), shape=shape, dtype=dtype)


def ones(shape, dtype="float32"):
    """A tensor of ones."""
    return apply(_op("ones"), shape=shape, dtype=dtype)


def full(shape, value, dtype=None):
    """A tensor filled with ``value`` (dtype: the value's own, bool/int32/float32, by default)."""
    return apply(_op("full"), shape=shape, value=value, dtype=dtype)


def arange(start, stop=None, step=1, dtype=None):
    """NumPy's arange: ``arange(5)``, ``arange(1, 2, 0.25)``; int32 if every argument is
    an int, else float32 (or ``dtype``)."""
    return apply(_op("arange"), start=start, stop=stop, step=step, dtype=dtype)


_as_tensor = as_tensor  # older spelling (F._as_tensor)


def zeros_like(x, dtype=None):
    """Zeros of ``x``'s shape and dtype (or ``dtype``); recorded as a ``zeros`` op."""
    x = _as_tensor(x)
    return zeros(x.shape, x.dtype if dtype is None else dtype)


def ones_like(x, dtype=None):
    """Ones of ``x``'s shape and dtype (or ``dtype``); recorded as a ``ones`` op."""
    x = _as_tensor(x)
    return ones(x.shape, x.dtype if dtype is None else dtype)


def full_like(x, value, dtype=None):
    """``value`` in ``x``'s shape and dtype (or ``dtype``); recorded as a ``full`` op."""
    x = _as_tensor(x)
    return full(x.shape, value, x.dtype if dtype is None else dtype)


_composite_error = composite_error  # older spelling (F._composite_error)


_REDUCTIONS = ("mean", "sum", "none")


def _reduce_loss(loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return sum(loss)
    return loss


def _check_reduction(name, reduction, *tensors):
    if reduction not in _REDUCTIONS:
        raise _composite_error(name, f"unknown reduction {reduction!r} (expected one of {_REDUCTIONS})", *tensors)


def cross_entropy(logits, labels, axis=-1, reduction="mean", weight=None, ignore_index=-100, label_smoothing=0.0):
    """Softmax cross-entropy of ``logits`` against integer class ``labels`` (PyTorch's
    options; a composite, see :mod:`hlotrace.losses`).

    ``labels`` has ``logits``' shape without ``axis`` (the class axis). The loss of each
    example is ``-log_softmax(logits)[label]``, picked with a ``where`` on
    ``one_hot(labels)`` (not a product: a -inf log-probability of another class stays out
    of it). A label equal to ``ignore_index`` (-100, PyTorch's default; None for none) gives
    0 and is left out of the mean; any other label outside ``[0, num_classes)`` selects
    nothing: that example's loss is 0 and it still counts in the mean. ``weight`` (one per
    class) scales each example's loss by its label's weight and makes "mean" the weighted
    mean ``sum(loss) / sum(weight[label])``. ``label_smoothing`` ε mixes in the uniform
    distribution: ``(1 - ε)·nll + ε/C·sum_c(-weight[c]·log p_c)``. Float ``labels`` of
    ``logits``' shape are class probabilities (soft targets). ``reduction``: "mean" (over
    examples), "sum" or "none".
    """
    return _losses._cross_entropy(logits, labels, axis, reduction, weight, ignore_index, label_smoothing)


def moveaxis_last_to(x, axis):
    """``x`` with its last axis moved to position ``axis`` (a transpose)."""
    perm = list(range(x.ndim - 1))
    perm.insert(axis, x.ndim - 1)
    return transpose(x, perm)


def mse_loss(pred, target, reduction="mean"):
    """Mean squared error ``(pred - target) ** 2``; ``pred`` and ``target`` must have one
    shape (broadcasting them is usually a mistake). ``reduction``: "mean", "sum" or "none"."""
    pred, target = _as_tensor(pred), _as_tensor(target)
    _check_reduction("mse_loss", reduction, pred, target)
    if pred.shape != target.shape:
        raise _composite_error(
            "mse_loss", f"pred shape {pred.shape} and target shape {target.shape} differ", pred, target
        )
    diff = pred - target
    return _reduce_loss(diff * diff, reduction)


# -- families whose public functions live beside their OpDefs (each family's __all__) -------
# Last: the layers below (Tensor's operators, the op families' VJPs) call these functions
# through hlotrace.namespace.F, which this binds (they never import this module).
import sys as _sys  # noqa: E402

from hlotrace import losses as _losses  # noqa: E402
from hlotrace.losses import *  # noqa: E402, F403
from hlotrace.megengine_names import *  # noqa: E402, F403
from hlotrace.namespace import F as _late_functions  # noqa: E402
from hlotrace.nn_functional import *  # noqa: E402, F403
from hlotrace.ops import FAMILY_MODULES as _FAMILY_MODULES  # noqa: E402

for _family in _FAMILY_MODULES:
    globals().update({_name: getattr(_family, _name) for _name in getattr(_family, "__all__", ())})

from hlotrace.nn_functional import pad as _pad  # noqa: E402

pad = _pad  # np.pad's widths or PyTorch's flat list: over the op family's np.pad

_late_functions.bind(_sys.modules[__name__])
