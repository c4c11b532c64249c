"""Compiling and running one module on many devices through XLA's SPMD partitioner.

The caller (:mod:`hlotrace.distributed.compile`) hands :func:`compile_spmd` a *plan*: any
object with ``devices`` (the mesh's devices, flattened in mesh order), ``mesh_shape``,
``axis_names``, ``in_dims`` (per argument, per dimension, the mesh axes it is split over)
and ``key`` (hashable: everything above). The module text already carries the Shardy
annotations; this module sets the compile options, reads back the shardings XLA settled
on, and gives an :class:`SpmdExecutable` whose ``run`` checks every argument's per-device
layout before ``execute_sharded`` (a buffer of the wrong per-device shape crashes the
process inside PJRT instead of raising) and re-places the ones that differ.

Placements are jax ``NamedSharding`` objects, one object per (devices, mesh, dims) made by
:func:`jax_sharding`, so that the per-call check is mostly an identity test.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field

import numpy as np

import hlotrace.runtime.compiler as compiler
import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace import spmd_hooks
from hlotrace.errors import BackendError
from hlotrace.metrics import COUNTS, count
from hlotrace.runtime.execute import CompiledQueries

_JAX_MESHES: dict = {}
_JAX_SHARDINGS: dict = {}
# id(jax sharding) -> (devices, mesh shape, axis names, dims), for every sharding object
# made by jax_sharding (kept alive in _JAX_SHARDINGS, so the ids stay theirs).
_PLACEMENT_OF: dict = {}


def jax_sharding(devices: tuple, mesh_shape: tuple, axis_names: tuple, dims: tuple):
    """The one jax ``NamedSharding`` object for this placement (made on first use)."""
    key = (devices, mesh_shape, axis_names, dims)
    sharding = _JAX_SHARDINGS.get(key)
    if sharding is None:
        import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

        mesh_key = (devices, mesh_shape, axis_names)
        jmesh = _JAX_MESHES.get(mesh_key)
        if jmesh is None:
            jmesh = _JAX_MESHES[mesh_key] = jaxlib_spmd.jax_mesh(devices, mesh_shape, axis_names)
        sharding = _JAX_SHARDINGS[key] = jaxlib_spmd.jax_named_sharding(jmesh, dims)
        _PLACEMENT_OF[id(sharding)] = key
    return sharding


def placement_of(buffer):
    """(devices, mesh shape, axis names, dims) of a device array placed by this module (or
    returned by an SPMD executable), else None (a single-device buffer)."""
    return _PLACEMENT_OF.get(id(getattr(buffer, "sharding", None)))


def put(array: np.ndarray, sharding):
    """``array`` laid out across the devices of ``sharding`` (each gets only its slice)."""
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    COUNTS["host_to_device_bytes"] += array.nbytes
    return jaxlib_spmd.put_sharded(array, sharding)


@dataclass
class SpmdExecutable(CompiledQueries):
    """A module compiled for every device of a mesh (same interface as ``Executable``; its
    ``hlo_text`` is the partitioned per-device HLO, collectives included, and its memory plan
    is per device)."""

    loaded: object
    devices: tuple
    in_avals: list
    out_avals: list
    compile_seconds: float
    in_shardings: list  # jax NamedSharding per argument (what the executable expects)
    out_shardings: list  # jax NamedSharding per result (what XLA chose)
    out_dims: list  # per result, per dimension, the mesh axes it is split over
    run: object = field(repr=False, default=None)
    from_disk_cache: bool = False

    @property
    def device(self):
        return self.devices[0]

    def to_device(self, index: int, array: np.ndarray):
        """Lay argument ``index``'s host array out across the mesh as the executable expects."""
        return put(np.asarray(array), self.in_shardings[index])


def _checked_run(execute, in_shardings, in_avals):
    """``run(buffers)``: every buffer whose layout is not the executable's is re-placed
    first (gathered to the host and laid out again), so PJRT never sees a wrong shard."""
    expected = [(s, tuple(a.shape), np.dtype(a.dtype)) for s, a in zip(in_shardings, in_avals, strict=True)]

    def run(buffers):
        COUNTS["executions"] += 1
        checked = None
        for i, buffer in enumerate(buffers):
            sharding, shape, dtype = expected[i]
            actual = getattr(buffer, "sharding", None)
            if actual is sharding and buffer.shape == shape:
                continue
            if actual != sharding or buffer.shape != shape or buffer.dtype != dtype:
                if not jaxlib_dist.is_fully_addressable(buffer):
                    raise BackendError(
                        f"argument {i} of the SPMD executable spans several processes laid out otherwise than the "
                        f"executable expects ({actual} vs {sharding}); no process can re-place it alone: place it "
                        f"with dist.make_global(part, mesh, spec) as the step's inputs are"
                    )
                array = np.asarray(buffer)
                if array.shape != shape or array.dtype != dtype:
                    raise BackendError(
                        f"argument {i} of the SPMD executable is {array.dtype}{list(array.shape)}, expected "
                        f"{dtype}{list(shape)}"
                    )
                if checked is None:
                    checked = list(buffers)
                checked[i] = put(array, sharding)
                count("spmd_replacements")
        return execute(checked if checked is not None else buffers)

    return run


