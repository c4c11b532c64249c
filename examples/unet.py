"""A small UNet (encoder/decoder with skip connections) trained compiled on a toy segmentation.

Run with `make demo-unet` or `.venv/bin/python examples/unet.py [--base N] [--steps N]`. The
model code below is the widely copied PyTorch UNet (milesial/Pytorch-UNet's ``unet_parts.py``
and ``unet_model.py``: DoubleConv, Down, Up, OutConv; transposed-convolution upsampling) with
the imports swapped to hlotrace, at depth 2 (``inc``, ``down1``, ``down2``, ``up1``, ``up2``,
``outc``) and a ``base`` channel count (64 in the original).

Task: the shipped 8x8 digits upsampled to 16x16 with Gaussian noise added; the target is the
clean digit's foreground mask (pixel > 0.5). Loss: ``BCEWithLogitsLoss``; optimizer: Adam. The
step -- forward, loss, backward, update, batch-norm statistics -- is one XLA executable.

Lines that still differ from the PyTorch original (goal: zero):
- imports: ``import hlotrace.nn as nn``, ``import hlotrace.functional as F``;
- ``x = torch.cat([x2, x1], dim=1)``: ``x = F.cat([x2, x1], dim=1)`` (no ``torch``-style
  namespace; ``F.cat`` is ``torch.cat``);
- the training loop (``with gm: ... gm.backward(loss)``, ``opt.step().clear_grad()`` in an
  ``xla_trace`` function).
Dropped: the ``bilinear=True`` branch (``nn.Upsample(mode="bilinear", align_corners=True)``:
hlotrace's ``nn.Upsample`` is nearest-neighbour only) and ``use_checkpointing``
(``torch.utils.checkpoint``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlotrace as ht
import hlotrace.functional as F
import hlotrace.nn as nn
from hlotrace import optim
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace

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

    def __init__(self, in_channels, out_channels):
        super().__init__()
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
        x = F.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


# -- unet_model.py (depth 2) -------------------------------------------------------------------


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, base=64):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes

        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4)
        self.up1 = Up(base * 4, base * 2)
        self.up2 = Up(base * 2, base)
        self.outc = OutConv(base, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        x = self.up2(x, x1)
        logits = self.outc(x)
        return logits


def unet(n_channels=1, n_classes=1, base=8) -> UNet:
    return UNet(n_channels, n_classes, base=base)


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
        gm.backward(loss)
    opt.step().clear_grad()
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
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    x_train, _, x_test, _ = digits_split(seed=args.seed)
    images, masks = segmentation_data(x_train, rng)
    test_images, test_masks = segmentation_data(x_test[:256], rng)
    ht.random.seed(args.seed)
    net = unet(base=args.base)
    opt = optim.Adam(net.parameters(), lr=args.lr)
    gm = GradManager().attach(net.parameters())
    count = sum(p.size for p in net.parameters())
    print(f"UNet (base {args.base}, {count} parameters): noisy 16x16 digits -> foreground masks, Adam")

    losses = []
    start = time.perf_counter()
    for step in range(args.steps):
        idx = rng.choice(len(images), args.batch, replace=False)
        losses.append(float(compiled_step(ht.tensor(images[idx]), ht.tensor(masks[idx]), net=net, opt=opt, gm=gm)))
        if step % 20 == 19 or step == args.steps - 1:
            print(f"step {step + 1:4d}  loss {np.mean(losses[-20:]):.4f} (mean of the last 20)")
    elapsed = time.perf_counter() - start
    net.eval()
    predicted = predict(ht.tensor(test_images), net=net).numpy() > 0
    net.train()
    accuracy = float(np.mean(predicted == (test_masks > 0.5)))
    print(f"compiled executables for the step: {compiled_step.cache_size}; {args.steps} steps in {elapsed:.1f} s")
    print(f"test pixel accuracy: {accuracy:.3f} (all background: {1 - test_masks.mean():.3f})")
    return losses


if __name__ == "__main__":
    main()
