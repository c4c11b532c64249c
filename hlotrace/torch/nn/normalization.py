"""``torch.nn.BatchNorm1d`` / ``BatchNorm2d``: hlotrace's modules with PyTorch's ``momentum``
(``running = (1 - momentum) * running + momentum * batch``, default 0.1), where hlotrace's
take MegEngine's (the weight of the old value, default 0.9).

A ported file's ``nn.BatchNorm2d(c, momentum=0.01)`` means 0.01 of each batch, as in PyTorch,
and so does ``bn.momentum = 0.01`` after construction: ``.momentum`` holds PyTorch's value,
and the forward converts it when it runs (``_megengine_momentum``, the one place the base
module's forward reads the update from). ``momentum=None`` (at construction or assigned) is
PyTorch's cumulative average over ``num_batches_tracked``. The instances are hlotrace's modules
(``isinstance(m, hlotrace.nn.BatchNorm2d)``; the same state_dict, forward and compiled
behaviour).

>>> from hlotrace.torch import nn
>>> bn = nn.BatchNorm2d(3, momentum=0.01)
>>> bn
BatchNorm2d(3, eps=1e-05, momentum=0.01, affine=True, track_running_stats=True)
>>> bn.momentum   # PyTorch's: the batch's weight
0.01
>>> bn.momentum = 0.2
>>> round(bn._megengine_momentum(), 6)   # what the update uses: the old value's weight
0.8
"""

from __future__ import annotations

from hlotrace import nn as _nn
from hlotrace.torch.nn.functional import hlotrace_momentum

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _TorchMomentum:
    """PyTorch's momentum in ``.momentum``, at construction and after assignment."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        hlotrace_momentum(f"nn.{type(self).__name__}", momentum)  # the ArgumentError unless None or in [0, 1]
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _megengine_momentum(self) -> float | None:
        """``1 - self.momentum`` (None stays None), checked when the forward runs: an assigned
        value outside [0, 1] is the ArgumentError naming it."""
        return hlotrace_momentum(f"nn.{type(self).__name__}.momentum", self.momentum)


class BatchNorm1d(_TorchMomentum, _nn.BatchNorm1d):
    """:class:`hlotrace.nn.BatchNorm1d` with PyTorch's ``momentum`` (default 0.1; None: the
    cumulative average)."""


class BatchNorm2d(_TorchMomentum, _nn.BatchNorm2d):
    """:class:`hlotrace.nn.BatchNorm2d` with PyTorch's ``momentum`` (default 0.1; None: the
    cumulative average).

    >>> nn.BatchNorm2d(16, momentum=None).momentum is None
    True
    """
