"""Normalization modules: ``BatchNorm1d``, ``BatchNorm2d``, ``LayerNorm``, ``GroupNorm``, ``RMSNorm``,
``InstanceNorm1d``, ``InstanceNorm2d``.

>>> from hlotrace import nn
>>> bn = nn.BatchNorm2d(3)
>>> list(bn.state_dict())
['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']

``BatchNorm2d``'s ``momentum`` follows MegEngine: ``running = momentum * running + (1 -
momentum) * batch_stat`` (default 0.9; PyTorch's default 0.1 is the same update, see
:func:`hlotrace.functional.batch_norm`). ``momentum=None`` is PyTorch's cumulative average:
``running += (batch_stat - running) / num_batches_tracked``. The buffer ``num_batches_tracked``
(an int64 scalar, as PyTorch's) counts the training-mode forwards, eager or compiled.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import functional as F
from hlotrace.errors import HlotraceError, argument_error, positive_int
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter, tensor

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "LayerNorm", "RMSNorm"]


def _positive_int(name: str, value, what: str) -> int:
    return positive_int(f"nn.{name}", what, value)


def _number(name: str, what: str, value, low: float, high: float = float("inf")) -> float:
    """``value`` as a float when it is a finite real number in [low, high], else the
    ArgumentError naming it."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        if math.isfinite(value) and low <= value <= high:
            return float(value)
    wanted = f"a finite number >= {low}" if high == float("inf") else f"a number in [{low}, {high}]"
    raise argument_error(f"nn.{name}", what, value, wanted)


def _shape(name: str, value) -> tuple[int, ...]:
    """``normalized_shape``: a positive int or a non-empty tuple of them."""
    shape = (value,) if isinstance(value, int | np.integer) else value
    if not isinstance(shape, tuple | list) or not shape:
        raise argument_error(f"nn.{name}", "normalized_shape", value, "a positive int or a tuple of them")
    return tuple(positive_int(f"nn.{name}", "normalized_shape", d) for d in shape)


