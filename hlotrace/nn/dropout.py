"""Dropout.

>>> from hlotrace import nn
>>> drop = nn.Dropout(0.25)
>>> drop(ht.tensor(np.ones((2, 3), np.float32))).shape   # training: zeros or 1/0.75
(2, 3)
>>> drop.eval()(ht.tensor(np.ones(3, np.float32))).numpy()   # eval: the input itself
array([1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace.errors import argument_error
from hlotrace.nn.module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zero each element with probability ``p`` while ``training`` and scale the rest by
    ``1 / (1 - p)``; the identity in eval mode (PyTorch's ``nn.Dropout``).

    The mask comes from ``generator`` (default: ``hlotrace.random.default_generator``),
    whose key advances on every training call, compiled steps included (see
    :mod:`hlotrace.random`).
    """

    def __init__(self, p: float = 0.5, generator=None):
        super().__init__()
        if not dt.is_number(p) or not 0 <= dt.as_python_number(p) <= 1:  # ml_dtypes scalars too
            raise argument_error("nn.Dropout", "p", p, "a probability in [0, 1]")
        self.p = float(dt.as_python_number(p))
        self.generator = generator

    def forward(self, x):
        return F.dropout(x, self.p, training=self.training, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"
