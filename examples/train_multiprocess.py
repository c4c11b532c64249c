"""Train the digits MLP data-parallel over the devices of several processes.

Run with `make demo-multiprocess` (2 processes x 4 CPU devices), i.e.

    .venv/bin/python -m hlotrace.distributed.launch --nproc 2 --cpu-devices 4 examples/train_multiprocess.py

or as one process (`HLOTRACE_CPU_DEVICES=8 .venv/bin/python examples/train_multiprocess.py`):
the same program, the same numbers. Each process:

1. joins the job (`dist.initialize()`: the launcher's environment; a no-op alone);
2. builds the same parameters (same seed on every process) and places them replicated on a
   mesh over every process's devices;
3. feeds only its own rows of each batch (`dist.make_global`: the batch is split on the
   "data" axis, and this process's devices hold a contiguous block of it);
4. runs one compiled step (forward, backward, AdamW): recorded from shapes, compiled by every
   process for the whole mesh, XLA's partitioner inserting the gradient all-reduce (gloo
   between processes);
5. at the end gathers the parameters (`dist.process_allgather`, a collective) and process 0
   writes them (`--out FILE.npz`) and reports test accuracy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import hlotrace.distributed as dist
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import xla_trace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # train_mlp.py, also when run by path
from train_mlp import MLP, train_step

compiled_step = xla_trace(train_step)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps (60)")
    parser.add_argument("--batch", type=int, default=64, help="global batch size (64)")
    parser.add_argument("--out", default=None, help="process 0 writes the final parameters here (.npz)")
    args = parser.parse_args(argv)

    dist.initialize()  # HLOTRACE_COORDINATOR / _NUM_PROCESSES / _PROCESS_ID, set by the launcher
    me, processes = dist.process_index(), dist.process_count()
    devices = dist.devices()  # every process's
    mesh = dist.Mesh((len(devices),), ("data",))
    if args.batch % len(devices):
        raise SystemExit(f"--batch {args.batch} must be a multiple of the {len(devices)} devices")
    local_rows = args.batch // processes
    first = me * local_rows  # this process's devices hold rows [first, first + local_rows)
    say = print if me == 0 else (lambda *a, **k: None)
    say(f"{processes} process(es) x {len(dist.local_devices())} CPU devices: mesh {mesh}")

    nn.init.seed(0)  # the same parameters on every process
    net = MLP(hidden=64)
    dist.shard_module(net, mesh)  # replicated on every device (data-parallel)
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())

    x_train, y_train, x_test, y_test = digits_split()
    rng = np.random.default_rng(0)  # the same batch order on every process
    start = time.perf_counter()
    for step in range(args.steps):
        rows = rng.choice(len(x_train), args.batch, replace=False)[first : first + local_rows]
        x = dist.make_global(x_train[rows].astype(np.float32), mesh, dist.P("data"))
        y = dist.make_global(y_train[rows].astype(np.int32), mesh, dist.P("data"))
        loss = compiled_step(x, y, net=net, opt=opt, gm=gm)
        if step % 20 == 0 or step == args.steps - 1:
            say(f"step {step:3d}  loss {float(loss.numpy()):.4f}")  # replicated: readable anywhere
    seconds = time.perf_counter() - start
    say(f"{args.steps} steps in {seconds:.2f} s; collectives: {_collectives(compiled_step)}")

    params = dist.process_allgather(dict(net.named_parameters()))  # every process takes part
    if me == 0:
        predicted = _forward(params, x_test.astype(np.float32)).argmax(axis=-1)
        say(f"test accuracy {np.mean(predicted == y_test):.3f}")
        if args.out:
            np.savez(args.out, **{name: t.numpy() for name, t in params.items()})
            say(f"parameters written to {args.out}")


def _forward(params, x):
    h = np.maximum(x @ params["fc1.weight"].numpy().T + params["fc1.bias"].numpy(), 0)
    return h @ params["fc2.weight"].numpy().T + params["fc2.bias"].numpy()


def _collectives(fn) -> str:
    hlo = fn.executable.hlo_text()
    kinds = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
    found = [f"{k} x{hlo.count(k + '(')}" for k in kinds if f" {k}(" in hlo]
    return ", ".join(found) or "none"


if __name__ == "__main__":
    main()
