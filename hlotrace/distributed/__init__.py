"""SPMD on many devices (of one process or several), through XLA's own partitioner (Shardy).

>>> import hlotrace.distributed as dist
>>> mesh = dist.Mesh((4, 2), ("data", "model"))           # HLOTRACE_CPU_DEVICES=8 on a CPU
>>> x = dist.shard(ht.tensor(batch), mesh, dist.P("data"))
>>> dist.shard_module(net, mesh, {"fc1.weight": dist.P(None, "model")})
>>> step(net, opt, x, y)      # xla_trace compiles for the mesh; XLA inserts the collectives

Several processes (hosts): ``dist.initialize()`` first (``python -m hlotrace.distributed.launch``
sets it up), then ``dist.make_global`` builds inputs from each process's part. Replicated
inputs are proven equal across processes before a step's first call (``dist.ReplicaMismatch``
names what differs); ``dist.broadcast_from(0, [net, opt])`` copies process 0's values.

A placement is data on a Tensor (``tensor.sharding``); the recorded program is the same with
or without one (eager values are the global view). See README.md, "Many devices (SPMD)".
"""

from __future__ import annotations

import hlotrace.distributed.hooks  # noqa: F401  (binds hlotrace.spmd_hooks)
from hlotrace.distributed.global_data import local_part, make_global, process_allgather
from hlotrace.distributed.mesh import Mesh, NamedSharding, P, devices
from hlotrace.distributed.placement import constraint, shard, shard_module, sharding_of
from hlotrace.distributed.process import initialize, is_initialized, local_devices, process_count, process_index
from hlotrace.distributed.replicas import ReplicaMismatch, broadcast_from

__all__ = [
    "Mesh",
    "NamedSharding",
    "P",
    "ReplicaMismatch",
    "broadcast_from",
    "constraint",
    "devices",
    "initialize",
    "is_initialized",
    "local_devices",
    "local_part",
    "make_global",
    "process_allgather",
    "process_count",
    "process_index",
    "shard",
    "shard_module",
    "sharding_of",
]
