"""Activation modules: ``GELU``, ``SiLU``, ``LeakyReLU``, ``ELU``, ``Softplus``,
``Sigmoid``, ``Tanh``, ``Softmax``, ``LogSoftmax``, ``Mish``, ``Hardswish``, ``Hardsigmoid``,
``ReLU6``, ``LogSigmoid`` and ``PReLU`` (a learnable slope per channel) (each calls the
functional op of the same name; see :mod:`hlotrace.ops.activation` for their exact
semantics).

>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
"""

from __future__ import annotations

import numpy as np

from hlotrace import functional as F
from hlotrace.errors import positive_int
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter

__all__ = [
    "ELU",
    "GELU",
    "Hardsigmoid",
    "Hardswish",
    "LeakyReLU",
    "LogSigmoid",
    "LogSoftmax",
    "Mish",
    "PReLU",
    "ReLU6",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Softplus",
    "Tanh",
]


class GELU(Module):
    """``x * Φ(x)``; ``approximate="tanh"`` for PyTorch's tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def forward(self, x):
        return F.silu(x)


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``x * negative_slope``."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x):
        return F.elu(x, alpha=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = float(beta)
        self.threshold = float(threshold)

    def forward(self, x):
        return F.softplus(x, beta=self.beta, threshold=self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, x):
        return F.tanh(x)


class Softmax(Module):
    """``softmax`` along ``dim`` (PyTorch's ``nn.Softmax``; give ``dim``: -1 by default here)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = int(dim)

    def forward(self, x):
        return F.softmax(x, axis=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """``log_softmax`` along ``dim`` (PyTorch's ``nn.LogSoftmax``)."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = int(dim)

    def forward(self, x):
        return F.log_softmax(x, axis=self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Mish(Module):
    """``x * tanh(softplus(x))``."""

    def forward(self, x):
        return F.mish(x)


class Hardswish(Module):
    """``x * relu6(x + 3) / 6`` (PyTorch's ``nn.Hardswish``, MegEngine's ``hswish``)."""

    def forward(self, x):
        return F.hswish(x)


class Hardsigmoid(Module):
    """``relu6(x + 3) / 6`` (PyTorch's ``nn.Hardsigmoid``, MegEngine's ``hsigmoid``)."""

    def forward(self, x):
        return F.hsigmoid(x)


class ReLU6(Module):
    """``min(max(x, 0), 6)``."""

    def forward(self, x):
        return F.relu6(x)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed without overflow."""

    def forward(self, x):
        return F.logsigmoid(x)


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x`` with a learnable ``weight`` of
    ``num_parameters`` slopes (1, or the channel count: x's dim 1), each ``init`` (PyTorch's
    0.25) at first.

    >>> from hlotrace import nn
    >>> act = nn.PReLU(num_parameters=8)    # one slope per channel of an (N, 8, H, W) input
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype="float32"):
        super().__init__()
        self.num_parameters = positive_int("nn.PReLU", "num_parameters", num_parameters)
        self.weight = Parameter(np.full((self.num_parameters,), init, dtype=np.dtype(dtype)))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
