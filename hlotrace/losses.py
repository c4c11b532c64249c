"""Loss functions (PyTorch's names and semantics), composites of registered ops.

Each is recorded as the ops it is made of, so it lowers, differentiates and fuzzes with
them; none has a rule of its own. ``reduction`` is "mean", "sum" or "none" everywhere
(``kl_div`` also takes "batchmean"). Class-index losses take the class axis as ``axis``
(-1 by default, as :func:`hlotrace.functional.cross_entropy`; the loss *modules* in
:mod:`hlotrace.nn.loss` use PyTorch's class dim 1).

>>> import hlotrace as ht, hlotrace.functional as F
>>> F.smooth_l1_loss(ht.tensor([0.0, 3.0]), ht.tensor([0.5, 0.0])).item()
1.3125
"""

from __future__ import annotations

from hlotrace import dtypes as dt
from hlotrace.ops.common import F
from hlotrace.ops.common import as_tensor as _as_tensor
from hlotrace.ops.common import composite_error as _composite_error

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "nll_loss",
    "smooth_l1_loss",
]

REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name, reduction, *tensors, allowed=REDUCTIONS):
    if reduction not in allowed:
        raise _composite_error(name, f"unknown reduction {reduction!r} (expected one of {allowed})", *tensors)


def _reduce(loss, reduction):
    if reduction == "mean":
        return F.mean(loss)
    if reduction == "sum":
        return F.sum(loss)
    return loss


def _same_shape(name, pred, target):
    if pred.shape != target.shape:
        raise _composite_error(name, f"input shape {pred.shape} and target shape {target.shape} differ", pred, target)


def _float(name, *tensors):
    for t in tensors:
        if t is not None and not dt.is_floating(t.dtype):
            raise _composite_error(name, f"needs float tensors, got {t.dtype}", *[t for t in tensors if t is not None])


def _class_axis(name, scores, axis, *others):
    if scores.ndim == 0:
        raise _composite_error(name, "the input needs a class axis (rank >= 1)", scores, *others)
    if not isinstance(axis, int) or not -scores.ndim <= axis < scores.ndim:
        raise _composite_error(name, f"axis {axis} is out of bounds for rank {scores.ndim}", scores, *others)
    return axis % scores.ndim


def _class_weight(name, weight, scores, axis):
    """``weight`` (shape ``(C,)``) reshaped to broadcast against ``scores`` along ``axis``."""
    weight = _as_tensor(weight)
    classes = scores.shape[axis]
    if weight.shape != (classes,):
        raise _composite_error(name, f"weight must have shape ({classes},) (one per class)", scores, weight)
    return F.reshape(weight, tuple(classes if d == axis else 1 for d in range(scores.ndim)))


