# ruff: noqa: A002  (PyTorch's argument names: input, type, ...)
"""``torch.nn.functional`` with PyTorch's signatures and meanings, over hlotrace's functional.

Functions whose hlotrace counterpart already has PyTorch's signature are that function
(``F.linear``, ``F.gelu``, ``F.layer_norm``, ``F.conv2d``, ...). The others map PyTorch's
arguments onto it: the losses take the class dim 1 (``cross_entropy``, ``nll_loss``) and
PyTorch's argument order; ``batch_norm``'s ``momentum`` is PyTorch's (hlotrace's is
MegEngine's, ``1 - momentum``); ``pad`` is always PyTorch's flat list; ``conv_transpose2d``
takes ``groups`` before ``dilation``; ``inplace=`` is accepted (the result is a new tensor
either way); ``scaled_dot_product_attention`` and ``interpolate`` (nearest and
(bi/tri)linear with ``align_corners``) are PyTorch's. Options hlotrace does not implement
(``ceil_mode=True``, ``return_indices=True``, ``padding_idx``, ``max_norm``) are errors
naming them, never ignored.

>>> import numpy as np, hlotrace as ht, hlotrace.torch.nn.functional as F
>>> logits = ht.tensor(np.zeros((2, 5, 3), np.float32))   # (N, C, d): classes on dim 1
>>> round(F.cross_entropy(logits, ht.tensor(np.zeros((2, 3), np.int32))).item(), 4)
1.6094
"""

from __future__ import annotations

import math
import numbers

from hlotrace import functional as _F
from hlotrace.errors import argument_error
from hlotrace.nn_functional import interpolate, scaled_dot_product_attention

__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool2d",
    "mish",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "prelu",
    "relu",
    "relu6",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
    "upsample",
]

# Already PyTorch's signatures.
linear, gelu, layer_norm, group_norm, rms_norm = _F.linear, _F.gelu, _F.layer_norm, _F.group_norm, _F.rms_norm
conv1d, conv2d, adaptive_avg_pool2d = _F.conv1d, _F.conv2d, _F.adaptive_avg_pool2d
sigmoid, tanh, softplus, logsigmoid, prelu, huber_loss = (
    _F.sigmoid,
    _F.tanh,
    _F.softplus,
    _F.logsigmoid,
    _F.prelu,
    _F.huber_loss,
)


def _refuse(function: str, argument: str, value, wanted: str):
    raise argument_error(f"torch.nn.functional.{function}", argument, value, f"{wanted} (hlotrace implements no other)")


