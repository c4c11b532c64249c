"""In-place parameter initializers (PyTorch's ``torch.nn.init`` names and formulas).

Values are drawn from hlotrace's host generator (``hlotrace.random.host_generator()``),
which ``ht.random.seed(n)`` seeds together with the default random key, so one call
reproduces a model's initialization and its dropout masks (:func:`seed` here is the same
function, kept for older code). Values are computed in float64 and stored in the parameter's
own dtype, replacing its value in place (the Parameter object is kept, so optimizers holding
it see the new value).

>>> import hlotrace as ht
>>> from hlotrace.nn import init
>>> ht.random.seed(0)
>>> w = ht.Parameter(np.zeros((4, 3), np.float32))
>>> init.xavier_uniform_(w) is w
True
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace.errors import OpError
from hlotrace.random import host_generator as generator
from hlotrace.random import seed  # noqa: F401  (nn.init.seed: the same one seed)
from hlotrace.tensor import Tensor, tensor


def _fill(t: Tensor, values: np.ndarray) -> Tensor:
    if not isinstance(t, Tensor):
        raise OpError(f"nn.init: expected a Tensor or Parameter, got {type(t).__name__}")
    t._assign(tensor(np.asarray(values).reshape(t.shape), dtype=t.dtype))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill ``t`` with values drawn from U(a, b)."""
    return _fill(t, generator().uniform(a, b, size=t.shape))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``t`` with values drawn from N(mean, std²)."""
    return _fill(t, generator().normal(mean, std, size=t.shape))


def constant_(t: Tensor, value: float) -> Tensor:
    """Fill ``t`` with ``value``."""
    return _fill(t, np.full(t.shape, value))


def zeros_(t: Tensor) -> Tensor:
    """Fill ``t`` with zeros."""
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    """Fill ``t`` with ones."""
    return constant_(t, 1.0)


def calculate_fan_in_and_fan_out(t: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of shape (out, in, *receptive field), as PyTorch.

    >>> calculate_fan_in_and_fan_out(ht.tensor(np.zeros((8, 3))))
    (3, 8)
    """
    if len(t.shape) < 2:
        raise OpError(f"nn.init: fan in and fan out need a tensor of at least 2 dims, got shape {t.shape}")
    receptive = int(np.prod(t.shape[2:], dtype=np.int64)) if len(t.shape) > 2 else 1
    return t.shape[1] * receptive, t.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "sigmoid", "identity")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise OpError(f"nn.init: unsupported nonlinearity {nonlinearity!r}")


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-bound, bound) with bound = gain · sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).

    ``mode`` is ``"fan_in"`` (default) or ``"fan_out"``.
    """
    if mode not in ("fan_in", "fan_out"):
        raise OpError(f"nn.init.kaiming_uniform_: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(t, -bound, bound)


def kaiming_normal_(t: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """N(0, std²) with std = gain / sqrt(fan), gain = calculate_gain(nonlinearity, a) (He;
    torchvision's ResNets use ``mode="fan_out", nonlinearity="relu"``).

    ``mode`` is ``"fan_in"`` (default) or ``"fan_out"``.
    """
    if mode not in ("fan_in", "fan_out"):
        raise OpError(f"nn.init.kaiming_normal_: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    fan = fan_in if mode == "fan_in" else fan_out
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return normal_(t, 0.0, std)


def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std²) with std = gain · sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out)) if fan_in + fan_out else 0.0
    return normal_(t, 0.0, std)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """U(-bound, bound) with bound = gain · sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(t)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out)) if fan_in + fan_out else 0.0
    return uniform_(t, -bound, bound)
