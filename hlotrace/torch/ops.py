# ruff: noqa: A001, A002  (PyTorch's names: input, min, max, sum, ...)
"""``torch.*`` math, shape and reduction functions with PyTorch's signatures and meanings,
each a thin mapping onto hlotrace's functional (registered ops and their composites); and
``torch.no_grad``.

Where PyTorch's meaning differs from the NumPy-named function of ``hlotrace.functional``, the
name here has PyTorch's: ``torch.transpose(x, dim0, dim1)`` swaps two dims (NumPy's takes a
permutation), ``torch.split(x, size, dim)`` takes chunk sizes (NumPy's takes sections or cut
points), ``torch.max(x, dim)`` is the ``(values, indices)`` pair, ``torch.max(a, b)`` the
elementwise maximum, ``torch.gather(x, dim, index)`` PyTorch's.

>>> import numpy as np, hlotrace.torch as torch
>>> x = torch.ones(2, 3)
>>> torch.cat([x, x], dim=1).shape, torch.stack([x, x], dim=0).shape
((2, 6), (2, 2, 3))
"""

from __future__ import annotations

import builtins
import functools

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace.ops.common import as_tensor
from hlotrace.recording import TAPES
from hlotrace.tensor import Tensor
from hlotrace.torch_compat import PAUSED_TAPES, ValuesIndices

__all__ = [
    "abs",
    "allclose",
    "argmax",
    "argmin",
    "bmm",
    "cat",
    "chunk",
    "clamp",
    "clip",
    "concat",
    "cos",
    "cumsum",
    "exp",
    "flatten",
    "gather",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log_softmax",
    "logsumexp",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "no_grad",
    "numel",
    "permute",
    "pow",
    "prod",
    "relu",
    "reshape",
    "rsqrt",
    "sigmoid",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "sum",
    "tanh",
    "topk",
    "transpose",
    "tril",
    "triu",
    "unsqueeze",
    "where",
]


def _cast(x, dtype):
    return x if dtype is None else F.astype(x, dt.canonicalize(dtype))


# -- joining, splitting, reshaping -----------------------------------------------------------


def cat(tensors, dim: int = 0) -> Tensor:
    """``torch.cat(tensors, dim=0)``: concatenated along ``dim`` (dtypes promote)."""
    return F.concat(list(tensors), axis=dim)


concat = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """``torch.stack(tensors, dim=0)``: joined along a new dim ``dim``."""
    return F.stack(list(tensors), axis=dim)


def tril(input, diagonal: int = 0) -> Tensor:
    """``torch.tril``: zeros above the ``diagonal``-th diagonal of the last two dims."""
    return F.tril(input, k=diagonal)


def triu(input, diagonal: int = 0) -> Tensor:
    """``torch.triu``: zeros below the ``diagonal``-th diagonal of the last two dims."""
    return F.triu(input, k=diagonal)