def _reduction(function: str, size_average, reduce, reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` pair, mapped as PyTorch maps it."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


# -- activations (``inplace`` accepted: the result is a new tensor either way) ----------------


def relu(input, inplace=False):
    return _F.relu(input)


def relu6(input, inplace=False):
    return _F.relu6(input)


def silu(input, inplace=False):
    return _F.silu(input)


def mish(input, inplace=False):
    return _F.mish(input)


def hardswish(input, inplace=False):
    return _F.hardswish(input)


def hardsigmoid(input, inplace=False):
    return _F.hardsigmoid(input)


def elu(input, alpha=1.0, inplace=False):
    return _F.elu(input, alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _F.leaky_relu(input, negative_slope)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``F.softmax(x, dim)``; ``dim=None`` is PyTorch's legacy choice (0 for rank 0, 1 and 3,
    else 1)."""
    x = input if dtype is None else _F.astype(input, dtype)
    return _F.softmax(x, axis=_legacy_dim(x) if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = input if dtype is None else _F.astype(input, dtype)
    return _F.log_softmax(x, axis=_legacy_dim(x) if dim is None else dim)


def _legacy_dim(x) -> int:
    return 0 if x.ndim in (0, 1, 3) else 1


def dropout(input, p=0.5, training=True, inplace=False):
    return _F.dropout(input, p, training)


# -- layers -------------------------------------------------------------------------------------


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    for name, value, default in (("padding_idx", padding_idx, None), ("max_norm", max_norm, None)):
        if value is not default:
            _refuse("embedding", name, value, "None")
    if scale_grad_by_freq:
        _refuse("embedding", "scale_grad_by_freq", scale_grad_by_freq, "False")
    return _F.embedding(input, weight)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """PyTorch's momentum: ``running = (1 - momentum) * running + momentum * batch``. A number,
    as PyTorch's: ``momentum=None`` (the cumulative average) is the modules' (``nn.BatchNorm2d(c,
    momentum=None)``), which count the batches in ``num_batches_tracked``."""
    if momentum is None:
        raise argument_error(
            "torch.nn.functional.batch_norm",
            "momentum",
            momentum,
            "a number in [0, 1] (None, the cumulative average, needs a batch count: nn.BatchNorm*d(momentum=None))",
        )
    momentum = hlotrace_momentum("torch.nn.functional.batch_norm", momentum)
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def hlotrace_momentum(api: str, momentum):
    """PyTorch's ``momentum`` (the batch statistic's weight) as hlotrace's (the running
    value's): ``1 - momentum``; None (the cumulative average) stays None. Anything but None or
    a real number in [0, 1] is the ArgumentError naming PyTorch's value.

    >>> hlotrace_momentum("nn.BatchNorm2d", 0.25), hlotrace_momentum("nn.BatchNorm2d", None)
    (0.75, None)
    """
    if momentum is None:
        return None
    if isinstance(momentum, numbers.Real) and not isinstance(momentum, bool):
        if math.isfinite(momentum) and 0.0 <= momentum <= 1.0:
            return 1.0 - float(momentum)
    raise argument_error(api, "momentum", momentum, "None or a number in [0, 1] (PyTorch's: the batch's weight)")


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's argument order (``groups`` before ``dilation``)."""
    return _F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, dilation, groups)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if dilation not in (1, (1, 1)):
        _refuse("max_pool2d", "dilation", dilation, "1")
    if ceil_mode:
        _refuse("max_pool2d", "ceil_mode", ceil_mode, "False")
    if return_indices:
        _refuse("max_pool2d", "return_indices", return_indices, "False")
    return _F.max_pool2d(input, kernel_size, stride, padding)


def avg_pool2d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    if ceil_mode:
        _refuse("avg_pool2d", "ceil_mode", ceil_mode, "False")
    if divisor_override is not None:
        _refuse("avg_pool2d", "divisor_override", divisor_override, "None")
    return _F.avg_pool2d(input, kernel_size, stride, padding, count_include_pad)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    if return_indices:
        _refuse("adaptive_max_pool2d", "return_indices", return_indices, "False")
    return _F.adaptive_max_pool2d(input, output_size)


def pad(input, pad, mode="constant", value=None):
    """PyTorch's ``F.pad``: ``pad`` a flat list, last dim first (``(left, right, top,
    bottom, ...)``), for any length, 2 included (``np.pad``'s pairs are not taken here)."""
    return _F.pad(input, pad=pad, mode=mode, value=value)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """PyTorch's deprecated name of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``x / max(‖x‖_p along dim, eps)`` (PyTorch's ``F.normalize``)."""
    norm = _F.sum(_F.abs(input) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return input / _F.maximum(norm, eps)


def one_hot(tensor, num_classes=-1):
    """``F.one_hot(labels, num_classes)``: int64 (as PyTorch). ``num_classes=-1`` (inferred
    from the largest label: a shape that depends on values) is refused."""
    if num_classes is None or num_classes < 0:
        _refuse("one_hot", "num_classes", num_classes, "the number of classes, given")
    return _F.one_hot(tensor, num_classes, dtype="int64")


# -- losses: PyTorch's argument order, the class dim 1 ------------------------------------------


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """Softmax cross-entropy with the classes on dim 1 (``(N, C)`` or ``(N, C, d1, ...)``;
    ``(C,)`` unbatched), class ``weight``, ``ignore_index``, ``label_smoothing``, class
    probabilities as targets: hlotrace's ``F.cross_entropy`` with ``axis=1``."""
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    axis = 0 if input.ndim == 1 else 1
    return _F.cross_entropy(input, target, axis, reduction, weight, ignore_index, label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    return _F.nll_loss(input, target, weight, ignore_index, reduction, axis=0 if input.ndim == 1 else 1)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _F.mse_loss(input, target, _reduction("mse_loss", size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _F.l1_loss(input, target, _reduction("l1_loss", size_average, reduce, reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    return _F.smooth_l1_loss(input, target, _reduction("smooth_l1_loss", size_average, reduce, reduction), beta)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    return _F.kl_div(input, target, _reduction("kl_div", size_average, reduce, reduction), log_target)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    return _F.binary_cross_entropy(
        input, target, weight, _reduction("binary_cross_entropy", size_average, reduce, reduction)
    )


def binary_cross_entropy_with_logits(
    input,
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
    pos_weight=None,
):
    reduction = _reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    return _F.binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)
