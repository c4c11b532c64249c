"""Conv2d.

>>> from hlotrace import nn
>>> conv = nn.Conv2d(3, 8, 3, padding=1)
>>> conv(ht.tensor(np.ones((2, 3, 5, 5), np.float32))).shape
(2, 8, 5, 5)
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.nn import init
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter

__all__ = ["Conv2d"]


def _pair(value, name: str) -> tuple[int, int]:
    """An int or two ints, as PyTorch's ``_pair`` (the op checks the values themselves)."""
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise HlotraceError(f"Conv2d: {name} needs an int or 2 ints, got {value!r}")
        return tuple(value)
    return (value, value)


class Conv2d(Module):
    """2-d convolution over (N, C, H, W) inputs: ``F.conv2d(x, weight, bias, ...)`` with
    ``weight`` of shape (out_channels, in_channels / groups, kH, kW) and ``bias`` (out_channels,).

    Initialized as PyTorch's ``nn.Conv2d``: ``kaiming_uniform_(weight, a=sqrt(5))``, i.e.
    U(-k, k) with k = 1/sqrt(fan_in), fan_in = in_channels / groups · kH · kW, and the bias
    from U(-k, k) too, drawn from :mod:`hlotrace.nn.init`'s generator.

    >>> conv = nn.Conv2d(4, 6, (3, 1), stride=2, groups=2, bias=False)
    >>> conv.weight.shape, conv.bias
    ((6, 2, 3, 1), None)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        dtype="float32",
    ):
        super().__init__()
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        if self.groups < 1 or self.in_channels % self.groups or self.out_channels % self.groups:
            raise HlotraceError(
                f"Conv2d: groups={groups} must be >= 1 and divide in_channels={in_channels} "
                f"and out_channels={out_channels}"
            )
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight = Parameter(np.zeros(shape, np.float32), dtype=dtype)
        if bias:
            self.bias = Parameter(np.zeros((self.out_channels,), np.float32), dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw fresh initial values (in place), as PyTorch's ``Conv2d.reset_parameters``."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init.calculate_fan_in_and_fan_out(self.weight)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv2d(
            x,
            self.weight,
            self.bias,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=self.groups,
        )

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.dilation != (1, 1):
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + ("" if self.bias is not None else ", bias=False")