def flatten(input, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``torch.flatten``: dims ``start_dim..end_dim`` merged into one."""
    return F.flatten(input, start_dim, end_dim)


def reshape(input, shape) -> Tensor:
    return F.reshape(input, shape)


def transpose(input, dim0: int, dim1: int) -> Tensor:
    """``torch.transpose(x, dim0, dim1)``: those two dims swapped (PyTorch's meaning)."""
    return F.swapaxes(input, dim0, dim1)


def permute(input, dims) -> Tensor:
    return F.transpose(input, tuple(dims))


def squeeze(input, dim=None) -> Tensor:
    """``torch.squeeze``: size-1 dims removed (those of ``dim`` only; a dim of another size
    stays, as PyTorch)."""
    x = as_tensor(input)
    if dim is None:
        return F.squeeze(x)
    dims = dim if isinstance(dim, tuple | list) else (dim,)
    ones = tuple(d for d in dims if x.shape[d] == 1)
    return F.squeeze(x, ones) if ones else x


def unsqueeze(input, dim: int) -> Tensor:
    return F.expand_dims(input, dim)


def split(tensor, split_size_or_sections, dim: int = 0) -> list:
    """``torch.split``: chunks of ``split_size_or_sections`` along ``dim`` (an int: that size,
    the last chunk smaller; a list: those sizes)."""
    return as_tensor(tensor).split(split_size_or_sections, dim)


def chunk(input, chunks: int, dim: int = 0) -> list:
    return as_tensor(input).chunk(chunks, dim)


def gather(input, dim: int, index) -> Tensor:
    """``torch.gather(x, dim, index)``: ``out[i][j] = x[index[i][j]][j]`` for ``dim=0``."""
    return F.gather(input, dim, index)


def numel(input) -> int:
    return int(as_tensor(input).size)


# -- math ---------------------------------------------------------------------------------------


def where(condition, input=None, other=None) -> Tensor:
    """``torch.where(condition, input, other)``. The one-argument form (indices, a shape that
    depends on values) is not offered."""
    if input is None or other is None:
        raise TypeError("torch.where(condition): the one-argument form (nonzero indices) is not offered")
    return F.where(condition, input, other)


def matmul(input, other) -> Tensor:
    return F.matmul(input, other)


mm = bmm = matmul


def softmax(input, dim: int, dtype=None) -> Tensor:
    return F.softmax(_cast(input, dtype), axis=dim)


def log_softmax(input, dim: int, dtype=None) -> Tensor:
    return F.log_softmax(_cast(input, dtype), axis=dim)


def logsumexp(input, dim, keepdim: builtins.bool = False) -> Tensor:
    return F.logsumexp(input, axis=dim, keepdims=keepdim)


def _unary(name: str, fn):
    def function(input):
        return fn(input)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``torch.{name}``: ``F.{fn.__name__}``."
    return function


abs = _unary("abs", F.abs)
exp, log, sqrt, rsqrt = (_unary(n, getattr(F, n)) for n in ("exp", "log", "sqrt", "rsqrt"))
sin, cos, tanh, sigmoid, relu = (_unary(n, getattr(F, n)) for n in ("sin", "cos", "tanh", "sigmoid", "relu"))
square, isnan, isinf, isfinite = (_unary(n, getattr(F, n)) for n in ("square", "isnan", "isinf", "isfinite"))


def pow(input, exponent) -> Tensor:
    return F.power(input, exponent)


def maximum(input, other) -> Tensor:
    return F.maximum(input, other)


def minimum(input, other) -> Tensor:
    return F.minimum(input, other)


def clamp(input, min=None, max=None) -> Tensor:
    """``torch.clamp``: scalar bounds clip; tensor bounds are ``maximum``/``minimum``."""
    x = input
    if isinstance(min, Tensor):
        x, min = F.maximum(x, min), None
    if isinstance(max, Tensor):
        x, max = F.minimum(x, max), None
    return x if min is None and max is None else F.clip(x, min, max)


clip = clamp


def cumsum(input, dim: int, dtype=None) -> Tensor:
    return F.cumsum(_cast(input, dtype), axis=dim)


def allclose(input, other, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: builtins.bool = False) -> builtins.bool:
    """``torch.allclose``: ``|input - other| <= atol + rtol * |other|`` everywhere (a bool:
    reads the value, so not inside a compiled step)."""
    close = F.less_equal(F.abs(input - other), atol + rtol * F.abs(as_tensor(other)))
    if equal_nan:
        close = F.logical_or(close, F.logical_and(F.isnan(as_tensor(input)), F.isnan(as_tensor(other))))
    return builtins.bool(F.all(close).item())


# -- reductions ---------------------------------------------------------------------------------


def _reduction(fn, input, dim, keepdim, dtype=None):
    return fn(_cast(input, dtype), axis=tuple(dim) if isinstance(dim, list) else dim, keepdims=keepdim)


def sum(input, dim=None, keepdim: builtins.bool = False, dtype=None) -> Tensor:
    return _reduction(F.sum, input, dim, keepdim, dtype)


def mean(input, dim=None, keepdim: builtins.bool = False, dtype=None) -> Tensor:
    return _reduction(F.mean, input, dim, keepdim, dtype)


def prod(input, dim=None, keepdim: builtins.bool = False, dtype=None) -> Tensor:
    return _reduction(F.prod, input, dim, keepdim, dtype)


def _extreme(name, reduce, elementwise, arg):
    def function(input, dim=None, keepdim: builtins.bool = False):
        if isinstance(dim, Tensor):  # torch.max(a, b): elementwise
            return elementwise(input, dim)
        if dim is None:
            return reduce(input)
        return ValuesIndices(reduce(input, axis=dim, keepdims=keepdim), arg(input, axis=dim, keepdims=keepdim))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"``torch.{name}(x)``: over every element; ``torch.{name}(x, dim, keepdim=False)``: the "
        f"``(values, indices)`` pair; ``torch.{name}(a, b)`` with a tensor ``b``: elementwise."
    )
    return function


max = _extreme("max", F.max, F.maximum, F.argmax)
min = _extreme("min", F.min, F.minimum, F.argmin)


def argmax(input, dim=None, keepdim: builtins.bool = False) -> Tensor:
    return F.argmax(input, axis=dim, keepdims=keepdim)


def argmin(input, dim=None, keepdim: builtins.bool = False) -> Tensor:
    return F.argmin(input, axis=dim, keepdims=keepdim)


def topk(input, k: int, dim: int = -1, largest: builtins.bool = True, sorted: builtins.bool = True) -> ValuesIndices:
    """``torch.topk``: the ``(values, indices)`` of the ``k`` largest (``largest=False``:
    smallest) along ``dim``, in order."""
    values, indices = F.topk(input, k, axis=dim, descending=largest)
    return ValuesIndices(values, indices)


# -- no_grad -----------------------------------------------------------------------------------


class no_grad:
    """``with torch.no_grad():`` (or ``@torch.no_grad()``): the ops inside are taped by no
    GradManager nor ``grad``/``value_and_grad``, so no gradient flows through their results
    (they are constants to the backward pass), as PyTorch's. Recording into ``xla_trace``
    goes on as usual. A GradManager whose recording ended inside the block (``backward``) is
    not resumed."""

    def __enter__(self) -> no_grad:
        PAUSED_TAPES.append(list(TAPES))  # loss.backward() still finds their GradManager
        TAPES.clear()
        return self

    def __exit__(self, *exc) -> None:
        paused = PAUSED_TAPES.pop()
        TAPES[:0] = [t for t in paused if getattr(t, "owner", None) is None or t.owner.recording]

    def __call__(self, fn):
        @functools.wraps(fn)
        def without_gradients(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)

        return without_gradients
