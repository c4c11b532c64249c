"""Values that span processes: built from each process's part, gathered back on request.

>>> x = dist.make_global(my_rows, mesh, dist.P("data"))   # each process: its half of the batch
>>> loss = step(x, y)                                      # replicated results read anywhere
>>> params = dist.process_allgather(net.state_dict())      # every process, together

A value split over devices of several processes cannot be read by one of them alone:
``.numpy()`` of it raises (a fully replicated one reads this process's copy);
:func:`process_allgather` is a collective (every process calls it, in the same order) that
compiles an identity whose result XLA's partitioner replicates on every device.
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.distributed.process as process
import hlotrace.distributed.replicas as replicas
import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace.distributed.mesh import Mesh, NamedSharding, P
from hlotrace.distributed.placement import constraint, runtime_sharding, set_placement, sharding_of
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace
from hlotrace.tensor import HOOKS, Tensor
from hlotrace.tensor import tensor as make_tensor


def host_value(tensor: Tensor) -> np.ndarray:
    """``tensor.numpy()`` of a device array NumPy could not read: this process's copy when
    it is replicated on every device, else an error naming :func:`process_allgather`."""
    buffer = tensor._device
    if jaxlib_dist.is_fully_addressable(buffer):
        return np.asarray(buffer)  # (raises NumPy's own error again)
    if jaxlib_dist.is_fully_replicated(buffer):
        return jaxlib_dist.local_replica(buffer)
    sharding = sharding_of(tensor)
    where = f" laid out as {sharding.spec!r} on {sharding.mesh!r}" if sharding is not None else ""
    raise HlotraceError(
        f"tensor ({tensor.dtype}{list(tensor.shape)}){where} is split over devices of several processes; this "
        f"process holds only part of it. Call dist.process_allgather(t) on every process to get the whole "
        f"value everywhere (or read this process's part with dist.local_part(t))"
    )


def _local_box(sharding: NamedSharding, ndim: int):
    """Per dimension: (number of shards it is split into, first and count of the shard
    positions this process's devices hold), and each local device's shard position."""
    jsh = runtime_sharding(sharding, ndim)
    dims = sharding.dims(ndim)
    parts = tuple(math.prod(sharding.mesh.axis_size(a) for a in axes) for axes in dims)
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    # On a global shape of one element per shard, each device's slice start is its position.
    positions = {
        device: tuple(0 if s.start is None else s.start for s in index)
        for device, index in jaxlib_spmd.index_map(jsh, parts).items()
    }
    box = []
    for d in range(ndim):
        held = sorted({p[d] for p in positions.values()})
        if held[-1] - held[0] + 1 != len(held):
            raise HlotraceError(
                f"this process's devices hold shards {held} of dimension {d}, not a contiguous block: "
                f"make_global needs a mesh whose devices of one process are adjacent along {dims[d]}"
            )
        box.append((parts[d], held[0], len(held)))
    return jsh, box, positions


def make_global(local_array, mesh: Mesh, spec=None) -> Tensor:
    """One global Tensor laid out on ``mesh`` as ``spec`` from the part of it this process's
    devices hold: ``local_array`` is that block (e.g. this process's rows of a batch split
    on ``"data"``; the whole value where ``spec`` replicates it). Every process calls it,
    each with its own part; the global shape is inferred from the parts.

    >>> x = dist.make_global(x_local, mesh, dist.P("data"))   # x_local: [B / processes, ...]
    """
    if not isinstance(mesh, Mesh):
        raise HlotraceError(f"make_global needs a dist.Mesh, got {type(mesh).__name__}")
    local = (local_array if isinstance(local_array, Tensor) else make_tensor(local_array)).numpy()
    sharding = NamedSharding(mesh, P() if spec is None else (spec if isinstance(spec, P) else P(*spec)))
    if len(sharding.spec) > local.ndim:
        raise HlotraceError(
            f"{sharding.spec!r} has {len(sharding.spec)} entries but the local part has rank {local.ndim}"
        )
    _check_replicated(local, sharding)
    jsh, box, positions = _local_box(sharding, local.ndim)
    global_shape, block = [], []
    for d, (parts, _, held) in enumerate(box):
        if local.shape[d] % held:
            raise HlotraceError(
                f"dimension {d} of this process's part has size {local.shape[d]}, which its {held} shards along "
                f"{sharding.dims(local.ndim)[d]} do not divide"
            )
        block.append(local.shape[d] // held)
        global_shape.append(block[-1] * parts)
    pieces = {}
    for device, position in positions.items():
        index = tuple(
            slice((p - first) * size, (p - first + 1) * size)
            for p, (_, first, _), size in zip(position, box, block, strict=True)
        )
        pieces[device] = local[index]
    out = Tensor._from_device(jaxlib_dist.assemble(tuple(global_shape), local.dtype, jsh, pieces))
    set_placement(out, sharding)
    return out


def _check_replicated(local: np.ndarray, sharding: NamedSharding) -> None:
    """Data that every process gives whole (replicated across processes) must be the same
    data everywhere: proven through the coordination service (see distributed.replicas)."""
    if (
        process.spans_processes(sharding.mesh.devices)
        and replicas.enabled()
        and replicas.whole_in_every_process(sharding, local.ndim)
    ):
        what = f"dist.make_global of a {local.dtype}{list(local.shape)} value laid out as {sharding.spec!r}"
        replicas.check(what, [("the data this process gave", local)], replicas.GLOBAL_FIX)


def local_part(tensor: Tensor) -> np.ndarray:
    """The block of ``tensor`` this process's devices hold (the inverse of make_global)."""
    buffer = tensor._device
    if buffer is None or jaxlib_dist.is_fully_addressable(buffer):
        return tensor.numpy()
    shards = jaxlib_dist.local_shards(buffer)
    starts = [min(0 if s.start is None else s.start for s in (idx[d] for idx, _ in shards)) for d in range(tensor.ndim)]
    stops = [
        max(n if s.stop is None else s.stop for s in (idx[d] for idx, _ in shards)) for d, n in enumerate(tensor.shape)
    ]
    out = np.empty([b - a for a, b in zip(starts, stops, strict=True)], dtype=tensor.dtype)
    for index, data in shards:
        out[
            tuple(
                slice((s.start or 0) - a, (s.start or 0) - a + n)
                for s, a, n in zip(index, starts, data.shape, strict=True)
            )
        ] = data
    return out


_GATHER = {}


def _replicated(*tensors):
    return tuple(constraint(t, P()) for t in tensors)


def process_allgather(value):
    """The whole value of ``value`` (a Tensor, or a dict/list/tuple of them: a state dict) on
    every process, as host Tensors. A collective: every process must call it with the same
    structure and shapes, in the same order. Values already whole here are not moved.

    >>> state = dist.process_allgather(net.state_dict())
    >>> if dist.process_index() == 0: ht.save(state, "model.ht")
    """
    leaves: list = []
    _collect(value, leaves)
    remote = [t for t in leaves if t._device is not None and not jaxlib_dist.is_fully_addressable(t._device)]
    remote = [t for t in remote if not jaxlib_dist.is_fully_replicated(t._device)]
    gathered = {}
    if remote:
        fn = _GATHER.get("fn")
        if fn is None:
            fn = _GATHER["fn"] = xla_trace(_replicated, first_call="compiled")
        outputs = fn(*(Tensor._from_device(t._device) for t in remote))
        for t, out in zip(remote, outputs, strict=True):
            gathered[id(t)] = out.numpy()
    return _rebuild(value, gathered)


def _collect(value, leaves: list) -> None:
    if isinstance(value, Tensor):
        leaves.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, leaves)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, leaves)


def _rebuild(value, gathered: dict):
    if isinstance(value, Tensor):
        array = gathered.get(id(value))
        return Tensor._from_array(np.array(array if array is not None else value.numpy()), checked=True)
    if isinstance(value, dict):
        return type(value)((k, _rebuild(v, gathered)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return type(value)(_rebuild(v, gathered) for v in value)
    return value


HOOKS.host_value = host_value  # Tensor calls it through this slot (hlotrace.tensor.HOOKS)