class _BatchNorm(Module):
    """Batch normalization per channel (dim 1); subclasses fix the input ranks."""

    _ranks: tuple[int, ...] = ()
    _layout = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.9, affine=True, track_running_stats=True):
        super().__init__()
        name = type(self).__name__
        self.num_features = _positive_int(name, num_features, "num_features")
        self.eps = _number(name, "eps", eps, 0.0)
        self.momentum = None if momentum is None else _number(name, "momentum", momentum, 0.0, 1.0)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        shape = (self.num_features,)
        if self.affine:
            self.weight = Parameter(np.ones(shape, np.float32))
            self.bias = Parameter(np.zeros(shape, np.float32))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", tensor(np.zeros(shape, np.float32)))
            self.register_buffer("running_var", tensor(np.ones(shape, np.float32)))
            self.register_buffer("num_batches_tracked", tensor(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def _megengine_momentum(self) -> float | None:
        """The weight of the old running statistics in each update (MegEngine's momentum:
        ``running = w * running + (1 - w) * batch``), or None for the cumulative average. The
        forward reads the update through this method only, so a subclass that keeps another
        convention in ``.momentum`` (``hlotrace.torch.nn.BatchNorm2d``: PyTorch's, the batch's
        weight) converts it here and assigning ``.momentum`` later means what it says."""
        return self.momentum

    def forward(self, x):
        if x.ndim not in self._ranks:
            raise HlotraceError(f"{type(self).__name__} expects an {self._layout} input, got shape {x.shape}")
        tracking = self.training and self.track_running_stats and self.running_mean is not None
        weight = self._megengine_momentum()
        if tracking and weight is None:
            return self._cumulative_forward(x)
        y = F.batch_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            training=self.training or not self.track_running_stats,
            momentum=0.0 if weight is None else weight,  # None: no update here
            eps=self.eps,
        )
        if tracking and self.num_batches_tracked is not None:
            # After the update (PyTorch counts first; the order is invisible): a forward that
            # fails leaves the count as it was.
            self.num_batches_tracked._assign(self.num_batches_tracked + 1)
        return y

    def _cumulative_forward(self, x):
        """``momentum=None`` in training: normalize with the batch statistics, then move the
        running ones by ``1 / num_batches_tracked`` of the way to them (PyTorch's cumulative
        moving average; the factor is a value of the step, so a compiled step never recompiles
        for it). ``F.batch_norm`` takes a constant momentum only, hence the update here."""
        if self.num_batches_tracked is None:
            raise HlotraceError(
                f"{type(self).__name__}(momentum=None) averages over num_batches_tracked, which was set to None"
            )
        y = F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=self.eps)
        counted = self.num_batches_tracked + 1
        others = tuple(d for d in range(x.ndim) if d != 1)
        wide = F.astype(x, self.running_mean.dtype).detach()
        mean = F.mean(wide, axis=others)
        centered = wide - F.reshape(mean, (1, self.num_features) + (1,) * (x.ndim - 2))
        n = math.prod(x.shape) // self.num_features
        unbiased = F.sum(centered * centered, axis=others) / (n - 1)
        factor = 1.0 / F.astype(counted, self.running_mean.dtype)
        self.running_mean._assign(self.running_mean + (mean - self.running_mean) * factor)
        self.running_var._assign(self.running_var + (unbiased - self.running_var) * factor)
        self.num_batches_tracked._assign(counted)
        return y

    def _state_defaults(self) -> dict[str, np.ndarray]:
        return {"num_batches_tracked": np.zeros((), np.int64)} if self.track_running_stats else {}

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization over ``(N, C)`` or ``(N, C, L)`` inputs, per channel; otherwise
    as :class:`BatchNorm2d` (buffers, ``affine``, MegEngine's ``momentum``).

    >>> nn.BatchNorm1d(4)(ht.tensor(np.random.rand(8, 4).astype(np.float32))).shape
    (8, 4)
    """

    _ranks = (2, 3)
    _layout = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization over ``(N, C, H, W)`` inputs, per channel.

    In training mode (``module.train()``, the default) it normalizes with the batch
    statistics and updates the buffers ``running_mean`` (zeros) and ``running_var`` (ones)
    in place, and adds 1 to ``num_batches_tracked`` (an int64 scalar); in eval mode it
    normalizes with the running statistics. ``momentum=None`` averages every batch so far
    (PyTorch's cumulative average). ``affine`` adds the parameters ``weight`` (ones) and
    ``bias`` (zeros); without ``track_running_stats`` there are no buffers and batch
    statistics are used in both modes. ``state_dict()`` keys are PyTorch's: ``weight``,
    ``bias``, ``running_mean``, ``running_var``, ``num_batches_tracked``.
    """

    _ranks = (4,)
    _layout = "(N, C, H, W)"


class LayerNorm(Module):
    """Layer normalization over the trailing dims ``normalized_shape`` (an int or a tuple),
    with ``weight`` (ones) and ``bias`` (zeros) of that shape if ``elementwise_affine``;
    ``bias=False`` keeps the weight only (PyTorch's argument, GPT-style models without biases)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        self.normalized_shape = _shape("LayerNorm", normalized_shape)
        self.eps = _number("LayerNorm", "eps", eps, 0.0)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, np.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Group normalization of ``(N, C, *)`` inputs: ``num_channels`` split into
    ``num_groups`` groups, with per-channel ``weight`` (ones) and ``bias`` (zeros) if ``affine``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        self.num_groups = _positive_int("GroupNorm", num_groups, "num_groups")
        self.num_channels = _positive_int("GroupNorm", num_channels, "num_channels")
        if self.num_channels % self.num_groups:
            wanted = f"a divisor of num_channels={self.num_channels}"
            raise argument_error("nn.GroupNorm", "num_groups", self.num_groups, wanted)
        self.eps = _number("GroupNorm", "eps", eps, 0.0)
        self.affine = bool(affine)
        if self.affine:
            self.weight = Parameter(np.ones((self.num_channels,), np.float32))
            self.bias = Parameter(np.zeros((self.num_channels,), np.float32))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing dims ``normalized_shape`` (PyTorch's
    ``nn.RMSNorm``): ``x / sqrt(mean(x²) + eps) * weight``, ``weight`` (ones) if
    ``elementwise_affine``; ``eps`` None means the input dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.normalized_shape = _shape("RMSNorm", normalized_shape)
        self.eps = None if eps is None else _number("RMSNorm", "eps", eps, 0.0)
        self.elementwise_affine = bool(elementwise_affine)
        if self.elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _InstanceNorm(Module):
    """Per example and channel, normalized over the spatial dims (``F.group_norm`` with one
    group per channel); ``weight``/``bias`` per channel if ``affine`` (PyTorch's default: off)."""

    _rank = 0
    _layout = ""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False):
        super().__init__()
        name = type(self).__name__
        self.num_features = _positive_int(name, num_features, "num_features")
        if track_running_stats:
            raise HlotraceError(f"{name}: track_running_stats=True is not supported (statistics are per example)")
        self.eps = _number(name, "eps", eps, 0.0)
        _number(name, "momentum", momentum, 0.0, 1.0)  # unused (no running statistics), yet not nonsense
        self.affine = bool(affine)
        if self.affine:
            self.weight = Parameter(np.ones((self.num_features,), np.float32))
            self.bias = Parameter(np.zeros((self.num_features,), np.float32))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        if x.ndim != self._rank or x.shape[1] != self.num_features:
            raise HlotraceError(
                f"{type(self).__name__}({self.num_features}) expects an {self._layout} input with "
                f"C={self.num_features}, got shape {x.shape}"
            )
        return F.group_norm(x, self.num_features, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.affine}"


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of ``(N, C, L)`` inputs (PyTorch's ``nn.InstanceNorm1d``)."""

    _rank = 3
    _layout = "(N, C, L)"


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of ``(N, C, H, W)`` inputs (PyTorch's ``nn.InstanceNorm2d``)."""

    _rank = 4
    _layout = "(N, C, H, W)"
