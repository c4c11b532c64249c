"""What proving replicas equal costs (issue 33): an ~11M-parameter MLP (ten 1024x1024
layers and a 1024x512 one), replicated on a mesh over every process's devices, with AdamW.

Reported, on process 0 (the best of ``--repeat`` runs):
- fingerprinting alone: reading this process's copy of every parameter to the host and
  hashing it (SHA-1), no exchange;
- the check a compiled step runs before its first call: parameters, AdamW's two moments and
  its hyper-parameters fingerprinted and exchanged through the coordination service;
- ``dist.make_global`` of a small replicated value (checked on every call);
- ``dist.broadcast_from(0, [net, opt])`` when every parameter differs (each process seeded
  its own way): process 0's parameters travel through the coordination service.

    .venv/bin/python -m hlotrace.distributed.launch --nproc 2 --cpu-devices 1 benchmarks/bench_replica_check.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import nn, optim
from hlotrace.distributed import replicas


def build(seed: int):
    ht.random.seed(seed)
    net = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(10)], nn.Linear(1024, 512))
    return net, optim.AdamW(net.parameters(), lr=1e-3)


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dist.initialize()
    me = dist.process_index()
    mesh = dist.Mesh((len(dist.devices()),), ("data",))
    net, opt = build(0)
    dist.shard_module(net, mesh)
    params = list(net.parameters())
    count = sum(p.size for p in params)
    state = [t for t in opt._trace_state()[1] if all(t is not p for p in params)]
    named = [(f"p{i}", t) for i, t in enumerate([*params, *state])]

    fingerprints = best_of(args.repeat, lambda: [replicas.fingerprint(replicas.local_value(p)) for p in params])
    check = best_of(args.repeat, lambda: replicas.check("bench", named))
    labels = np.zeros(64, np.int32)
    mesh_global = best_of(args.repeat, lambda: dist.make_global(labels, mesh, dist.P()))
    divergent, opt2 = build(me)
    dist.shard_module(divergent, mesh)
    start = time.perf_counter()
    dist.broadcast_from(0, [divergent, opt2])
    broadcast = time.perf_counter() - start
    if me == 0:
        mb = count * 4 / 2**20
        print(f"{dist.process_count()} processes x {len(dist.local_devices())} devices; {count / 1e6:.1f}M parameters")
        print(f"fingerprint the parameters ({mb:.0f} MiB): {fingerprints * 1e3:.0f} ms")
        print(f"check before a first call (+ AdamW state, {len(named)} tensors, exchanged): {check * 1e3:.0f} ms")
        print(f"dist.make_global of replicated int32[64] labels (checked on every call): {mesh_global * 1e3:.1f} ms")
        print(f"broadcast_from(0, [net, opt]), every parameter differing: {broadcast * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
