"""Containers: ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``.

A plain Python list of modules registers nothing (its parameters are not in
``parameters()``, ``state_dict()`` or a compiled step's state); these containers register
their entries under ``"0"``, ``"1"``, ... (or their keys), as PyTorch's do, so
``state_dict()`` keys read ``"blocks.0.fc.weight"``.

>>> from hlotrace import nn
>>> class Net(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
...     def forward(self, x):
...         for block in self.blocks:
...             x = block(x)
...         return x
>>> list(Net().state_dict())
['blocks.0.weight', 'blocks.0.bias', 'blocks.1.weight', 'blocks.1.bias']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from hlotrace.errors import HlotraceError
from hlotrace.nn.module import _MODULE, _PARAM, Module
from hlotrace.tensor import Parameter, Tensor

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList"]


def _check_module(owner: str, key, value) -> Module:
    if not isinstance(value, Module):
        raise HlotraceError(f"{owner}: entry {key!r} is a {type(value).__name__}, not a Module")
    return value


def _as_parameter(owner: str, key, value) -> Parameter:
    """``value`` itself if a Parameter; a Tensor or array becomes a new Parameter (as PyTorch)."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value.numpy(), dtype=value.dtype)
    if isinstance(value, np.ndarray):
        return Parameter(value)
    raise HlotraceError(f"{owner}: entry {key!r} is a {type(value).__name__}, not a Parameter, Tensor or array")


def _check_key(owner: str, container: object, key) -> str:
    if not isinstance(key, str) or not key or "." in key:
        raise HlotraceError(f"{owner}: keys are non-empty strings without '.', got {key!r}")
    if hasattr(type(container), key) or key in ("_members", "_non_persistent", "training"):
        raise HlotraceError(f"{owner}: key {key!r} is the name of a {owner} attribute; choose another key")
    return key


class _Indexed(Module):
    """Entries of one kind registered as ``"0"``, ``"1"``, ... (ModuleList, ParameterList)."""

    _kind = _MODULE

    def _values(self) -> list:
        return [v for _, v in self._direct(self._kind)]

    def _convert(self, index, value):
        raise NotImplementedError

    def _set_all(self, values: list) -> None:
        """Re-register every entry so the names are again 0..n-1 in order."""
        for name in [n for n, k in self._member_table().items() if k == self._kind]:
            delattr(self, name)
        for i, value in enumerate(values):
            setattr(self, str(i), value)

    def _index(self, index: int, size: int) -> int:
        if not isinstance(index, int | np.integer) or isinstance(index, bool):
            raise TypeError(f"{type(self).__name__} indices are ints or slices, not {type(index).__name__}")
        if not -size <= index < size:
            raise IndexError(f"{type(self).__name__} index {index} is out of range for {size} entries")
        return int(index) % size

    def __len__(self) -> int:
        return len(self._values())

    def __iter__(self) -> Iterator:
        return iter(self._values())

    def __getitem__(self, index):
        values = self._values()
        if isinstance(index, slice):
            return type(self)(values[index])
        return values[self._index(index, len(values))]

    def __setitem__(self, index, value) -> None:
        values = self._values()
        i = self._index(index, len(values))
        setattr(self, str(i), self._convert(i, value))

    def __delitem__(self, index) -> None:
        values = self._values()
        if isinstance(index, slice):
            del values[index]
        else:
            del values[self._index(index, len(values))]
        self._set_all(values)

    def append(self, value):
        """Add ``value`` at the end; returns self."""
        n = len(self)
        setattr(self, str(n), self._convert(n, value))
        return self

    def extend(self, values: Iterable):
        """Append every entry of ``values``; returns self."""
        for value in values:
            self.append(value)
        return self

    def insert(self, index: int, value) -> None:
        """Insert ``value`` before position ``index`` (the entries after it are renamed)."""
        values = self._values()
        values.insert(index, self._convert(index, value))
        self._set_all(values)

    def __iadd__(self, values: Iterable):
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class ModuleList(_Indexed):
    """A list of sub-modules, registered as ``"0"``, ``"1"``, ... (PyTorch's ``nn.ModuleList``).

    Indexable (negative indices; a slice gives a new ModuleList of the same modules),
    iterable, ``len``, ``append``/``extend``/``insert``, ``del``, ``+=``. It has no ``forward``:
    the owning module decides how its entries are called.

    >>> blocks = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    >>> blocks.append(nn.Linear(2, 1))[-1].out_features
    1
    """

    _kind = _MODULE

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _convert(self, index, value):
        return _check_module("ModuleList", index, value)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it in the owning module's forward")


class ParameterList(_Indexed):
    """A list of Parameters, registered as ``"0"``, ``"1"``, ... (PyTorch's ``nn.ParameterList``).

    A Tensor or NumPy array given as an entry becomes a new Parameter holding its value.

    >>> ws = nn.ParameterList([np.zeros(3, np.float32), np.ones(2, np.float32)])
    >>> [name for name, _ in ws.named_parameters()]
    ['0', '1']
    """

    _kind = _PARAM

    def __init__(self, values: Iterable | None = None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _convert(self, index, value):
        return _as_parameter("ParameterList", index, value)


class _Keyed(Module):
    """Entries of one kind registered under string keys (ModuleDict, ParameterDict)."""

    _kind = _MODULE

    def _convert(self, key, value):
        raise NotImplementedError

    def _items(self) -> list[tuple[str, object]]:
        return list(self._direct(self._kind))

    def __getitem__(self, key: str):
        for name, value in self._items():
            if name == key:
                return value
        raise KeyError(key)

    def __setitem__(self, key: str, value) -> None:
        setattr(self, _check_key(type(self).__name__, self, key), self._convert(key, value))

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        delattr(self, key)

    def __contains__(self, key) -> bool:
        return any(name == key for name, _ in self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> list[str]:
        """The keys, in insertion order."""
        return [name for name, _ in self._items()]

    def values(self) -> list:
        """The entries, in insertion order."""
        return [value for _, value in self._items()]

    def items(self) -> list[tuple[str, object]]:
        """``(key, entry)`` pairs, in insertion order."""
        return self._items()

    def update(self, entries: Mapping | Iterable[tuple[str, object]]) -> None:
        """Add or replace entries from a mapping or from ``(key, entry)`` pairs."""
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        for key, value in pairs:
            self[key] = value

    def pop(self, key: str):
        """Remove the entry under ``key`` and return it."""
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        """Remove every entry."""
        for key in self.keys():
            del self[key]


class ModuleDict(_Keyed):
    """Sub-modules under string keys, in insertion order (PyTorch's ``nn.ModuleDict``).

    A key may not shadow an attribute of the container (``"train"``, ``"keys"``, ...).

    >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 4)})
    >>> list(heads.keys()), heads["cls"].out_features
    (['cls', 'box'], 3)
    """

    _kind = _MODULE

    def __init__(self, modules: Mapping | Iterable | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def _convert(self, key, value):
        return _check_module("ModuleDict", key, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): call its entries in the owning module's forward")


class ParameterDict(_Keyed):
    """Parameters under string keys, in insertion order (PyTorch's ``nn.ParameterDict``).

    >>> pd = nn.ParameterDict({"scale": np.ones(3, np.float32)})
    >>> pd["scale"].shape
    (3,)
    """

    _kind = _PARAM

    def __init__(self, values: Mapping | Iterable | None = None):
        super().__init__()
        if values is not None:
            self.update(values)

    def _convert(self, key, value):
        return _as_parameter("ParameterDict", key, value)
