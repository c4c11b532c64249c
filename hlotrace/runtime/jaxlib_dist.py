"""The multi-process half of :mod:`hlotrace.runtime.jaxlib_compat`: every version-sensitive
jaxlib call that several processes (on one host or many) need. Nothing else in hlotrace
calls these entry points.

Checked against jax/jaxlib 0.10.2 on CPU, 2 processes on localhost (facts:
../shared/JAXLIB_NOTES.md, "Several processes"):

- process 0 runs ``_jax.get_distributed_runtime_service(address, num_nodes)``; every process
  makes ``_jax.get_distributed_runtime_client(address, node_id)`` and ``connect()``s, which
  waits until every process has registered;
- ``xla_client.make_cpu_client(distributed_client=, node_id=, num_nodes=, collectives=
  make_gloo_tcp_collectives(...), num_devices=K)`` lists the devices of every process
  (``devices()``, ids 0.. for process 0, 2048.. for process 1) and ``local_devices()``;
- the distributed client is also a key-value store (``key_value_set``,
  ``blocking_key_value_get``, ``key_value_dir_get``) that hlotrace uses to compare modules
  before compiling.

Failures are not exceptions there: ``connect()`` past its deadline, a peer that stops sending
heartbeats, a coordinator that goes away all end the process inside XLA (``LOG(FATAL)``:
"Terminating process because the JAX distributed service detected fatal errors"), and the
``missed_heartbeat_callback`` argument fails with ``std::bad_cast`` when given a Python
function. hlotrace therefore probes the coordinator's port itself and connects on a helper
thread it can stop waiting for (see :mod:`hlotrace.distributed.process`).
"""

from __future__ import annotations

import numpy as np


def start_service(bind_address: str, num_processes: int, timeout_s: int):
    """The coordination service (process 0 only); it lives as long as the returned object."""
    from jax._src.lib import _jax

    return _jax.get_distributed_runtime_service(
        bind_address, int(num_processes), heartbeat_timeout=int(timeout_s), shutdown_timeout=int(timeout_s)
    )


def make_client(address: str, process_id: int, timeout_s: int, init_timeout_s: int):
    """A (not yet connected) client of the coordination service at ``address``."""
    from jax._src.lib import _jax

    return _jax.get_distributed_runtime_client(
        address,
        int(process_id),
        init_timeout=int(init_timeout_s),
        heartbeat_timeout=int(timeout_s),
        shutdown_timeout=int(timeout_s),
        rpc_timeout=int(timeout_s),
    )


def connect(client) -> None:
    client.connect()


def shutdown(client_or_service) -> None:
    client_or_service.shutdown()


def make_cpu_client(distributed_client, process_id: int, num_processes: int, num_devices: int | None):
    """A CPU PJRT client whose devices are those of every process, with gloo TCP
    collectives between them (``num_devices`` local CPU devices; None: jaxlib's default)."""
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    collectives = _jax.make_gloo_tcp_collectives(distributed_client=distributed_client)
    kwargs = {} if num_devices is None else {"num_devices": int(num_devices)}
    return xc.make_cpu_client(
        distributed_client=distributed_client,
        node_id=int(process_id),
        num_nodes=int(num_processes),
        collectives=collectives,
        **kwargs,
    )


def global_devices(client) -> list:
    return list(client.devices())


def process_index_of(device) -> int:
    return int(device.process_index)


# ---------------------------------------------------------------------------------------
# Key-value store (the coordination service's)
# ---------------------------------------------------------------------------------------


def kv_set(client, key: str, value: str) -> None:
    client.key_value_set(key, value, allow_overwrite=True)


def kv_get(client, key: str, timeout_s: float) -> str:
    """The value of ``key``, waiting up to ``timeout_s``; raises TimeoutError."""
    try:
        return client.blocking_key_value_get(key, max(1, int(timeout_s * 1000)))
    except Exception as exc:
        if "DEADLINE_EXCEEDED" in str(exc) or "timed out" in str(exc).lower():
            raise TimeoutError(str(exc).splitlines()[0]) from None
        raise


def kv_dir(client, prefix: str) -> list[tuple[str, str]]:
    return list(client.key_value_dir_get(prefix))


# ---------------------------------------------------------------------------------------
# Global arrays (jax.Array) that span processes
# ---------------------------------------------------------------------------------------


def is_fully_addressable(buffer) -> bool:
    return bool(getattr(buffer, "is_fully_addressable", True))


def is_fully_replicated(buffer) -> bool:
    return bool(getattr(buffer, "is_fully_replicated", False))


def local_replica(buffer) -> np.ndarray:
    """The whole value of a fully replicated global array, read from this process's first
    device (no communication)."""
    return np.asarray(buffer.addressable_shards[0].data)


def local_shards(buffer) -> list:
    """[(index tuple into the global array, NumPy data)] of this process's shards."""
    return [(shard.index, np.asarray(shard.data)) for shard in buffer.addressable_shards]


def assemble(global_shape, dtype, jax_sharding, pieces: dict):
    """One global array from this process's shards: ``pieces`` maps every addressable
    device of ``jax_sharding`` to its NumPy shard."""
    from jax._src import core
    from jax._src.lib import xla_client as xc

    dtype = np.dtype(dtype)
    aval = core.ShapedArray(tuple(global_shape), dtype)
    devices = list(pieces)
    shards = [np.ascontiguousarray(pieces[d]) if np.ndim(pieces[d]) else pieces[d] for d in devices]
    kwargs = {"enable_x64": True} if dtype.itemsize == 8 else {}
    return xc.batched_device_put(aval, jax_sharding, shards, devices, **kwargs)
