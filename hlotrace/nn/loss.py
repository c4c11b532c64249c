"""Loss modules (PyTorch's names, arguments and class dim 1): ``CrossEntropyLoss``,
``NLLLoss``, ``MSELoss``, ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``, ``BCELoss``,
``BCEWithLogitsLoss``, ``KLDivLoss``. Each calls the functional of the same meaning in
:mod:`hlotrace.losses` (a composite of registered ops). Class weights are registered as
buffers, so they are state of a compiled step (changing one never recompiles).

>>> from hlotrace import nn
>>> criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
>>> loss = criterion(logits, labels)      # logits (N, C) or (N, C, d1, ...), labels (N, d1, ...)
"""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.errors import argument_error
from hlotrace.losses import REDUCTIONS
from hlotrace.nn.module import Module
from hlotrace.tensor import Tensor, tensor

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
]


def _class_dim(x) -> int:
    """PyTorch's class dim: 1 for batched ``(N, C, ...)`` inputs, 0 for an unbatched ``(C,)``."""
    return 1 if x.ndim >= 2 else 0


class _Loss(Module):
    _reductions = REDUCTIONS

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        if not isinstance(reduction, str) or reduction not in self._reductions:
            wanted = " or ".join(map(repr, self._reductions))
            raise argument_error(f"nn.{type(self).__name__}", "reduction", reduction, wanted)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        if weight is not None and not isinstance(weight, Tensor):
            weight = tensor(weight, dtype="float32")
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy over the class dim 1 (PyTorch's ``nn.CrossEntropyLoss``):
    ``weight`` per class, ``ignore_index`` (-100) rows left out of the mean,
    ``label_smoothing``, integer labels or class probabilities of the input's shape."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = float(label_smoothing)

    def forward(self, input, target):  # noqa: A002  (PyTorch's argument names)
        return F.cross_entropy(
            input,
            target,
            axis=_class_dim(input),
            reduction=self.reduction,
            weight=self.weight,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
        )


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of integer labels under log-probabilities, class dim 1
    (PyTorch's ``nn.NLLLoss``)."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(
            input,
            target,
            weight=self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            axis=_class_dim(input),
        )


class MSELoss(_Loss):
    """Mean squared error (PyTorch's ``nn.MSELoss``)."""

    def forward(self, input, target):  # noqa: A002
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error (PyTorch's ``nn.L1Loss``)."""

    def forward(self, input, target):  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta``, linear above (PyTorch's ``nn.SmoothL1Loss``)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        self.beta = float(beta)

    def forward(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Quadratic up to ``delta``, then linear with slope ``delta`` (PyTorch's ``nn.HuberLoss``)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = float(delta)

    def forward(self, input, target):  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities (PyTorch's ``nn.BCELoss``; logs clamped at -100)."""

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross-entropy of ``sigmoid(input)``, computed stably (PyTorch's
    ``nn.BCEWithLogitsLoss``); ``pos_weight`` weights the positive term per class."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(weight, reduction)
        if pos_weight is not None and not isinstance(pos_weight, Tensor):
            pos_weight = tensor(pos_weight, dtype="float32")
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(
            input, target, weight=self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class KLDivLoss(_Loss):
    """Pointwise KL divergence; the input is log-probabilities (PyTorch's ``nn.KLDivLoss``;
    ``reduction="batchmean"`` for the divergence per example)."""

    _reductions = (*REDUCTIONS, "batchmean")

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__(reduction)
        self.log_target = bool(log_target)

    def forward(self, input, target):  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
