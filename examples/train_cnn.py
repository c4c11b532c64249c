"""Train a small ConvNet on the bundled digits images with a compiled training step.

Run with `make demo-cnn` (or `.venv/bin/python examples/train_cnn.py [--epochs N]`). The
network is MegEngine's XLA test ConvNet, sized for 8×8 images: two blocks of 3×3
convolution, batch normalization, ReLU and 2×2 max pooling, then a linear classifier. The
whole step — forward, cross-entropy, backward, AdamW update, and the batch-norm running
statistics updated in place — is one XLA executable after the first (recording) call.
Evaluation runs a second compiled function in eval mode (running statistics).

Data: 1797 8×8 digit images shipped in hlotrace.datasets (UCI, the set scikit-learn bundles),
80% train / 20% test, pixels scaled to [0, 1], as (N, 1, 8, 8) tensors.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace

BATCH = 64


class ConvNet(nn.Module):
    """conv3x3(1→16, no bias: BN cancels it) BN ReLU maxpool2 → conv3x3(16→32) BN ReLU maxpool2 → linear(128→10)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.fc(F.reshape(x, (x.shape[0], -1)))


def train_step(data, label, *, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


compiled_step = xla_trace(train_step)


@xla_trace
def logits(data, *, net):
    return net(data)


def accuracy(net, x, y) -> float:
    net.eval()
    predicted = logits(ht.tensor(x), net=net).numpy().argmax(axis=-1)
    net.train()
    return float(np.mean(predicted == y))


def time_steps(step, net, opt, gm, batches, number: int) -> float:
    """Median per-step seconds over ``number`` steps (each blocks on its loss)."""
    times = []
    for i in range(number):
        x, y = batches[i % len(batches)]
        start = time.perf_counter()
        step(x, y, net=net, opt=opt, gm=gm).numpy()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def images(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, 1, 8, 8)


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    x_train, y_train, x_test, y_test = digits_split(seed=args.seed)
    x_train, x_test = images(x_train), images(x_test)
    nn.init.seed(args.seed)
    net = ConvNet()
    opt = optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = len(x_train) // BATCH  # full batches only: one input signature
    print(f"digits: {len(x_train)} train / {len(x_test)} test images (1x8x8), ConvNet with BN, AdamW, batch {BATCH}")

    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for b in range(steps_per_epoch):
            idx = order[b * BATCH : (b + 1) * BATCH]
            losses.append(compiled_step(ht.tensor(x_train[idx]), ht.tensor(y_train[idx]), net=net, opt=opt, gm=gm))
        mean_loss = float(np.mean([float(v) for v in losses]))
        print(
            f"epoch {epoch + 1:2d}/{args.epochs}  mean loss {mean_loss:.4f}  test accuracy "
            f"{accuracy(net, x_test, y_test):.3f}"
        )
    final = accuracy(net, x_test, y_test)
    print(f"compiled executables for the step: {compiled_step.cache_size}")
    running = net.bn1.running_mean.numpy()
    print(f"bn1 running mean (updated in place by the compiled step): {np.array2string(running[:4], precision=3)} ...")

    batches = [
        (ht.tensor(x_train[i * BATCH : (i + 1) * BATCH]), ht.tensor(y_train[i * BATCH : (i + 1) * BATCH]))
        for i in range(8)
    ]
    compiled_s = time_steps(compiled_step, net, opt, gm, batches, 100)
    eager_s = time_steps(train_step, net, opt, gm, batches, 10)
    print(
        f"steady-state step: compiled {compiled_s * 1e6:.0f} us, eager {eager_s * 1e6:.0f} us "
        f"({eager_s / compiled_s:.1f}x faster compiled)"
    )
    print(f"final test accuracy: {final:.3f}")
    return final


if __name__ == "__main__":
    main()
