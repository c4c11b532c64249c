"""ResNet-18 and ResNet-50 in torchvision's layout, trained with a compiled step on the digits.

Run with `make demo-resnet` (or `.venv/bin/python examples/resnet.py [--arch resnet50]
[--width 64] [--size 32] [--steps N] [--batch N]`). The model code below is torchvision's
``resnet.py`` (BasicBlock, Bottleneck, ResNet with conv1/bn1/layer1..4/fc, ``downsample`` as an
``nn.Sequential``, He initialization, ``zero_init_residual``) with the imports swapped to
hlotrace; ``cifar=True`` is the usual CIFAR stem (3x3 stride-1 conv1, no max pool) and
``width`` the first stage's channels (64 in torchvision; the demo's default is 16 so it runs
in about a minute on 2 CPU cores). Parameter names match torchvision's (``layer1.0.conv1.weight``,
``layer2.0.downsample.0.weight``), so a PyTorch checkpoint loads with
``nn.load_torch_state_dict``.

Data: the 8x8 digits shipped in hlotrace.datasets, upsampled (nearest) to ``--size`` pixels and
repeated over 3 channels, normalized as CIFAR images are. The step is forward, cross-entropy,
backward and SGD with momentum and weight decay, with the batch-norm running statistics updated
in place: one XLA executable after the first (recording) call.

Lines that still differ from torchvision's original (goal: zero): none in the model code.
The imports are ``import hlotrace.torch as torch``, ``import hlotrace.torch.nn as nn`` and
``from hlotrace.torch import Tensor`` (torchvision: ``torch``, ``torch.nn``, ``torch.Tensor``);
the rest of the model is torchvision's (``torch.flatten(x, 1)`` included) plus the additions
below. The training loop, not part of the model file, records the step in a GradManager
(``with gm:`` around the forward and ``loss.backward()``, which is ``gm.backward(loss)``) and
is a function decorated with ``xla_trace``; ``opt.step()`` and ``opt.zero_grad()`` are
PyTorch's.
Added, not changed: ``cifar`` and ``width`` arguments (torchvision hard-codes the ImageNet stem
and 64). ``groups``, ``width_per_group`` and ``replace_stride_with_dilation`` are torchvision's
(ResNeXt / wide / dilated variants). Not ported: the ``_resnet``/``ResNet18_Weights`` plumbing
(downloads; load a checkpoint with ``nn.load_torch_state_dict`` instead).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import hlotrace.torch as torch
import hlotrace.torch.nn as nn
import hlotrace.torch.nn.functional as F
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace
from hlotrace.torch import Tensor, optim

# -- the model: torchvision/models/resnet.py ---------------------------------------------------


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Conv2d:
    """3x3 convolution with padding"""
    return nn.Conv2d(
        in_planes,
        out_planes,
        kernel_size=3,
        stride=stride,
        padding=dilation,
        groups=groups,
        bias=False,
        dilation=dilation,
    )


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion: int = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: Callable[..., nn.Module] | None = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        # Both self.conv1 and self.downsample layers downsample the input when stride != 1
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out


class Bottleneck(nn.Module):
    # Bottleneck in torchvision places the stride for downsampling at 3x3 convolution(self.conv2)
    # while original implementation places the stride at the first 1x1 convolution(self.conv1)
    # according to "Deep residual learning for image recognition" https://arxiv.org/abs/1512.03385.
    # This variant is also known as ResNet V1.5 and improves accuracy according to
    # https://ngc.nvidia.com/catalog/model-scripts/nvidia:resnet_50_v1_5_for_pytorch.

    expansion: int = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: Callable[..., nn.Module] | None = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        # Both self.conv2 and self.downsample layers downsample the input when stride != 1
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)

        out = self.conv3(out)
        out = self.bn3(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out


class ResNet(nn.Module):
    def __init__(
        self,
        block: type[BasicBlock | Bottleneck],
        layers: list[int],
        num_classes: int = 1000,
        zero_init_residual: bool = False,
        groups: int = 1,
        width_per_group: int = 64,
        replace_stride_with_dilation: list[bool] | None = None,
        norm_layer: Callable[..., nn.Module] | None = None,
        cifar: bool = False,
        width: int = 64,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer

        self.inplanes = width
        self.dilation = 1
        if replace_stride_with_dilation is None:
            # each element in the tuple indicates if we should replace
            # the 2x2 stride with a dilated convolution instead
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError(
                f"replace_stride_with_dilation should be None or a 3-element tuple, got {replace_stride_with_dilation}"
            )
        self.groups = groups
        self.base_width = width_per_group
        if cifar:  # 32x32 inputs: a 3x3 stride-1 stem and no max pool
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if cifar else nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

        # Zero-initialize the last BN in each residual branch,
        # so that the residual branch starts with zeros, and each residual block behaves like an identity.
        # This improves the model by 0.2~0.3% according to https://arxiv.org/abs/1706.02677
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    nn.init.constant_(m.bn3.weight, 0)  # type: ignore[arg-type]
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)  # type: ignore[arg-type]

    def _make_layer(
        self,
        block: type[BasicBlock | Bottleneck],
        planes: int,
        blocks: int,
        stride: int = 1,
        dilate: bool = False,
    ) -> nn.Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )

        layers = []
        layers.append(
            block(
                self.inplanes, planes, stride, downsample, self.groups, self.base_width, previous_dilation, norm_layer
            )
        )
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(
                block(
                    self.inplanes,
                    planes,
                    groups=self.groups,
                    base_width=self.base_width,
                    dilation=self.dilation,
                    norm_layer=norm_layer,
                )
            )

        return nn.Sequential(*layers)

    def _forward_impl(self, x: Tensor) -> Tensor:
        # See note [TorchScript super()]
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)

        return x

    def forward(self, x: Tensor) -> Tensor:
        return self._forward_impl(x)


def resnet18(num_classes: int = 10, cifar: bool = True, **kwargs) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2]); ``width=64`` as torchvision by default."""
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes=num_classes, cifar=cifar, **kwargs)


