"""PyTorch's spellings that hlotrace's Tensor methods and functional take besides their own:
``x.device`` values, ``dim=``/``keepdim=`` for ``axis=``/``keepdims=`` (one decorator), and
the ``(values, indices)`` pair ``x.max(dim=d)`` returns."""

from __future__ import annotations

import functools
from typing import NamedTuple

from hlotrace.namespace import F

# DLPack's device types (dlpack.h) by the names PyTorch gives them.
DLPACK_DEVICE_TYPES = {1: "cpu", 2: "cuda", 3: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", 13: "cuda"}
_DEVICE_TYPES = frozenset({"cpu", "cuda", "gpu", "rocm", "tpu", "mps", "xla", "meta"})


class Device(str):
    """``x.device``: ``"cpu:0"``, ``"cuda:0"``, ... with PyTorch's ``.type`` and ``.index``."""

    __slots__ = ()

    @property
    def type(self) -> str:
        return self.partition(":")[0]

    @property
    def index(self) -> int:
        return int(self.partition(":")[2] or 0)


def is_device(value) -> bool:
    """A device as ``Tensor.to`` takes one: a Device, ``"cuda"``/``"cpu:0"``, a ``torch.device``."""
    if isinstance(value, str):
        return value.partition(":")[0].lower() in _DEVICE_TYPES
    return type(value).__name__ == "device" and isinstance(getattr(value, "type", None), str)


class ValuesIndices(NamedTuple):
    """``x.max(dim=d)`` / ``x.min(dim=d)``: PyTorch's pair (``torch.return_types.max``)."""

    values: object
    indices: object


_TORCH_KEYWORDS = (("dim", "axis"), ("keepdim", "keepdims"))


def dim_alias(fn=None, *, indices: str | None = None):
    """Let ``fn(..., axis=, keepdims=)`` also take PyTorch's ``dim=`` and ``keepdim=`` (the one
    place that maps them; giving both spellings of one is a TypeError). ``indices``: the name
    of the ``F`` function (``"argmax"``) whose result joins the values when ``dim=`` is given,
    as PyTorch's ``x.max(dim=d)`` returns ``(values, indices)``."""
    if fn is None:
        return functools.partial(dim_alias, indices=indices)

    @functools.wraps(fn)
    def with_dim(*args, **kwargs):
        torch_call = "dim" in kwargs
        for torch_name, name in _TORCH_KEYWORDS:
            if torch_name in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}: give {name}= or {torch_name}= (PyTorch's name), not both")
                kwargs[name] = kwargs.pop(torch_name)
        values = fn(*args, **kwargs)
        if indices is None or not torch_call:
            return values
        keepdims = kwargs.get("keepdims", False)
        return ValuesIndices(values, getattr(F, indices)(args[0], axis=kwargs["axis"], keepdims=keepdims))

    return with_dim
