"""Activation modules: ``GELU``, ``SiLU``, ``LeakyReLU``, ``ELU``, ``Softplus``,
``Sigmoid``, ``Tanh``, ``Softmax``, ``LogSoftmax``, ``Mish``, ``Hardswish`` (each calls the functional op of the same name; see
:mod:`hlotrace.ops.activation` for their exact semantics).

>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
"""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.nn.module import Module

__all__ = [
    "ELU",
    "GELU",
    "Hardswish",
    "LeakyReLU",
    "LogSoftmax",
    "Mish",
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
        hswish = getattr(F, "hswish", None)  # the registered op, where this build has it
        if hswish is not None:
            return hswish(x)
        return x * F.clip(x + 3.0, 0.0, 6.0) / 6.0
