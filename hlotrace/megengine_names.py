"""MegEngine's functional names where they differ from NumPy's: ``F.neg``, ``F.sub``,
``F.mul``, ``F.div``, ``F.pow``, ``F.floor_div``, and the ``F.loss`` / ``F.nn`` namespaces.

``F.loss`` holds MegEngine's loss signatures (``cross_entropy(pred, label, axis=1,
with_logits=True, label_smoothing=0.0, reduction="mean")``, ``binary_cross_entropy(pred,
label, with_logits=True)``, ``square_loss``, ``l1_loss``) beside PyTorch's loss functions;
``F.nn`` is every ``F`` function under MegEngine's ``functional.nn`` path.

>>> import hlotrace as ht, hlotrace.functional as F
>>> F.sub(ht.tensor([3.0]), 1.0).item(), F.loss.square_loss(ht.tensor([1.0]), ht.tensor([3.0])).item()
(2.0, 4.0)
"""

from __future__ import annotations

from types import SimpleNamespace

from hlotrace import losses
from hlotrace.ops.common import F

__all__ = ["div", "floor_div", "loss", "mul", "neg", "nn", "pow", "sub"]


def neg(x):
    """``-x`` (MegEngine's name for ``negative``)."""
    return F.negative(x)


def sub(x, y):
    """``x - y`` (MegEngine's name for ``subtract``)."""
    return F.subtract(x, y)


def mul(x, y):
    """``x * y`` (MegEngine's name for ``multiply``)."""
    return F.multiply(x, y)


def div(x, y):
    """True division ``x / y`` (MegEngine's name for ``divide``)."""
    return F.divide(x, y)


def pow(x, y):  # noqa: A001  (MegEngine's name)
    """``x ** y`` (MegEngine's name for ``power``)."""
    return F.power(x, y)


def floor_div(x, y):
    """``x // y`` (MegEngine's name for ``floor_divide``)."""
    return F.floor_divide(x, y)


def _megengine_cross_entropy(pred, label, axis=1, with_logits=True, label_smoothing=0.0, reduction="mean"):
    """MegEngine's ``F.loss.cross_entropy``: class axis 1 by default; ``with_logits=False``
    takes probabilities (their log is used)."""
    if with_logits:
        return F.cross_entropy(pred, label, axis=axis, reduction=reduction, label_smoothing=label_smoothing)
    log_probs = F.log(pred)
    if label_smoothing:
        return F.cross_entropy(log_probs, label, axis=axis, reduction=reduction, label_smoothing=label_smoothing)
    return losses.nll_loss(log_probs, label, reduction=reduction, axis=axis)


def _megengine_binary_cross_entropy(pred, label, with_logits=True, reduction="mean"):
    """MegEngine's ``F.loss.binary_cross_entropy``: logits by default (``with_logits=False``
    for probabilities)."""
    if with_logits:
        return losses.binary_cross_entropy_with_logits(pred, label, reduction=reduction)
    return losses.binary_cross_entropy(pred, label, reduction=reduction)


def _square_loss(pred, label, reduction="mean"):
    """MegEngine's ``square_loss``: the mean squared error."""
    return F.mse_loss(pred, label, reduction=reduction)


def _mse_loss(pred, label, reduction="mean"):
    """``F.mse_loss`` (PyTorch's name, in MegEngine's ``F.loss`` too)."""
    return F.mse_loss(pred, label, reduction=reduction)


loss = SimpleNamespace(
    cross_entropy=_megengine_cross_entropy,
    binary_cross_entropy=_megengine_binary_cross_entropy,
    square_loss=_square_loss,
    l1_loss=losses.l1_loss,
    mse_loss=_mse_loss,
    nll_loss=losses.nll_loss,
    smooth_l1_loss=losses.smooth_l1_loss,
    huber_loss=losses.huber_loss,
    kl_div=losses.kl_div,
    binary_cross_entropy_with_logits=losses.binary_cross_entropy_with_logits,
)


class _NNNamespace:
    """``F.nn.<name>`` is ``F.<name>`` (MegEngine's ``functional.nn`` path)."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return getattr(F, name)
        except AttributeError:
            raise AttributeError(f"hlotrace.functional.nn has no function {name!r}") from None

    def __dir__(self):
        return [n for n in dir(F) if not n.startswith("_")]

    def __repr__(self) -> str:
        return "<namespace hlotrace.functional.nn (every F function)>"


nn = _NNNamespace()
