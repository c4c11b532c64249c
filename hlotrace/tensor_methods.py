"""The Tensor methods that are ops (``x.sum()``, ``x + y``, ``x @ w``, ``~mask``, ...): each
calls the function of :mod:`hlotrace.functional` of the same meaning, through
``hlotrace.namespace.F`` (Tensor sits below functional). :class:`hlotrace.tensor.Tensor`
inherits them.

Besides NumPy's spellings, the methods PyTorch model code calls, with PyTorch's meaning,
each composed of registered ops (nothing of their own to lower): ``view``, ``size``,
``split``, ``chunk``, ``permute``, ``contiguous``, ``masked_fill``, ``type_as``,
``expand``, ``unsqueeze``, ``flatten``, ``numel``, ``dim``, the casts ``float`` ``double``
``half`` ``int`` ``long`` ``bool``, ``clamp``, ``abs``, ``exp``, ``log``, ``sqrt``,
``pow``, ``argmax``, ``softmax`` and ``mT``; ``x.transpose(dim0, dim1)`` (two ints) swaps
two dims as PyTorch's does, any other argument list is NumPy's permutation. The reductions
(``sum``, ``mean``, ``prod``, ``max``, ``min``, ``argmax``, ``argmin``), ``softmax``,
``log_softmax`` and ``squeeze`` take PyTorch's ``dim=``/``keepdim=`` as aliases of
``axis=``/``keepdims=`` (:func:`hlotrace.torch_compat.dim_alias`, which ``F.softmax``, ``F.log_softmax`` and
``F.cat`` use too); ``x.max(dim=d)`` is PyTorch's ``(values, indices)`` named pair (unpack
it before returning it from a traced function), ``x.max(d)`` NumPy's values. ``x.device``
names where the value is held (``"cpu:0"``, ``"cuda:0"``), ``x.to(device)`` is ``x`` itself
(hlotrace places values) and ``x.to(dtype)`` a cast; ``requires_grad`` is PyTorch's flag,
recorded but not what decides gradients (``GradManager.attach`` does). ``x.size`` is NumPy's element count (an int) that can
also be called as PyTorch's ``x.size()`` (the shape) or ``x.size(dim)`` (one dim).

>>> import numpy as np, hlotrace as ht
>>> x = ht.tensor(np.zeros((2, 3, 4), np.float32))
>>> x.size, x.size(), x.size(-1), [c.shape for c in x.split(2, dim=2)]
(24, (2, 3, 4), 4, [(2, 3, 2), (2, 3, 2)])
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import OpError
from hlotrace.namespace import F
from hlotrace.source import user_location
from hlotrace.torch_compat import DLPACK_DEVICE_TYPES, Device, dim_alias, is_device
from hlotrace.torch_compat import backward as _backward

# Tensor.requires_grad where set (by id; the entry goes with the tensor).
_REQUIRES_GRAD: dict[int, bool] = {}


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
        """Two ints: PyTorch's ``x.transpose(dim0, dim1)``, those two dims swapped (negative
        dims count from the end). Otherwise NumPy's: a full permutation (``x.transpose(2, 0,
        1)`` or ``x.transpose((2, 0, 1))``), or no argument to reverse the dims. On a 2-d
        tensor ``x.transpose(0, 1)`` is therefore the swap (PyTorch), not NumPy's identity."""
        if len(perm) == 2 and all(_is_int(p) for p in perm):
            return F.swapaxes(self, _dim(perm[0], self.ndim, "transpose"), _dim(perm[1], self.ndim, "transpose"))
        if len(perm) == 1 and isinstance(perm[0], tuple | list):
            perm = tuple(perm[0])
        return F.transpose(self, perm if perm else None)

    @property
    def T(self) -> TensorMethods:
        """The dims reversed (NumPy's ``x.T``; PyTorch's on a 2-d tensor)."""
        return F.transpose(self, None)

    @property
    def mT(self) -> TensorMethods:
        """The last two dims swapped (a batch of matrices transposed); rank >= 2."""
        if self.ndim < 2:
            raise _method_error("mT", f"needs a tensor of rank >= 2, got shape {self.shape}")
        return F.swapaxes(self, -2, -1)

    @dim_alias
    def sum(self, axis=None, keepdims=False) -> TensorMethods:
        return F.sum(self, axis=axis, keepdims=keepdims)

    @dim_alias(indices="argmax")
    def max(self, axis=None, keepdims=False) -> TensorMethods:
        """NumPy's ``x.max(axis)`` (the values); with PyTorch's ``dim=`` keyword, PyTorch's
        ``(values, indices)`` pair."""
        return F.max(self, axis=axis, keepdims=keepdims)

    @dim_alias(indices="argmin")
    def min(self, axis=None, keepdims=False) -> TensorMethods:
        """NumPy's ``x.min(axis)`` (the values); with PyTorch's ``dim=`` keyword, PyTorch's
        ``(values, indices)`` pair."""
        return F.min(self, axis=axis, keepdims=keepdims)

    @dim_alias
    def mean(self, axis=None, keepdims=False) -> TensorMethods:
        return F.mean(self, axis=axis, keepdims=keepdims)

    @dim_alias
    def prod(self, axis=None, keepdims=False) -> TensorMethods:
        return F.prod(self, axis=axis, keepdims=keepdims)

    def broadcast_to(self, shape) -> TensorMethods:
        return F.broadcast_to(self, shape)

    def expand_dims(self, axis) -> TensorMethods:
        return F.expand_dims(self, axis)

    @dim_alias
    def squeeze(self, axis=None) -> TensorMethods:
        return F.squeeze(self, axis)

    # -- PyTorch's methods --------------------------------------------------------------
    @property
    def device(self) -> Device:
        """Where its value is held: ``"cpu:0"`` for a host value (and while recording), else
        its device buffer's (``"cuda:0"``), a str with PyTorch's ``.type`` and ``.index``."""
        kind, index = self.__dlpack_device__()
        return Device(f"{DLPACK_DEVICE_TYPES.get(int(kind), str(kind)).lower()}:{int(index)}")

    def to(self, *args, device=None, dtype=None, non_blocking=False, copy=False) -> TensorMethods:
        """PyTorch's ``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)``, ``x.to(other)``:
        a device changes nothing (``x`` itself: hlotrace moves a value to the device of the
        op or compiled step that uses it), a dtype casts (as ``astype``; ``x`` itself if it
        has that dtype already). ``non_blocking`` and ``copy`` are accepted and ignored."""
        for arg in args:
            if isinstance(arg, TensorMethods):
                dtype = arg.dtype
            elif is_device(arg):
                continue  # placement is hlotrace's
            elif dtype is None:
                dtype = arg
            else:
                raise TypeError(f"Tensor.to: unexpected argument {arg!r} (a device, a dtype or a tensor)")
        if device is not None and not is_device(device):
            raise TypeError(f"Tensor.to: device={device!r} is not a device (such as 'cpu' or 'cuda:0')")
        return self if dtype is None else _cast(self, dt.canonicalize(dtype))

    @property
    def requires_grad(self) -> bool:
        """PyTorch's flag, True for a Parameter and False for other tensors until set.

        hlotrace decides gradients by ``GradManager.attach`` (and optimizers update every
        parameter whose ``.grad`` is not None), not by this flag: it is recorded so that code
        reading it (``[p for p in net.parameters() if p.requires_grad]``) ports unchanged,
        but ``requires_grad = False`` alone freezes nothing -- leave the parameter out of
        ``gm.attach(...)`` and of the optimizer's parameters to freeze it. A value copy (a
        new Parameter) starts from the default again."""
        flag = _REQUIRES_GRAD.get(id(self))
        if flag is None:
            from hlotrace.tensor import Parameter  # cycle: hlotrace.tensor imports this module (Tensor inherits it)

            return isinstance(self, Parameter)
        return flag

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        key = id(self)
        if key not in _REQUIRES_GRAD:
            weakref.finalize(self, _REQUIRES_GRAD.pop, key, None)
        _REQUIRES_GRAD[key] = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> TensorMethods:
        """Set :attr:`requires_grad` (see there: it changes no gradient); returns ``self``."""
        self.requires_grad = requires_grad
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
        """PyTorch's ``loss.backward()``: ``gm.backward(loss)`` of the GradManager now recording
        (:func:`hlotrace.torch_compat.backward`; none recording is an error saying how)."""
        _backward(self, gradient, retain_graph, create_graph, inputs)

    @property
    def size(self) -> ElementCount:
        """The element count (NumPy's ``x.size``); called, PyTorch's ``x.size(dim=None)``."""
        return ElementCount(self.shape)

    def view(self, *shape) -> TensorMethods:
        """PyTorch's ``view``: a reshape (one dim may be -1); values are never shared."""
        return self.reshape(*shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def contiguous(self) -> TensorMethods:
        """Itself: hlotrace tensors have no strides."""
        return self

    def permute(self, *dims) -> TensorMethods:
        if len(dims) == 1 and isinstance(dims[0], tuple | list):
            dims = tuple(dims[0])
        return F.transpose(self, dims)

    def unsqueeze(self, dim) -> TensorMethods:
        return F.expand_dims(self, dim)

    def flatten(self, start_dim=0, end_dim=-1) -> TensorMethods:
        return F.flatten(self, start_dim, end_dim)

    def expand(self, *sizes) -> TensorMethods:
        """PyTorch's ``expand``: broadcast to ``sizes``, new dims in front; -1 keeps a dim."""
        if len(sizes) == 1 and isinstance(sizes[0], tuple | list):
            sizes = tuple(sizes[0])
        lead = len(sizes) - len(self.shape)
        if lead < 0 or any(s == -1 for s in sizes[: max(lead, 0)]):
            raise _method_error("expand", f"sizes {sizes} for a tensor of shape {self.shape}")
        shape = [self.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(sizes)]
        return F.broadcast_to(self, tuple(shape))

    def split(self, split_size_or_sections, dim=0) -> list:
        """PyTorch's ``split``: chunks of ``split_size`` along ``dim`` (the last one shorter),
        or a list of chunk sizes that add up to the dim (not NumPy's split points)."""
        length = self.shape[_dim(dim, self.ndim, "split")]
        if isinstance(split_size_or_sections, int | np.integer):
            step = int(split_size_or_sections)
            if step <= 0:
                raise _method_error("split", f"split_size must be positive, got {step}")
            points = list(range(step, length, step))
        else:
            sizes = [int(n) for n in split_size_or_sections]
            if sum(sizes) != length or any(n < 0 for n in sizes):
                raise _method_error("split", f"sizes {sizes} do not add up to dim {dim}'s {length}")
            points = list(np.cumsum(sizes[:-1]).tolist())
        return F.split(self, points, axis=dim)

    def chunk(self, chunks, dim=0) -> list:
        """PyTorch's ``chunk``: ``split`` into pieces of ``ceil(length / chunks)`` (so
        possibly fewer than ``chunks``)."""
        if int(chunks) <= 0:
            raise _method_error("chunk", f"chunks must be positive, got {chunks}")
        length = self.shape[_dim(dim, self.ndim, "chunk")]
        return self.split(max(-(-length // int(chunks)), 1), dim)

    def masked_fill(self, mask, value) -> TensorMethods:
        return F.masked_fill(self, mask, value)

    def type_as(self, other) -> TensorMethods:
        return self if self.dtype == other.dtype else F.astype(self, other.dtype)

    def clamp(self, min=None, max=None) -> TensorMethods:  # noqa: A002  (PyTorch's names)
        """Clip to [min, max]; scalar bounds go to ``F.clip``, tensor bounds to maximum/minimum."""
        if isinstance(min, TensorMethods) or isinstance(max, TensorMethods):
            out = self if min is None else F.maximum(self, min)
            return out if max is None else F.minimum(out, max)
        return F.clip(self, min, max)

    def abs(self) -> TensorMethods:
        return F.abs(self)

    def exp(self) -> TensorMethods:
        return F.exp(self)

    def log(self) -> TensorMethods:
        return F.log(self)

    def sqrt(self) -> TensorMethods:
        return F.sqrt(self)

    def pow(self, exponent) -> TensorMethods:
        return F.power(self, exponent)

    @dim_alias
    def argmax(self, axis=None, keepdims=False) -> TensorMethods:
        return F.argmax(self, axis=axis, keepdims=keepdims)

    @dim_alias
    def argmin(self, axis=None, keepdims=False) -> TensorMethods:
        return F.argmin(self, axis=axis, keepdims=keepdims)

    @dim_alias
    def softmax(self, axis) -> TensorMethods:
        return F.softmax(self, axis=axis)

    @dim_alias
    def log_softmax(self, axis) -> TensorMethods:
        return F.log_softmax(self, axis=axis)

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

    # -- PyTorch's dtype casts: last in the class body, whose later lines would otherwise see
    # these names instead of the builtins (the methods' own bodies see the builtins). -----
    def float(self) -> TensorMethods:
        """As float32 (``x.float()``; ``float(x)`` is still the Python number)."""
        return _cast(self, dt.float32)

    def double(self) -> TensorMethods:
        return _cast(self, dt.float64)

    def half(self) -> TensorMethods:
        return _cast(self, dt.float16)

    def int(self) -> TensorMethods:
        """As int32 (PyTorch's ``int``; ``int(x)`` is still the Python number)."""
        return _cast(self, dt.int32)

    def long(self) -> TensorMethods:
        return _cast(self, dt.int64)

    def bool(self) -> TensorMethods:
        """As bool (``x != 0``); ``bool(x)`` is still the truth of a one-element tensor."""
        return _cast(self, dt.bool_)


class ElementCount(int):
    """``x.size``: the element count, an int (NumPy's ``x.size``), that called is PyTorch's
    ``x.size()`` (the shape, a tuple) or ``x.size(dim)`` (that dim's length)."""

    def __new__(cls, shape):
        count = super().__new__(cls, math.prod(shape))
        count.shape = tuple(shape)
        return count

    def __call__(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_dim(dim, len(self.shape), "size")]


def _cast(x, dtype):
    return x if x.dtype == dtype else F.astype(x, dtype)


def _is_int(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _dim(dim, ndim: int, method: str) -> int:
    """``dim`` in [-ndim, ndim) as a non-negative index, else PyTorch's IndexError."""
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not -ndim <= dim < max(ndim, 1):
        loc = user_location(2)
        raise IndexError(
            f"Tensor.{method}: dim {dim!r} is out of range for a {ndim}-d tensor (expected an int in "
            f"[{-ndim}, {ndim - 1}])" + (f" (at {loc})" if loc else "")
        )
    return int(dim) % max(ndim, 1)


def _method_error(method: str, what: str) -> OpError:
    loc = user_location(2)
    return OpError(f"Tensor.{method}: {what}" + (f" (at {loc})" if loc else ""))


def _require_bool(value, operator: str):
    dtype = value.dtype if isinstance(value, TensorMethods) else np.asarray(value).dtype
    if dtype != dt.bool_:
        loc = user_location(2)
        raise OpError(
            f"operator {operator} is defined on bool tensors only (got {dtype}); "
            f"compare first or use F.logical_*" + (f" (at {loc})" if loc else "")
        )
    return value
