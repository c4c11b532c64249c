"""Layers: ``Linear``, ``ReLU``, ``Identity``, ``Flatten``, ``Unflatten`` and the ``Sequential`` container.

>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> net(ht.tensor(np.ones((3, 4), np.float32))).shape
(3, 2)
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

import hlotrace.nn.init as init
from hlotrace import functional as F
from hlotrace.errors import HlotraceError, argument_error, positive_int
from hlotrace.nn.module import _MODULE, Module
from hlotrace.tensor import Parameter


def _int(api: str, argument: str, value) -> int:
    """``value`` when it is an int (a dimension index may be negative), else the ArgumentError."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    raise argument_error(api, argument, value, "an int (a dimension index)")


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    Initialized as PyTorch's ``nn.Linear``: weight and bias from U(-k, k), k = 1/sqrt(in_features)
    (PyTorch writes the weight's as ``kaiming_uniform_(a=sqrt(5))``, the same bound), drawn from
    :mod:`hlotrace.nn.init`'s generator.

    >>> fc = nn.Linear(3, 5)
    >>> fc.weight.shape, fc.bias.shape
    ((5, 3), (5,))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype="float32"):
        super().__init__()
        self.in_features = positive_int("nn.Linear", "in_features", in_features)
        self.out_features = positive_int("nn.Linear", "out_features", out_features)
        self.weight = Parameter(np.zeros((self.out_features, self.in_features), np.float32), dtype=dtype)
        if bias:
            self.bias = Parameter(np.zeros((self.out_features,), np.float32), dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw fresh initial values (in place)."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        y = F.matmul(x, self.weight, transpose_b=True)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    """``max(x, 0)`` (``F.relu`` when the functional op exists).

    ``inplace`` is accepted for PyTorch code (``nn.ReLU(inplace=True)``) and changes nothing:
    the result is a new tensor either way, which is what the caller uses (``out = relu(out)``).
    """

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, x):
        relu = getattr(F, "relu", None)
        return relu(x) if relu is not None else F.maximum(x, 0.0)


class Identity(Module):
    """Returns its input unchanged."""

    def forward(self, x):
        return x


class Flatten(Module):
    """Flattens dims ``start_dim..end_dim`` into one (PyTorch's ``nn.Flatten``: from dim 1,
    keeping the batch dim, by default).

    >>> nn.Flatten()(ht.tensor(np.zeros((2, 3, 4), np.float32))).shape
    (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = _int("nn.Flatten", "start_dim", start_dim)
        self.end_dim = _int("nn.Flatten", "end_dim", end_dim)

    def forward(self, x):
        return F.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size`` (PyTorch's ``nn.Unflatten``; one entry
    may be -1).

    >>> nn.Unflatten(1, (3, 4))(ht.tensor(np.zeros((2, 12), np.float32))).shape
    (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = _int("nn.Unflatten", "dim", dim)
        sizes = list(unflattened_size) if isinstance(unflattened_size, tuple | list) else None
        if (
            not sizes
            or not all(
                isinstance(d, int | np.integer) and not isinstance(d, bool) and (d >= 1 or d == -1) for d in sizes
            )
            or sizes.count(-1) > 1
        ):
            raise argument_error(
                "nn.Unflatten", "unflattened_size", unflattened_size, "a tuple of positive ints (one may be -1)"
            )
        self.unflattened_size = tuple(int(d) for d in sizes)

    def forward(self, x):
        if not -x.ndim <= self.dim < x.ndim:
            raise HlotraceError(f"Unflatten: dim {self.dim} is out of range for an input of shape {x.shape}")
        dim = self.dim % x.ndim
        return F.reshape(x, (*x.shape[:dim], *self.unflattened_size, *x.shape[dim + 1 :]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Sequential(Module):
    """Calls its sub-modules in order; they are registered as ``"0"``, ``"1"``, ...

    ``Sequential(OrderedDict(name=module, ...))`` names them instead. Indexable (negative
    indices; a slice gives a new Sequential sharing the same modules), iterable, ``len``.

    >>> seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    >>> len(seq), type(seq[-1]).__name__, len(seq[:1])
    (2, 'ReLU', 1)
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict | dict):
            items = list(modules[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for name, m in items:
            if not isinstance(m, Module):
                raise HlotraceError(f"Sequential: entry {name!r} is a {type(m).__name__}, not a Module")
            self.add_module(name, m)

    def _entries(self) -> list[tuple[str, Module]]:
        return list(self._direct(_MODULE))

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self):
        return iter([m for _, m in self._entries()])

    def __getitem__(self, index):
        entries = self._entries()
        if isinstance(index, slice):
            return Sequential(OrderedDict(entries[index]))
        try:
            return entries[index][1]
        except IndexError:
            raise IndexError(f"Sequential index {index} is out of range for {len(entries)} modules") from None
        except TypeError:
            raise TypeError(f"Sequential indices are ints or slices, not {type(index).__name__}") from None

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end (named by its position); returns self."""
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x):
        for m in self:
            x = m(x)
        return x
