"""The Tensor methods that are ops (``x.sum()``, ``x + y``, ``x @ w``, ``~mask``, ...): each
calls the function of :mod:`hlotrace.functional` of the same meaning, through
``hlotrace.namespace.F`` (Tensor sits below functional). :class:`hlotrace.tensor.Tensor`
inherits them."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import OpError
from hlotrace.namespace import F
from hlotrace.source import user_location


class TensorMethods:
    """Mixed into Tensor: no state of its own."""

    __slots__ = ()

    def astype(self, dtype) -> TensorMethods:
        return F.astype(self, dtype)

    def reshape(self, *shape) -> TensorMethods:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return F.reshape(self, shape)

    def transpose(self, *perm) -> TensorMethods:
        if len(perm) == 1 and isinstance(perm[0], tuple | list):
            perm = tuple(perm[0])
        return F.transpose(self, perm if perm else None)

    @property
    def T(self) -> TensorMethods:
        return F.transpose(self, None)

    def sum(self, axis=None, keepdims=False) -> TensorMethods:
        return F.sum(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False) -> TensorMethods:
        return F.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False) -> TensorMethods:
        return F.min(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False) -> TensorMethods:
        return F.mean(self, axis=axis, keepdims=keepdims)

    def broadcast_to(self, shape) -> TensorMethods:
        return F.broadcast_to(self, shape)

    def expand_dims(self, axis) -> TensorMethods:
        return F.expand_dims(self, axis)

    def squeeze(self, axis=None) -> TensorMethods:
        return F.squeeze(self, axis)

    # -- operators ----------------------------------------------------------------------
    def __add__(self, other):
        return F.add(self, other)

    def __radd__(self, other):
        return F.add(other, self)

    def __sub__(self, other):
        return F.subtract(self, other)

    def __rsub__(self, other):
        return F.subtract(other, self)

    def __mul__(self, other):
        return F.multiply(self, other)

    def __rmul__(self, other):
        return F.multiply(other, self)

    def __truediv__(self, other):
        return F.divide(self, other)

    def __rtruediv__(self, other):
        return F.divide(other, self)

    def __floordiv__(self, other):
        return F.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return F.floor_divide(other, self)

    def __mod__(self, other):
        return F.mod(self, other)

    def __rmod__(self, other):
        return F.mod(other, self)

    def __pow__(self, other):
        return F.power(self, other)

    def __rpow__(self, other):
        return F.power(other, self)

    def __matmul__(self, other):
        return F.matmul(self, other)

    def __rmatmul__(self, other):
        return F.matmul(other, self)

    def __neg__(self):
        return F.negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return F.abs(self)

    def __eq__(self, other):  # type: ignore[override]
        return F.equal(self, other)

    def __ne__(self, other):  # type: ignore[override]
        return F.not_equal(self, other)

    def __lt__(self, other):
        return F.less(self, other)

    def __le__(self, other):
        return F.less_equal(self, other)

    def __gt__(self, other):
        return F.greater(self, other)

    def __ge__(self, other):
        return F.greater_equal(self, other)

    def __and__(self, other):
        return F.logical_and(self, _require_bool(other, "&"))

    def __rand__(self, other):
        return F.logical_and(_require_bool(other, "&"), self)

    def __or__(self, other):
        return F.logical_or(self, _require_bool(other, "|"))

    def __ror__(self, other):
        return F.logical_or(_require_bool(other, "|"), self)

    def __invert__(self):
        _require_bool(self, "~")
        return F.logical_not(self)


def _require_bool(value, operator: str):
    dtype = value.dtype if isinstance(value, TensorMethods) else np.asarray(value).dtype
    if dtype != dt.bool_:
        loc = user_location(2)
        raise OpError(
            f"operator {operator} is defined on bool tensors only (got {dtype}); "
            f"compare first or use F.logical_*" + (f" (at {loc})" if loc else "")
        )
    return value
