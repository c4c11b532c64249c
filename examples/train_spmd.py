"""Train the digits MLP on 8 CPU devices, data-parallel and FSDP-style, through XLA's SPMD partitioner.

Run with `make demo-spmd` (or `HLOTRACE_CPU_DEVICES=8 .venv/bin/python examples/train_spmd.py
[--epochs N]`). The step is examples/train_mlp.py's (forward, cross-entropy, backward, AdamW)
and so is the data (the bundled digits, 80% train / 20% test); only the placements differ:

- data-parallel: every parameter replicated, each batch split over the 8 devices along
  "data"; XLA inserts one all-reduce of the gradients.
- FSDP-style: the parameters, and so the AdamW moments, split over "data" too: each device
  keeps an eighth of them, XLA gathers the weights before they are used (all-gather) and
  reduces the gradients.

For each it prints the losses and test accuracy, the bytes of parameters and optimizer
state each device holds, XLA's memory plan per device, and the collectives XLA inserted,
with the lines of train_mlp.py whose ops caused them; at the end, the largest difference from
the same training on one device.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HLOTRACE_CPU_DEVICES", "8")  # before hlotrace makes its CPU client
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # train_mlp.py, also when loaded by path

import numpy as np
from train_mlp import MLP, train_step  # the digits MLP and its step, as in examples/train_mlp.py

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import nn, optim, runtime
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.distributed.inspect import bytes_per_device, collectives, format_collectives, human_bytes
from hlotrace.jit import xla_trace

BATCH = 64  # 8 rows per device
DEVICES = 8
PLANS = {
    "data-parallel": {},  # every parameter replicated
    # fc2's 10 output rows do not split 8 ways: its weight is split along its 128 inputs.
    "fsdp": {"fc1.*": dist.P("data"), "fc2.weight": dist.P(None, "data"), "fc2.bias": dist.P()},
}


@xla_trace
def logits(data, *, net):
    return net(data)


def mesh_devices() -> list:
    """8 CPU devices: hlotrace's own client's, or a separate 8-device client when hlotrace's
    was made before HLOTRACE_CPU_DEVICES could apply (the example imported by a test)."""
    own = dist.devices()
    if len(own) >= DEVICES:
        return own[:DEVICES]
    return list(runtime.cpu_client(DEVICES).local_devices())


def train(mode, mesh, data, epochs: int, seed: int):
    """Train one model (``mesh`` None: on one device); returns (net, opt, step, losses)."""
    x_train, y_train, _, _ = data
    nn.init.seed(seed)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    if mesh is not None:
        dist.shard_module(net, mesh, PLANS[mode])
    step = xla_trace(train_step)
    rng = np.random.default_rng(seed)
    losses = []
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        epoch_losses = []
        for b in range(len(x_train) // BATCH):
            idx = order[b * BATCH : (b + 1) * BATCH]
            x, y = ht.tensor(x_train[idx]), ht.tensor(y_train[idx])
            if mesh is not None:
                x, y = dist.shard(x, mesh, dist.P("data")), dist.shard(y, mesh, dist.P("data"))
            epoch_losses.append(step(x, y, net=net, opt=opt, gm=gm))
        losses.append(float(np.mean([float(v) for v in epoch_losses])))
        if mesh is not None:
            print(f"  epoch {epoch + 1}/{epochs}  mean loss {losses[-1]:.4f}  test accuracy {accuracy(net, data):.3f}")
    return net, opt, step, losses


def accuracy(net, data) -> float:
    _, _, x_test, y_test = data
    net.eval()
    predicted = logits(ht.tensor(x_test), net=net).numpy().argmax(axis=-1)
    net.train()
    return float(np.mean(predicted == y_test))


def report(net, opt, step) -> None:
    params = list(net.parameters())
    state = [t for p in params for t in opt.state[p].values() if t.ndim > 0]
    total_params = sum(p.numpy().nbytes for p in params)
    total_state = sum(t.numpy().nbytes for t in state)
    held_params, held_state = bytes_per_device(params), bytes_per_device(state)
    per_param, per_state = max(held_params.values()), max(held_state.values())
    print(
        f"  per device: parameters {human_bytes(per_param)} of {human_bytes(total_params)} "
        f"({per_param / total_params:.3f} of the total), AdamW moments {human_bytes(per_state)} of "
        f"{human_bytes(total_state)}, on {len(held_params)} devices"
    )
    stats = step.memory_stats()
    print(
        f"  XLA's plan per device: arguments {human_bytes(stats['argument'])}, temporaries "
        f"{human_bytes(stats['temp'])}, outputs {human_bytes(stats['output'])} (aliased {human_bytes(stats['alias'])})"
    )
    print("  collectives XLA inserted into the step (bytes per device; the ops and lines that caused them):")
    print(format_collectives(collectives(step), indent="    "))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    data = digits_split(seed=args.seed)
    mesh = dist.Mesh((DEVICES,), ("data",), devices=mesh_devices())
    print(
        f"digits: {len(data[0])} train / {len(data[2])} test images, MLP 64-128-10, AdamW, batch {BATCH} "
        f"split over {mesh}"
    )
    _, _, _, reference = train(None, None, data, args.epochs, args.seed)
    results = {}
    for mode in PLANS:
        print(f"\n{mode}: {PLANS[mode] or 'every parameter replicated'}")
        net, opt, step, losses = train(mode, mesh, data, args.epochs, args.seed)
        report(net, opt, step)
        difference = max(abs(a - b) for a, b in zip(losses, reference, strict=True))
        print(f"  largest difference in mean epoch loss from one device: {difference:.2e}")
        results[mode] = {"losses": losses, "accuracy": accuracy(net, data), "collectives": collectives(step)}
    return results


if __name__ == "__main__":
    main()
