"""The SPMD half of :mod:`hlotrace.runtime.jaxlib_compat`: every version-sensitive jaxlib/jax
call that many-device compilation needs (split off only to keep each file small; the rule
is the same: nothing else in hlotrace calls these jaxlib entry points).

Checked against jax/jaxlib 0.10.2 on CPU (facts: ../shared/JAXLIB_NOTES.md, "SPMD") and
0.11.2 on CUDA (one-device meshes only: one GPU was lent):
Shardy annotations built with ``jaxlib.mlir.dialects.sdy`` (the context must register the
dialect first, see ``jaxlib_compat.make_context``), compile options with
``num_partitions``/``device_assignment``/``use_spmd_partitioning``/``use_shardy_partitioner``,
inputs put with ``batched_device_put`` and a jax ``NamedSharding``, outputs taken with
``array_result_handler``. A shard of the wrong per-device shape handed to
``execute_sharded`` crashes the process: callers check layouts first
(:mod:`hlotrace.runtime.spmd`).
"""

from __future__ import annotations

import numpy as np

from hlotrace.runtime.jaxlib_compat import ir
from hlotrace.runtime.jaxlib_execute import _jax_aval, result_handler

# ---------------------------------------------------------------------------------------
# Clients and devices
# ---------------------------------------------------------------------------------------


def make_cpu_client(num_devices: int):
    """A CPU PJRT client with ``num_devices`` devices (beside jax's own CPU backend)."""
    from jax._src.lib import xla_client as xc

    return xc.make_cpu_client(num_devices=int(num_devices))


def device_id(device) -> int:
    return int(device.id)


def device_client(device):
    return device.client


# ---------------------------------------------------------------------------------------
# Shardy annotations (MLIR)
# ---------------------------------------------------------------------------------------


def register_sdy(ctx: ir.Context) -> None:
    """Register the Shardy dialect (building sdy attributes without it segfaults)."""
    from jaxlib.mlir.dialects import sdy

    sdy.register_dialect(ctx)


def mesh_op(name: str, axes, device_ids=None):
    """``sdy.mesh @name = <["a"=2, ...]>`` at the current insertion point; ``device_ids``
    only when the mesh's devices are not 0..N-1 in order."""
    from jaxlib.mlir.dialects import sdy

    axis_attrs = [sdy.MeshAxisAttr.get(a, int(n)) for a, n in axes]
    mesh = sdy.MeshAttr.get(axis_attrs, list(device_ids)) if device_ids is not None else sdy.MeshAttr.get(axis_attrs)
    return sdy.MeshOp(name, mesh)


def tensor_sharding(mesh_name: str, dims, closed: bool = True):
    """``#sdy.sharding<@mesh_name, [{"a"}, {}, ...]>``: ``dims`` holds, per tensor
    dimension, the axis names it is split over (None: open and unsplit, ``{?}``).
    ``closed=False`` leaves every dimension open (``{?}``, ``{"a", ?}``): the partitioner
    may shard it further."""
    from jaxlib.mlir.dialects import sdy

    dim_attrs = [
        sdy.DimensionShardingAttr.get(
            [sdy.AxisRefAttr.get(a) for a in (axes or ())], is_closed=closed and axes is not None
        )
        for axes in dims
    ]
    return sdy.TensorShardingAttr.get(mesh_name, dim_attrs)


SHARDING_ATTR = "sdy.sharding"


def set_value_attrs(main, results: bool, entries: list[dict]) -> None:
    """Merge ``entries[i]`` (name -> attribute) into @main's argument (or result) attribute
    dictionaries, keeping what is there (``tf.aliasing_output``)."""
    name = "res_attrs" if results else "arg_attrs"
    existing = main.attributes[name] if name in main.attributes else None
    merged = []
    for i, extra in enumerate(entries):
        entry = {}
        if existing is not None:
            for attr in ir.DictAttr(existing[i]):
                entry[attr.name] = attr.attr
        entry.update(extra)
        merged.append(ir.DictAttr.get(entry))
    main.attributes[name] = ir.ArrayAttr.get(merged)


def sharding_constraint(value, sharding):
    from jaxlib.mlir.dialects import sdy

    return sdy.ShardingConstraintOp(value, sharding).result


