# ruff: noqa: A002  (PyTorch's argument names: input, type, ...)
"""``torch.*`` creation functions, dtypes, devices and random draws, mapped onto hlotrace's
registered ops (``zeros``, ``ones``, ``full``, ``arange``, ``linspace``, ``eye``) and
:mod:`hlotrace.random`.

Sizes are given as PyTorch's (``torch.ones(2, 3)``, ``torch.ones((2, 3))``); ``device=`` is
checked as ``Tensor.to`` checks it and changes nothing (hlotrace places values itself);
``dtype=`` takes ``torch.float32``-style names (NumPy dtypes), strings or None. Python data
without ``dtype=`` is 32-bit, hlotrace's default (PyTorch: ``int64`` for integers; write
``dtype=torch.long`` for 64-bit integers).

>>> import hlotrace.torch as torch
>>> torch.arange(0, 4, dtype=torch.long, device="cpu").dtype
dtype('int64')
"""

from __future__ import annotations

import builtins

import numpy as np

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace import random as _random
from hlotrace.errors import argument_error
from hlotrace.tensor import Tensor
from hlotrace.tensor import tensor as _tensor
from hlotrace.torch_compat import Device, is_device

__all__ = [
    "arange",
    "as_tensor",
    "device",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "is_tensor",
    "linspace",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "tensor",
    "zeros",
    "zeros_like",
]

DEFAULT_FLOAT = dt.float32  # torch.get_default_dtype()


def device(type: str, index: int | None = None) -> Device:
    """``torch.device("cuda")``, ``torch.device("cuda", 0)``, ``torch.device("cpu:0")``: a
    :class:`~hlotrace.torch_compat.Device` (a str with ``.type`` and ``.index``) that
    ``Tensor.to`` and the ``device=`` arguments accept (and that changes no placement)."""
    name = type if index is None else f"{type}:{int(index)}"
    if not is_device(name):
        raise argument_error("torch.device", "type", type, "a device type such as 'cpu' or 'cuda'")
    return Device(name if ":" in name else f"{name}:0")


def _check_device(function: str, value) -> None:
    if value is not None and not is_device(value):
        raise TypeError(f"torch.{function}: device={value!r} is not a device (such as 'cpu' or 'cuda:0')")


def _size(function: str, size: tuple) -> tuple[int, ...]:
    """PyTorch's ``*size``: ints, or one tuple/list of them."""
    if len(size) == 1 and isinstance(size[0], tuple | list):
        size = tuple(size[0])
    if not builtins.all(isinstance(s, int | np.integer) and not isinstance(s, builtins.bool) and s >= 0 for s in size):
        raise argument_error(f"torch.{function}", "size", size, "non-negative ints (or one tuple of them)")
    return tuple(int(s) for s in size)


def _dtype(dtype, default=DEFAULT_FLOAT):
    return default if dtype is None else dt.canonicalize(dtype)


