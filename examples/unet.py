"""A small UNet (encoder/decoder with skip connections) trained compiled on a toy segmentation.

Run with `make demo-unet` or `.venv/bin/python examples/unet.py [--base N] [--steps N]`. The
model code below is the widely copied PyTorch UNet (milesial/Pytorch-UNet's ``unet_parts.py``
and ``unet_model.py``: DoubleConv, Down, Up, OutConv; transposed-convolution upsampling) with
the imports swapped to hlotrace, at depth 2 (``inc``, ``down1``, ``down2``, ``up1``, ``up2``,
``outc``) and a ``base`` channel count (64 in the original).

Task: the shipped 8x8 digits upsampled to 16x16 with Gaussian noise added; the target is the
clean digit's foreground mask (pixel > 0.5). Loss: ``BCEWithLogitsLoss``; optimizer: Adam. The
step -- forward, loss, backward, update, batch-norm statistics -- is one XLA executable.

Lines that still differ from the PyTorch original (goal: zero), the imports aside (``import
hlotrace.torch as torch``, ``import hlotrace.torch.nn as nn``, ``import
hlotrace.torch.nn.functional as F``): none in ``unet_parts.py`` (``Up``'s ``bilinear=True``
branch, ``nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)``, included;
``torch.cat([x2, x1], dim=1)`` and ``F.pad``'s flat list as written). ``UNet`` is the original's
at depth 2 with a ``base`` channel count (the original: 4 levels of 64..1024 channels), the
same ``bilinear``/``factor`` logic. The training loop (not part of the model files) records the
step in a GradManager: ``with gm:`` around the forward and ``loss.backward()`` (which is
``gm.backward(loss)``), ``optimizer.step()``, ``optimizer.zero_grad()`` in an ``xla_trace``
function. Dropped: ``use_checkpointing`` (``torch.utils.checkpoint``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlotrace.torch as torch
import hlotrace.torch.nn as nn
import hlotrace.torch.nn.functional as F
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace
from hlotrace.torch import optim

# -- the model: unet_parts.py ------------------------------------------------------------------


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Downscaling with maxpool then double conv"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upscaling then double conv"""

    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()

        # if bilinear, use the normal convolutions to reduce the number of channels
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # input is CHW
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]

        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        # if you have padding issues, see
        # https://github.com/HaiyongJiang/U-Net-Pytorch-Unstructured-Buggy/commit/0e854509c2cea854e247a9c615f175f76fbb2e3a
        # https://github.com/xiaopeng-liao/Pytorch-UNet/commit/8ebac70e633bac59fc22bb5195e513d5832fb3bd
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()  # noqa: UP008  (the original's spelling)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


# -- unet_model.py (depth 2) -------------------------------------------------------------------


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False, base=64):
        super(UNet, self).__init__()  # noqa: UP008  (the original's spelling)
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear

        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        factor = 2 if bilinear else 1
        self.down2 = Down(base * 2, base * 4 // factor)
        self.up1 = Up(base * 4, base * 2 // factor, bilinear)
        self.up2 = Up(base * 2, base, bilinear)
        self.outc = OutConv(base, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        logits = self.outc(x)
        return logits


def unet(n_channels=1, n_classes=1, base=8, bilinear=False) -> UNet:
    return UNet(n_channels, n_classes, bilinear=bilinear, base=base)


# -- the toy segmentation task and training ----------------------------------------------------


def segmentation_data(x: np.ndarray, rng: np.random.Generator, noise: float = 0.3):
    """Flat 8x8 digits in [0, 1] -> (noisy 1x16x16 images, 1x16x16 foreground masks), float32."""
    clean = np.repeat(np.repeat(x.reshape(-1, 1, 8, 8), 2, axis=2), 2, axis=3)
    noisy = clean + noise * rng.standard_normal(clean.shape)
    return noisy.astype(np.float32), (clean > 0.5).astype(np.float32)


criterion = nn.BCEWithLogitsLoss()


def train_step(image, mask, *, net, opt, gm):
    with gm:
        loss = criterion(net(image), mask)
        loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


compiled_step = xla_trace(train_step)


@xla_trace
def predict(image, *, net):
    return net(image)


def main(argv=None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=8, help="first level's channels (the original: 64)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bilinear", action="store_true", help="bilinear upsampling (the original's Up default)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    x_train, _, x_test, _ = digits_split(seed=args.seed)
    images, masks = segmentation_data(x_train, rng)
    test_images, test_masks = segmentation_data(x_test[:256], rng)
    torch.manual_seed(args.seed)
    net = unet(base=args.base, bilinear=args.bilinear)
    opt = optim.Adam(net.parameters(), lr=args.lr)
    gm = GradManager().attach(net.parameters())
    count = sum(p.size for p in net.parameters())
    print(
        f"UNet (base {args.base}{', bilinear' if args.bilinear else ''}, {count} parameters): noisy 16x16 digits -> foreground masks, Adam"
    )

    losses = []
    start = time.perf_counter()
    for step in range(args.steps):
        idx = rng.choice(len(images), args.batch, replace=False)
        losses.append(
            float(compiled_step(torch.from_numpy(images[idx]), torch.from_numpy(masks[idx]), net=net, opt=opt, gm=gm))
        )
        if step % 20 == 19 or step == args.steps - 1:
            print(f"step {step + 1:4d}  loss {np.mean(losses[-20:]):.4f} (mean of the last 20)")
    elapsed = time.perf_counter() - start
    net.eval()
    predicted = predict(torch.from_numpy(test_images), net=net).numpy() > 0
    net.train()
    accuracy = float(np.mean(predicted == (test_masks > 0.5)))
    print(f"compiled executables for the step: {compiled_step.cache_size}; {args.steps} steps in {elapsed:.1f} s")
    print(f"test pixel accuracy: {accuracy:.3f} (all background: {1 - test_masks.mean():.3f})")
    return losses


if __name__ == "__main__":
    main()
