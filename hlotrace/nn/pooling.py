"""Pooling modules: ``MaxPool2d``, ``AvgPool2d``, ``AdaptiveAvgPool2d``,
``AdaptiveMaxPool2d`` (each calls the functional op of the same name on NCHW or CHW
tensors; see :mod:`hlotrace.ops.pooling` for their exact semantics).

>>> from hlotrace import nn
>>> net = nn.Sequential(nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1))
"""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.errors import argument_error, int_tuple, is_size
from hlotrace.nn.module import Module

__all__ = ["AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool2d", "MaxPool2d"]


def _check_window(owner: str, kernel_size, stride, padding) -> None:
    """Sizes checked when the module is built, kept as given (the op reads them)."""
    int_tuple(owner, "kernel_size", kernel_size, 2)
    if stride is not None:
        int_tuple(owner, "stride", stride, 2)
    int_tuple(owner, "padding", padding, 2, minimum=0)


def _check_output_size(owner: str, output_size) -> None:
    entries = list(output_size) if isinstance(output_size, tuple | list) else [output_size, output_size]
    if len(entries) != 2 or not all(e is None or is_size(e) for e in entries):
        raise argument_error(owner, "output_size", output_size, "a positive int or a pair of them (None keeps a size)")


class MaxPool2d(Module):
    """Maximum over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``), -inf
    padding of at most half the kernel; NaN propagates."""

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        _check_window("nn.MaxPool2d", kernel_size, stride, padding)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows, zero padding; the divisor is the kernel area, or
    the number of non-padding elements when ``count_include_pad=False``."""

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True):
        super().__init__()
        _check_window("nn.AvgPool2d", kernel_size, stride, padding)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.count_include_pad)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"count_include_pad={self.count_include_pad}"
        )


class AdaptiveAvgPool2d(Module):
    """Mean over PyTorch's adaptive windows giving ``output_size`` (an int or a pair; None
    entries keep the input's size)."""

    def __init__(self, output_size):
        super().__init__()
        _check_output_size("nn.AdaptiveAvgPool2d", output_size)
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Maximum over PyTorch's adaptive windows giving ``output_size``; NaN propagates."""

    def __init__(self, output_size):
        super().__init__()
        _check_output_size("nn.AdaptiveMaxPool2d", output_size)
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