def tensor(data, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.tensor(data, dtype=None, device=None, requires_grad=False)``: a new tensor (a
    copy) of ``data``; ``requires_grad`` is recorded as ``Tensor.requires_grad`` (a
    GradManager decides gradients)."""
    _check_device("tensor", device)
    result = _tensor(data, dtype=dtype)
    if requires_grad:
        result.requires_grad = True
    return result


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """``torch.as_tensor``: ``data`` itself when it is a tensor of that dtype, else a tensor."""
    _check_device("as_tensor", device)
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return _tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """``torch.from_numpy``: a tensor of ``array``'s dtype and value. A copy: hlotrace tensors
    never share memory with a NumPy array, so writing to ``array`` later changes nothing."""
    if not isinstance(array, np.ndarray):
        raise argument_error("torch.from_numpy", "array", array, "a NumPy array")
    return _tensor(array)


def is_tensor(value) -> builtins.bool:
    return isinstance(value, Tensor)


def zeros(*size, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.zeros(2, 3)`` or ``torch.zeros((2, 3))``: float32 unless ``dtype``."""
    _check_device("zeros", device)
    return F.zeros(_size("zeros", size), _dtype(dtype))


def ones(*size, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.ones(2, 3)`` or ``torch.ones((2, 3))``: float32 unless ``dtype``."""
    _check_device("ones", device)
    return F.ones(_size("ones", size), _dtype(dtype))


def empty(*size, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.empty``: zeros (hlotrace has no uninitialized tensors)."""
    _check_device("empty", device)
    return F.zeros(_size("empty", size), _dtype(dtype))


def full(size, fill_value, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.full(size, fill_value)``: the dtype is ``fill_value``'s (bool, int32, float32)
    unless ``dtype``."""
    _check_device("full", device)
    size = (size,) if isinstance(size, int | np.integer) else tuple(size)
    return F.full(_size("full", size), fill_value, None if dtype is None else dt.canonicalize(dtype))


def zeros_like(input, dtype=None, device=None) -> Tensor:
    _check_device("zeros_like", device)
    return F.zeros_like(input, dtype)


def ones_like(input, dtype=None, device=None) -> Tensor:
    _check_device("ones_like", device)
    return F.ones_like(input, dtype)


def full_like(input, fill_value, dtype=None, device=None) -> Tensor:
    _check_device("full_like", device)
    return F.full_like(input, fill_value, dtype)


def empty_like(input, dtype=None, device=None) -> Tensor:
    """``torch.empty_like``: zeros (hlotrace has no uninitialized tensors)."""
    _check_device("empty_like", device)
    return F.zeros_like(input, dtype)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.arange(end)``, ``torch.arange(start, end, step)``: int32 when every argument is
    an int (PyTorch: int64; ``dtype=torch.long`` gives it), else float32."""
    _check_device("arange", device)
    return F.arange(start, end, step, dtype=None if dtype is None else dt.canonicalize(dtype))


def linspace(start, end, steps: int, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.linspace(start, end, steps)``: ``steps`` evenly spaced values, both ends
    included, float32 unless ``dtype``."""
    _check_device("linspace", device)
    return F.linspace(start, end, num=int(steps), dtype=_dtype(dtype))


def eye(n: int, m: int | None = None, dtype=None, device=None, requires_grad: builtins.bool = False) -> Tensor:
    _check_device("eye", device)
    return F.eye(n, m, dtype=_dtype(dtype))


# -- random: hlotrace.random's default generator (Threefry keys; eager and compiled alike) ---


def manual_seed(seed: int):
    """``torch.manual_seed``: :func:`hlotrace.random.seed` (the default generator's key and
    the host generator parameter initialization draws from); returns the default generator."""
    _random.seed(seed)
    return _random.default_generator


def seed() -> int:
    """``torch.seed``: seed from the OS's entropy; returns the seed."""
    value = int(np.random.SeedSequence().entropy % 2**63)
    _random.seed(value)
    return value


def randn(*size, dtype=None, device=None, generator=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.randn``: standard normal draws (:func:`hlotrace.random.normal`)."""
    _check_device("randn", device)
    return _random.normal(_size("randn", size), dtype=_dtype(dtype), generator=generator)


def rand(*size, dtype=None, device=None, generator=None, requires_grad: builtins.bool = False) -> Tensor:
    """``torch.rand``: uniform draws in [0, 1) (:func:`hlotrace.random.uniform`)."""
    _check_device("rand", device)
    return _random.uniform(_size("rand", size), dtype=_dtype(dtype), generator=generator)


def randn_like(input, dtype=None, device=None) -> Tensor:
    _check_device("randn_like", device)
    return _random.normal(input.shape, dtype=input.dtype if dtype is None else dt.canonicalize(dtype))


def rand_like(input, dtype=None, device=None) -> Tensor:
    _check_device("rand_like", device)
    return _random.uniform(input.shape, dtype=input.dtype if dtype is None else dt.canonicalize(dtype))


def randint(*args, size=None, dtype=None, device=None, generator=None) -> Tensor:
    """``torch.randint(high, size)`` or ``torch.randint(low, high, size)``: integers in
    ``[low, high)``, int32 unless ``dtype`` (PyTorch: int64)."""
    _check_device("randint", device)
    if size is None and args and isinstance(args[-1], tuple | list):
        *args, size = args
    if size is None or len(args) not in (1, 2):
        raise TypeError("torch.randint: call randint(high, size) or randint(low, high, size)")
    low, high = (0, args[0]) if len(args) == 1 else args
    return _random.randint(low, high, tuple(size), dtype=_dtype(dtype, dt.int32), generator=generator)


def randperm(n: int, dtype=None, device=None, generator=None) -> Tensor:
    """``torch.randperm(n)``: a random permutation of ``0..n-1``, int32 unless ``dtype``."""
    _check_device("randperm", device)
    return _random.permutation(n, generator=generator, dtype=_dtype(dtype, dt.int32))