def resnet50(num_classes: int = 10, cifar: bool = True, **kwargs) -> ResNet:
    """ResNet-50 (Bottleneck, [3, 4, 6, 3]); ``width=64`` as torchvision by default."""
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes=num_classes, cifar=cifar, **kwargs)


ARCHS = {"resnet18": resnet18, "resnet50": resnet50}

# -- data and training -------------------------------------------------------------------------

MEAN, STD = 0.3, 0.4  # of the digits' pixels scaled to [0, 1]


def images(x: np.ndarray, size: int) -> np.ndarray:
    """Flat 8x8 digits -> (N, 3, size, size) float32: nearest upsampling (size a multiple of 8),
    three equal channels, normalized."""
    if size % 8:
        raise ValueError(f"--size must be a multiple of 8, got {size}")
    x = x.reshape(-1, 1, 8, 8)
    x = np.repeat(np.repeat(x, size // 8, axis=2), size // 8, axis=3)
    return ((np.repeat(x, 3, axis=1) - MEAN) / STD).astype(np.float32)


def train_step(data, label, *, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


compiled_step = xla_trace(train_step)


@xla_trace
def logits(data, *, net):
    return net(data)


def make_optimizer(net, lr: float = 0.05):
    return optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(ARCHS), default="resnet18")
    parser.add_argument("--width", type=int, default=16, help="first stage's channels (torchvision: 64)")
    parser.add_argument("--size", type=int, default=16, help="image side in pixels, a multiple of 8 (CIFAR: 32)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    x_train, y_train, x_test, y_test = digits_split(seed=args.seed)
    x_train, x_test = images(x_train, args.size), images(x_test, args.size)
    torch.manual_seed(args.seed)
    net = ARCHS[args.arch](num_classes=10, cifar=True, width=args.width)
    opt = make_optimizer(net, args.lr)
    gm = GradManager().attach(net.parameters())
    count = sum(p.size for p in net.parameters())
    print(
        f"{args.arch} (width {args.width}, {count} parameters) on digits as 3x{args.size}x{args.size} images, "
        f"SGD momentum 0.9, batch {args.batch}"
    )

    rng = np.random.default_rng(args.seed)
    losses = []
    start = time.perf_counter()
    for step in range(args.steps):
        idx = rng.choice(len(x_train), args.batch, replace=False)
        loss = float(
            compiled_step(torch.from_numpy(x_train[idx]), torch.from_numpy(y_train[idx]), net=net, opt=opt, gm=gm)
        )
        losses.append(loss)
        if step == 0:
            print(f"step    1  loss {loss:.4f}  (recorded and compiled in {time.perf_counter() - start:.1f} s)")
        elif step % 10 == 9 or step == args.steps - 1:
            print(f"step {step + 1:4d}  loss {loss:.4f}  (mean of the last 10: {np.mean(losses[-10:]):.4f})")
    elapsed = time.perf_counter() - start
    net.eval()
    predicted = logits(torch.from_numpy(x_test[:256]), net=net).numpy().argmax(axis=-1)
    net.train()
    accuracy = float(np.mean(predicted == y_test[:256]))
    print(f"compiled executables for the step: {compiled_step.cache_size}; {args.steps} steps in {elapsed:.1f} s")
    print(f"test accuracy after {args.steps} steps: {accuracy:.3f}")
    return losses


if __name__ == "__main__":
    main()