# Modules XLA's SPMD pipeline kills the process on (SIGFPE) instead of raising: refused
# before compiling, with the reason (found by tests/distributed/test_spmd_differential.py).
_ZERO_DIM = re.compile(r"tensor<(?:\d+x)*0x")
_GROUPED = re.compile(r"(?:feature|batch)_group_count = ([2-9]|\d\d+) ")


def _refuse_known_crashes(module_text: str) -> None:
    for line in module_text.splitlines():
        if "stablehlo.convolution" in line and _GROUPED.search(line) and _ZERO_DIM.search(line):
            raise BackendError(
                "XLA's SPMD partitioner crashes the process (SIGFPE, jaxlib 0.10.2) on a grouped convolution "
                f"with an empty operand: {line.strip()[:200]}; hlotrace refuses to compile it on a mesh "
                "(run it on one device, or give it non-empty inputs)"
            )


COMPILE_CACHE_SIZE = 64
_compile_cache: collections.OrderedDict = collections.OrderedDict()


def compile_spmd(module_text: str, in_avals, out_avals, plan, disabled_xla_passes: tuple[str, ...] = (), counters=None):
    """Compile ``module_text`` (Shardy-annotated) for the plan's mesh; cached in memory by
    (module, avals, plan, options) and on disk like one-device executables (the key adds the
    device count and the serialized SPMD compile options, which hold the device assignment)."""
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    devices = tuple(plan.devices)
    pjrt = jaxlib_spmd.device_client(devices[0])
    disabled_xla_passes = compiler.passes_to_disable(module_text, None, disabled_xla_passes, pjrt=pjrt)
    key = (compiler.module_fingerprint(module_text), tuple(in_avals), tuple(out_avals), plan.key, disabled_xla_passes)
    hit = compiler.cached(key, _compile_cache)
    if hit is not None:
        return hit
    _refuse_known_crashes(module_text)
    options = jaxlib_spmd.spmd_compile_options([jaxlib_spmd.device_id(d) for d in devices], disabled_xla_passes)
    target = compiler.Target(pjrt, devices, disabled_xla_passes, spmd_options=options)
    counters = compiler.PROGRAM_COUNTERS if counters is None else counters  # EAGER_COUNTERS: a one-op one
    loaded, seconds, from_disk = compiler.load_or_compile(target, module_text, in_avals, out_avals, counters=counters)
    exe = _wrap(loaded, plan, devices, in_avals, out_avals, seconds, from_disk)
    return compiler.keep(key, exe, _compile_cache, COMPILE_CACHE_SIZE)


def _across_processes(execute):
    """``execute`` whose failure names the process that stopped (a collective between
    processes fails when a peer exits: "Gloo all-reduce failed: Connection closed by peer")."""

    def run(buffers):
        try:
            return execute(buffers)
        except Exception as exc:
            peer = spmd_hooks.peer_failure()
            raise BackendError(
                f"the SPMD step failed while exchanging data with the other processes ({compiler.first_line(exc)}); "
                + (peer or "another process of the job probably stopped: see its output")
            ) from exc

    return run


def _wrap(loaded, plan, devices, in_avals, out_avals, seconds, from_disk) -> SpmdExecutable:
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    mesh = (devices, tuple(plan.mesh_shape), tuple(plan.axis_names))
    jmesh_sharding = jax_sharding(*mesh, ())
    jmesh = jmesh_sharding.mesh
    in_shardings = []
    for i, (hlo, aval) in enumerate(zip(jaxlib_spmd.parameter_shardings(loaded, len(in_avals)), in_avals, strict=True)):
        dims = tuple(plan.in_dims[i])
        wanted = jax_sharding(*mesh, dims)
        if jaxlib_spmd.hlo_sharding_of(wanted, len(aval.shape)) != hlo:
            # XLA laid the argument out otherwise than annotated: follow the executable.
            dims = jaxlib_spmd.dims_from_hlo(hlo, jmesh, len(aval.shape))
            if dims is None:
                raise BackendError(f"XLA chose a layout for argument {i} ({hlo}) that is no sharding of the mesh")
            wanted = jax_sharding(*mesh, dims)
        in_shardings.append(wanted)
    out_shardings, out_dims = [], []
    for i, (hlo, aval) in enumerate(zip(jaxlib_spmd.output_shardings(loaded, len(out_avals)), out_avals, strict=True)):
        dims = jaxlib_spmd.dims_from_hlo(hlo, jmesh, len(aval.shape))
        if dims is None:
            raise BackendError(f"XLA chose a layout for result {i} ({hlo}) that is no sharding of the mesh")
        out_dims.append(dims)
        out_shardings.append(jax_sharding(*mesh, dims))
    execute = jaxlib_spmd.make_spmd_executor(loaded, [(a.shape, a.dtype) for a in out_avals], out_shardings)
    if len({jaxlib_dist.process_index_of(d) for d in devices}) > 1:
        execute = _across_processes(execute)
    exe = SpmdExecutable(
        loaded, devices, list(in_avals), list(out_avals), seconds, in_shardings, out_shardings, out_dims
    )
    exe.run = _checked_run(execute, in_shardings, in_avals)
    exe.from_disk_cache = from_disk
    return exe