def _class_losses(name, log_probs, labels, axis, weight, ignore_index, label_smoothing, reduction):
    """Negative log-likelihood of integer ``labels`` under ``log_probs`` (class axis ``axis``),
    optionally weighted per class, label-smoothed, with ``ignore_index`` rows left out.

    Per example i with label y, class weights w (1 without ``weight``), C classes and
    smoothing ε: ``loss_i = (1 - ε)·(−w_y·logp_y) + ε/C·Σ_c(−w_c·logp_c)``, 0 when
    ``y == ignore_index``. "mean" divides the sum by ``Σ_i w_{y_i}`` over the rows not
    ignored (PyTorch's weighted mean: NaN when every row is ignored).
    """
    _check_reduction(name, reduction, log_probs, labels)
    if labels.dtype.kind != "i":
        raise _composite_error(
            name,
            f"labels must be integer class indices (or class probabilities of the input's shape), got {labels.dtype}",
            log_probs,
            labels,
        )
    axis = _class_axis(name, log_probs, axis, labels)
    expected = log_probs.shape[:axis] + log_probs.shape[axis + 1 :]
    if labels.shape != expected:
        raise _composite_error(
            name,
            f"labels of shape {labels.shape} do not match the input without axis {axis}: {expected}",
            log_probs,
            labels,
        )
    smoothing = float(label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise _composite_error(name, f"label_smoothing must be in [0, 1], got {label_smoothing}", log_probs, labels)
    classes = log_probs.shape[axis]
    hot = F.one_hot(labels, classes, dtype="bool")
    if axis != log_probs.ndim - 1:
        hot = F.moveaxis_last_to(hot, axis)
    negated = F.negative(log_probs)
    class_weight = None if weight is None else _class_weight(name, weight, log_probs, axis)
    if class_weight is not None:
        negated = negated * class_weight
    # A where, not a product with one_hot: a -inf log-probability of another class stays out.
    per_example = F.sum(F.where(hot, negated, 0.0), axis=axis)
    if smoothing:
        per_example = (1.0 - smoothing) * per_example + (smoothing / classes) * F.sum(negated, axis=axis)
    valid = None
    if ignore_index is not None:
        valid = F.not_equal(labels, int(ignore_index))
        per_example = F.where(valid, per_example, 0.0)
    if reduction != "mean":
        return _reduce(per_example, reduction)
    if class_weight is not None:
        counted = F.sum(F.where(hot, F.broadcast_to(class_weight, hot.shape), 0.0), axis=axis)
        if valid is not None:
            counted = F.where(valid, counted, 0.0)
    elif valid is None:
        return F.mean(per_example)
    else:
        counted = F.astype(valid, per_example.dtype)
    # The loss and its divisor summed in one reduction of (loss, count) pairs: over a batch split
    # on a data-parallel mesh that is one all-reduce, where two sums were two.
    totals = F.sum(F.stack([per_example, counted], axis=-1), axis=tuple(range(per_example.ndim)))
    return totals[0] / totals[1]


def _soft_target_losses(name, log_probs, targets, axis, weight, label_smoothing, reduction):
    """Cross-entropy against class probabilities ``targets`` (the input's shape)."""
    _check_reduction(name, reduction, log_probs, targets)
    axis = _class_axis(name, log_probs, axis, targets)
    smoothing = float(label_smoothing)
    if not 0.0 <= smoothing <= 1.0:
        raise _composite_error(name, f"label_smoothing must be in [0, 1], got {label_smoothing}", log_probs, targets)
    classes = log_probs.shape[axis]
    if smoothing:
        targets = targets * (1.0 - smoothing) + smoothing / classes
    negated = F.negative(log_probs)
    if weight is not None:
        negated = negated * _class_weight(name, weight, log_probs, axis)
    return _reduce(F.sum(negated * targets, axis=axis), reduction)


def _cross_entropy(logits, labels, axis, reduction, weight, ignore_index, label_smoothing):
    """The body of :func:`hlotrace.functional.cross_entropy` (see its docstring)."""
    logits, labels = _as_tensor(logits), _as_tensor(labels)
    _float("cross_entropy", logits)
    if dt.is_floating(labels.dtype) and labels.shape == logits.shape:
        log_probs = F.log_softmax(logits, axis=_class_axis("cross_entropy", logits, axis, labels))
        return _soft_target_losses("cross_entropy", log_probs, labels, axis, weight, label_smoothing, reduction)
    if logits.ndim == 0:
        raise _composite_error("cross_entropy", "logits need a class axis (rank >= 1)", logits, labels)
    _check_reduction("cross_entropy", reduction, logits, labels)
    log_probs = F.log_softmax(logits, axis=_class_axis("cross_entropy", logits, axis, labels))
    return _class_losses("cross_entropy", log_probs, labels, axis, weight, ignore_index, label_smoothing, reduction)


def nll_loss(log_probs, labels, weight=None, ignore_index=-100, reduction="mean", axis=-1):
    """Negative log-likelihood of integer ``labels`` under ``log_probs`` (PyTorch's ``nll_loss``).

    ``loss_i = −weight[y_i]·log_probs[i, y_i]``; rows whose label is ``ignore_index`` give 0
    and are left out of the mean, which is weighted: ``Σ loss_i / Σ weight[y_i]``. A label
    outside ``[0, C)`` (other than ``ignore_index``) selects nothing: loss 0, counted.

    >>> F.nll_loss(F.log_softmax(logits), labels)  # == F.cross_entropy(logits, labels)
    """
    log_probs, labels = _as_tensor(log_probs), _as_tensor(labels)
    _float("nll_loss", log_probs)
    return _class_losses("nll_loss", log_probs, labels, axis, weight, ignore_index, 0.0, reduction)


def binary_cross_entropy(probs, target, weight=None, reduction="mean"):
    """``−(t·log p + (1 − t)·log(1 − p))`` for probabilities ``probs`` (PyTorch's
    ``binary_cross_entropy``): each log is clamped at −100 so that p = 0 or 1 gives a finite
    loss, as PyTorch does. ``weight`` (broadcast to the input) scales each element."""
    probs, target = _as_tensor(probs), _as_tensor(target)
    _check_reduction("binary_cross_entropy", reduction, probs, target)
    _float("binary_cross_entropy", probs, target)
    _same_shape("binary_cross_entropy", probs, target)
    log_p = F.maximum(F.log(probs), -100.0)
    log_not_p = F.maximum(F.log(1.0 - probs), -100.0)
    loss = F.negative(target * log_p + (1.0 - target) * log_not_p)
    if weight is not None:
        loss = loss * _as_tensor(weight)
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(logits, target, weight=None, reduction="mean", pos_weight=None):
    """Binary cross-entropy of ``sigmoid(logits)``, computed stably (PyTorch's
    ``binary_cross_entropy_with_logits``): ``(1 − t)·x + (1 + (pw − 1)·t)·softplus(−x)``,
    which is ``−(pw·t·log σ(x) + (1 − t)·log(1 − σ(x)))``. ``pos_weight`` (broadcast along
    the last axis, one per class) weights the positive term; ``weight`` each element."""
    logits, target = _as_tensor(logits), _as_tensor(target)
    _check_reduction("binary_cross_entropy_with_logits", reduction, logits, target)
    _float("binary_cross_entropy_with_logits", logits, target)
    _same_shape("binary_cross_entropy_with_logits", logits, target)
    log_one_plus = F.softplus(F.negative(logits))  # −log σ(x), linear for large −x
    if pos_weight is None:
        loss = (1.0 - target) * logits + log_one_plus
    else:
        loss = (1.0 - target) * logits + (1.0 + (_as_tensor(pos_weight) - 1.0) * target) * log_one_plus
    if weight is not None:
        loss = loss * _as_tensor(weight)
    return _reduce(loss, reduction)


def l1_loss(pred, target, reduction="mean"):
    """``|pred − target|`` (shapes must match)."""
    pred, target = _as_tensor(pred), _as_tensor(target)
    _check_reduction("l1_loss", reduction, pred, target)
    _same_shape("l1_loss", pred, target)
    return _reduce(F.abs(pred - target), reduction)


def smooth_l1_loss(pred, target, reduction="mean", beta=1.0):
    """``0.5·d²/β`` where ``|d| < β``, else ``|d| − 0.5·β`` (d = pred − target; PyTorch's
    ``smooth_l1_loss``; ``beta=0`` is the L1 loss)."""
    pred, target = _as_tensor(pred), _as_tensor(target)
    _check_reduction("smooth_l1_loss", reduction, pred, target)
    _same_shape("smooth_l1_loss", pred, target)
    beta = float(beta)
    if beta < 0:
        raise _composite_error("smooth_l1_loss", f"beta must be >= 0, got {beta}", pred, target)
    size = F.abs(pred - target)
    if beta == 0.0:
        return _reduce(size, reduction)
    loss = F.where(F.less(size, beta), (0.5 / beta) * size * size, size - 0.5 * beta)
    return _reduce(loss, reduction)


def huber_loss(pred, target, reduction="mean", delta=1.0):
    """``0.5·d²`` where ``|d| <= δ``, else ``δ·(|d| − 0.5·δ)`` (PyTorch's ``huber_loss``;
    ``smooth_l1_loss`` with ``beta=δ`` times δ)."""
    pred, target = _as_tensor(pred), _as_tensor(target)
    _check_reduction("huber_loss", reduction, pred, target)
    _same_shape("huber_loss", pred, target)
    delta = float(delta)
    if delta <= 0:
        raise _composite_error("huber_loss", f"delta must be > 0, got {delta}", pred, target)
    size = F.abs(pred - target)
    loss = F.where(F.less_equal(size, delta), 0.5 * size * size, delta * (size - 0.5 * delta))
    return _reduce(loss, reduction)


def kl_div(log_probs, target, reduction="mean", log_target=False):
    """Pointwise KL divergence ``target·(log target − log_probs)`` (PyTorch's ``kl_div``:
    the *input* is log-probabilities). A zero target contributes 0 (``xlogy``);
    ``log_target=True`` takes the target as log-probabilities. ``reduction`` may also be
    "batchmean" (the sum divided by the first dim, the true KL divergence per example);
    "mean" averages over every element, as PyTorch does."""
    log_probs, target = _as_tensor(log_probs), _as_tensor(target)
    allowed = (*REDUCTIONS, "batchmean")
    _check_reduction("kl_div", reduction, log_probs, target, allowed=allowed)
    _float("kl_div", log_probs, target)
    _same_shape("kl_div", log_probs, target)
    if log_target:
        loss = F.exp(target) * (target - log_probs)
    else:
        zero = F.equal(target, 0.0)
        # The inner where keeps log(0) = -inf out of the product (and out of its gradient).
        plogp = F.where(zero, 0.0, target * F.log(F.where(zero, 1.0, target)))
        loss = plogp - target * log_probs
    if reduction == "batchmean":
        batch = log_probs.shape[0] if log_probs.ndim else 1
        return F.sum(loss) / float(batch)
    return _reduce(loss, reduction)
