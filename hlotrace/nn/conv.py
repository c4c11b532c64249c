"""Conv1d, Conv2d, ConvTranspose2d (PyTorch's layouts and initialization).

>>> from hlotrace import nn
>>> conv = nn.Conv2d(3, 8, 3, padding=1)
>>> conv(ht.tensor(np.ones((2, 3, 5, 5), np.float32))).shape
(2, 8, 5, 5)
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.nn.init as init
from hlotrace import functional as F
from hlotrace.errors import argument_error, int_tuple, positive_int
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d"]


def _channels(owner: str, in_channels, out_channels, groups) -> tuple[int, int, int]:
    in_channels = positive_int(owner, "in_channels", in_channels)
    out_channels = positive_int(owner, "out_channels", out_channels)
    groups = positive_int(owner, "groups", groups)
    if in_channels % groups or out_channels % groups:
        raise argument_error(
            owner, "groups", groups, f"a divisor of in_channels={in_channels} and out_channels={out_channels}"
        )
    return in_channels, out_channels, groups


def _add_parameters(module: Module, shape, bias: bool, dtype) -> None:
    """A convolution's ``weight`` of ``shape`` and (``bias``) its ``out_channels`` bias, drawn
    by the module's ``reset_parameters``."""
    module.weight = Parameter(np.zeros(shape, np.float32), dtype=dtype)
    if bias:
        module.bias = Parameter(np.zeros((module.out_channels,), np.float32), dtype=dtype)
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


def _reset(weight: Parameter, bias: Parameter | None) -> None:
    """PyTorch's conv ``reset_parameters``: ``kaiming_uniform_(a=sqrt(5))`` on the weight, the
    bias from U(-k, k) with k = 1/sqrt(fan_in), fan_in from the weight's dims 1, 2, ..."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init.calculate_fan_in_and_fan_out(weight)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(bias, -bound, bound)


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
        owner = "nn.Conv2d"
        self.in_channels, self.out_channels, self.groups = _channels(owner, in_channels, out_channels, groups)
        self.kernel_size = int_tuple(owner, "kernel_size", kernel_size, 2)
        self.stride = int_tuple(owner, "stride", stride, 2)
        self.padding = int_tuple(owner, "padding", padding, 2, minimum=0)
        self.dilation = int_tuple(owner, "dilation", dilation, 2)
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        _add_parameters(self, shape, bias, dtype)

    def reset_parameters(self) -> None:
        """Draw fresh initial values (in place), as PyTorch's ``Conv2d.reset_parameters``."""
        _reset(self.weight, self.bias)

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


class Conv1d(Module):
    """1-d convolution over (N, C, L) inputs: ``F.conv1d`` with ``weight`` of shape
    (out_channels, in_channels / groups, k); initialized as PyTorch's ``nn.Conv1d``.

    >>> nn.Conv1d(3, 8, 5, padding=2)(ht.tensor(np.ones((2, 3, 16), np.float32))).shape
    (2, 8, 16)
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
        owner = "nn.Conv1d"
        self.in_channels, self.out_channels, self.groups = _channels(owner, in_channels, out_channels, groups)
        (self.kernel_size,) = int_tuple(owner, "kernel_size", kernel_size, 1)
        (self.stride,) = int_tuple(owner, "stride", stride, 1)
        (self.padding,) = int_tuple(owner, "padding", padding, 1, minimum=0)
        (self.dilation,) = int_tuple(owner, "dilation", dilation, 1)
        shape = (self.out_channels, self.in_channels // self.groups, self.kernel_size)
        _add_parameters(self, shape, bias, dtype)

    def reset_parameters(self) -> None:
        """Draw fresh initial values (in place), as PyTorch's ``Conv1d.reset_parameters``."""
        _reset(self.weight, self.bias)

    def forward(self, x):
        return F.conv1d(
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
        if self.padding:
            text += f", padding={self.padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        return text + ("" if self.bias is not None else ", bias=False")


class ConvTranspose2d(Module):
    """Transposed 2-d convolution over (N, C, H, W) inputs: ``F.conv_transpose2d`` with
    ``weight`` of shape (in_channels, out_channels / groups, kH, kW), PyTorch's layout and
    initialization (its fan_in is ``out_channels / groups · kH · kW``, from weight dim 1).

    >>> nn.ConvTranspose2d(4, 2, 2, stride=2)(ht.tensor(np.ones((1, 4, 3, 3), np.float32))).shape
    (1, 2, 6, 6)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        dtype="float32",
    ):
        super().__init__()
        owner = "nn.ConvTranspose2d"
        self.in_channels, self.out_channels, self.groups = _channels(owner, in_channels, out_channels, groups)
        self.kernel_size = int_tuple(owner, "kernel_size", kernel_size, 2)
        self.stride = int_tuple(owner, "stride", stride, 2)
        self.padding = int_tuple(owner, "padding", padding, 2, minimum=0)
        self.output_padding = int_tuple(owner, "output_padding", output_padding, 2, minimum=0)
        self.dilation = int_tuple(owner, "dilation", dilation, 2)
        shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        _add_parameters(self, shape, bias, dtype)

    def reset_parameters(self) -> None:
        """Draw fresh initial values (in place), as PyTorch's ``ConvTranspose2d.reset_parameters``."""
        _reset(self.weight, self.bias)

    def forward(self, x):
        return F.conv_transpose2d(
            x,
            self.weight,
            self.bias,
            stride=self.stride,
            padding=self.padding,
            output_padding=self.output_padding,
            dilation=self.dilation,
            groups=self.groups,
        )

    def extra_repr(self) -> str:
        text = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            text += f", padding={self.padding}"
        if self.output_padding != (0, 0):
            text += f", output_padding={self.output_padding}"
        return text + ("" if self.bias is not None else ", bias=False")
