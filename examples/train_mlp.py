"""Train an MLP on the bundled handwritten digits with a compiled training step.

Run with `make demo` (or `.venv/bin/python examples/train_mlp.py [--epochs N]`). The whole
step — forward, cross-entropy, backward, AdamW update — is one XLA executable: the first
call runs eagerly and records, later calls run compiled, with the parameters and optimizer
state kept on the device and written back into the same Tensor objects. The learning rate
halves every 4 epochs without recompiling. At the end it reports test accuracy and the
steady-state step time of the compiled step against the same step run eagerly (NumPy), and
hlotrace's counters (``ht.metrics_report()``: compiles, cache hits, executions, transfers).

Data: 1797 8×8 digit images shipped in hlotrace.datasets (UCI, the set scikit-learn bundles),
80% train / 20% test, features scaled to [0, 1].
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace

BATCH = 64


class MLP(nn.Module):
    def __init__(self, hidden: int = 128):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


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


def progress(epoch: int, epochs: int, done: int, total: int, loss: float) -> None:
    width = 30
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    sys.stdout.write(f"\repoch {epoch + 1:2d}/{epochs} [{bar}] {done:3d}/{total} batches  loss {loss:.4f}")
    sys.stdout.flush()


def time_steps(step, net, opt, gm, batches, number: int) -> float:
    """Median per-step seconds over ``number`` steps (each blocks on its loss)."""
    times = []
    for i in range(number):
        x, y = batches[i % len(batches)]
        start = time.perf_counter()
        step(x, y, net=net, opt=opt, gm=gm).numpy()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    x_train, y_train, x_test, y_test = digits_split(seed=args.seed)
    nn.init.seed(args.seed)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = len(x_train) // BATCH  # full batches only: one input signature
    print(f"digits: {len(x_train)} train / {len(x_test)} test images, MLP 64-128-10, AdamW, batch {BATCH}")

    for epoch in range(args.epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for b in range(steps_per_epoch):
            idx = order[b * BATCH : (b + 1) * BATCH]
            loss = compiled_step(ht.tensor(x_train[idx]), ht.tensor(y_train[idx]), net=net, opt=opt, gm=gm)
            losses.append(loss)
            if b % 4 == 3 or b == steps_per_epoch - 1:
                progress(epoch, args.epochs, b + 1, steps_per_epoch, float(loss))
        mean_loss = float(np.mean([float(v) for v in losses]))
        print(
            f"\repoch {epoch + 1:2d}/{args.epochs}  mean loss {mean_loss:.4f}  test accuracy "
            f"{accuracy(net, x_test, y_test):.3f}  lr {opt.param_groups[0]['lr']:.2e}" + " " * 20
        )
        if epoch % 4 == 3:
            opt.param_groups[0]["lr"] *= 0.5  # a hyper-parameter input: no recompilation
    final = accuracy(net, x_test, y_test)
    print(f"compiled executables for the step: {compiled_step.cache_size} (lr changed {args.epochs // 4} times)")

    batches = [
        (ht.tensor(x_train[i * BATCH : (i + 1) * BATCH]), ht.tensor(y_train[i * BATCH : (i + 1) * BATCH]))
        for i in range(8)
    ]
    compiled_s = time_steps(compiled_step, net, opt, gm, batches, 200)
    eager_s = time_steps(train_step, net, opt, gm, batches, 30)
    print(
        f"steady-state step: compiled {compiled_s * 1e6:.0f} us, eager {eager_s * 1e6:.0f} us "
        f"({eager_s / compiled_s:.1f}x faster compiled)"
    )
    print(f"final test accuracy: {final:.3f}")
    print(ht.metrics_report())
    return final


if __name__ == "__main__":
    main()
