"""``torch.nn.BatchNorm1d`` / ``BatchNorm2d``: hlotrace's modules constructed with PyTorch's
``momentum`` (``running = (1 - momentum) * running + momentum * batch``, default 0.1), where
hlotrace's take MegEngine's (the weight of the old value, default 0.9).

A ported file's ``nn.BatchNorm2d(c, momentum=0.01)`` means 0.01 of each batch, as in PyTorch;
``momentum=None`` stays None: PyTorch's cumulative average over ``num_batches_tracked``. The
instances are hlotrace's modules (``isinstance(m, hlotrace.nn.BatchNorm2d)``; the same
state_dict, forward and compiled behaviour); their ``.momentum`` attribute, which the forward
reads, is hlotrace's ``1 - momentum``.

>>> from hlotrace.torch import nn
>>> nn.BatchNorm2d(3, momentum=0.01)
BatchNorm2d(3, eps=1e-05, momentum=0.01, affine=True, track_running_stats=True)
>>> round(nn.BatchNorm2d(3, momentum=0.01).momentum, 6)   # hlotrace's: the old value's weight
0.99
"""

from __future__ import annotations

from hlotrace import nn as _nn
from hlotrace.torch.nn.functional import hlotrace_momentum

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _TorchMomentum:
    """The constructor with PyTorch's momentum; the repr shows the value it was given."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        converted = hlotrace_momentum(f"nn.{type(self).__name__}", momentum)
        super().__init__(num_features, eps, converted, affine, track_running_stats)
        self._torch_momentum = None if momentum is None else float(momentum)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self._torch_momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_TorchMomentum, _nn.BatchNorm1d):
    """:class:`hlotrace.nn.BatchNorm1d` with PyTorch's ``momentum`` (default 0.1; None: the
    cumulative average)."""


class BatchNorm2d(_TorchMomentum, _nn.BatchNorm2d):
    """:class:`hlotrace.nn.BatchNorm2d` with PyTorch's ``momentum`` (default 0.1; None: the
    cumulative average).

    >>> nn.BatchNorm2d(16, momentum=None).momentum is None
    True
    """
