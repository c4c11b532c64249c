"""Activation modules: ``GELU``, ``SiLU``, ``LeakyReLU``, ``ELU``, ``Softplus``,
``Sigmoid``, ``Tanh`` (each calls the functional op of the same name; see
:mod:`hlotrace.ops.activation` for their exact semantics).

>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
"""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.nn.module import Module

__all__ = ["ELU", "GELU", "LeakyReLU", "SiLU", "Sigmoid", "Softplus", "Tanh"]


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