def set_partition_counts(module: ir.Module, num_partitions: int) -> None:
    i32 = ir.IntegerType.get_signless(32)
    module.operation.attributes["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, int(num_partitions))
    module.operation.attributes["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, 1)


# ---------------------------------------------------------------------------------------
# Compiling
# ---------------------------------------------------------------------------------------


def spmd_compile_options(device_ids, disabled_xla_passes: tuple[str, ...] = ()):
    """One replica, one partition per device, Shardy partitioner on."""
    from jax._src.lib import xla_client as xc

    options = xc.CompileOptions()
    options.num_replicas = 1
    options.num_partitions = len(device_ids)
    options.device_assignment = xc.DeviceAssignment.create(np.array([list(device_ids)]))
    build = options.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    if disabled_xla_passes:
        options.env_option_overrides = [("xla_disable_hlo_passes", ",".join(disabled_xla_passes))]
    return options


def options_fingerprint(options) -> str:
    import hashlib

    try:
        data = options.SerializeAsString()
    except Exception:  # pragma: no cover (jaxlib without it)
        data = repr(options).encode()
    return hashlib.sha256(data).hexdigest()


def compile_spmd(client, module_text: str, devices, options):
    from jax._src.lib import xla_client as xc

    return client.compile_and_load(module_text, xc.DeviceList(tuple(devices)), options)


def deserialize_spmd(client, data: bytes, devices, options):
    from jax._src.lib import xla_client as xc

    return client.deserialize_executable(data, xc.DeviceList(tuple(devices)), options)


def parameter_shardings(executable, count: int) -> list:
    """The executable's ``count`` parameter shardings (``HloSharding``), in argument order
    (replicated for a one-partition executable, for which jaxlib returns None)."""
    from jax._src.lib import xla_client as xc

    protos = executable.get_parameter_shardings()
    if protos is None:
        return [xc.HloSharding.replicate()] * count
    return [xc.HloSharding.from_proto(p) for p in protos]


def output_shardings(executable, count: int) -> list:
    from jax._src.lib import xla_client as xc

    protos = executable.get_output_shardings()
    if protos is None:
        return [xc.HloSharding.replicate()] * count
    return [xc.HloSharding.from_proto(p) for p in protos]


# ---------------------------------------------------------------------------------------
# jax shardings (the runtime's view of a placement)
# ---------------------------------------------------------------------------------------


def jax_mesh(devices, shape, axis_names):
    from jax.sharding import Mesh

    grid = np.empty(len(devices), dtype=object)
    grid[:] = list(devices)
    return Mesh(grid.reshape(tuple(shape)), tuple(axis_names))


def jax_named_sharding(jmesh, dims):
    """jax's NamedSharding for ``dims`` (per dimension: a tuple of axis names)."""
    from jax.sharding import NamedSharding, PartitionSpec

    entries = [None if not axes else (axes[0] if len(axes) == 1 else tuple(axes)) for axes in dims]
    while entries and entries[-1] is None:
        entries.pop()
    return NamedSharding(jmesh, PartitionSpec(*entries))


def hlo_sharding_of(jax_sharding, ndim: int):
    return jax_sharding._to_xla_hlo_sharding(ndim)


def dims_from_hlo(hlo_sharding, jmesh, ndim: int):
    """Per dimension, the mesh axes an XLA ``HloSharding`` splits it over; None when it is
    no named sharding of ``jmesh``."""
    from jax._src.sharding_impls import parse_flatten_op_sharding

    try:
        (spec,) = parse_flatten_op_sharding(hlo_sharding, jmesh)
    except Exception:
        return None
    dims = []
    for entry in tuple(spec)[:ndim]:
        if entry is None:
            dims.append(())
        elif isinstance(entry, tuple):
            dims.append(tuple(entry))
        else:
            dims.append((entry,))
    if len(tuple(spec)) > ndim:
        return None
    dims.extend(() for _ in range(ndim - len(dims)))
    return tuple(dims)


def index_map(jax_sharding, shape):
    """{device: index tuple} of every device's slice of a global array of ``shape``."""
    return jax_sharding.addressable_devices_indices_map(tuple(shape))


def put_sharded(array: np.ndarray, jax_sharding):
    """One global device array: each device gets only its slice of ``array``."""
    from jax._src import core
    from jax._src.lib import xla_client as xc

    indices = index_map(jax_sharding, array.shape)
    aval = core.ShapedArray(array.shape, array.dtype)
    shards = [_contiguous(np.asarray(array[i])) for i in indices.values()]
    kwargs = {"enable_x64": True} if array.dtype.itemsize == 8 else {}
    return xc.batched_device_put(aval, jax_sharding, shards, list(indices.keys()), **kwargs)


def _contiguous(shard: np.ndarray) -> np.ndarray:
    # (np.ascontiguousarray would turn a 0-d shard into shape (1,))
    return shard if shard.flags.c_contiguous else shard.copy()


def buffer_sharding(buffer):
    return getattr(buffer, "sharding", None)


def make_spmd_executor(executable, out_shapes_dtypes, out_jax_shardings):
    """``run(buffers) -> buffers``: execute on every device of the mesh, returning global
    arrays laid out as ``out_jax_shardings``."""
    handlers = [
        result_handler(_jax_aval(s, d), sharding)
        for (s, d), sharding in zip(out_shapes_dtypes, out_jax_shardings, strict=True)
    ]
    execute_sharded = executable.execute_sharded
    if len(executable.local_devices()) == 1 and all(len(s.device_set) == 1 for s in out_jax_shardings):
        # A one-device mesh: jaxlib 0.10.2's consume_with_handlers fails on a one-partition
        # executable ("Wrong number of shards: 0"); build the global arrays from the shards.
        import jax

        def run_one(buffers):
            results = execute_sharded(buffers).disassemble_into_single_device_arrays()
            return [
                jax.make_array_from_single_device_arrays(tuple(s), sharding, shards)
                for (s, _), sharding, shards in zip(out_shapes_dtypes, out_jax_shardings, results, strict=True)
            ]

        return run_one

    def run(buffers):
        return execute_sharded(buffers).consume_with_handlers(handlers)

    return run


# ---------------------------------------------------------------------------------------
# Inspection (hlotrace.distributed.inspect)
# ---------------------------------------------------------------------------------------


def mesh_axes_of(jax_sharding):
    """((axis name, size), ...) of a jax ``NamedSharding``'s mesh, else None."""
    mesh = getattr(jax_sharding, "mesh", None)
    if mesh is None:
        return None
    return tuple((str(name), int(size)) for name, size in zip(mesh.axis_names, mesh.devices.shape, strict=True))


def shard_bytes(buffer) -> list[tuple[int, int]]:
    """(device id, bytes) of every shard of a device array (a one-device array: one)."""
    return [(int(shard.device.id), int(shard.data.nbytes)) for shard in buffer.addressable_shards]
