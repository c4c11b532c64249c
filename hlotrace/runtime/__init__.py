"""Runtime: choose a PJRT client, compile StableHLO, execute with buffers kept on device.

``HLOTRACE_PLATFORM=cpu|cuda`` forces a platform; by default CUDA is used when its PJRT
plugin and a GPU are present, else the CPU. ``compile`` looks in an in-process cache, then
in the persistent compile cache on disk (:mod:`hlotrace.runtime.cache`), then compiles.
Counters for both caches, compiles, executions and transfers: :mod:`hlotrace.metrics`.
"""

from __future__ import annotations

import collections
import hashlib
import os
import time
from dataclasses import dataclass, field

import numpy as np

from hlotrace.errors import BackendError, HlotraceError
from hlotrace.metrics import COUNTS, count

_PLATFORM_ENV = "HLOTRACE_PLATFORM"
CPU_DEVICES_ENV = "HLOTRACE_CPU_DEVICES"
_client_cache: dict[str, object] = {}
_cpu_devices_setting: list = []  # $HLOTRACE_CPU_DEVICES as it was when the CPU client was made
_cpu_clients: dict[int, object] = {}  # extra CPU clients by device count (cpu_client)
# (distributed runtime client, process id, process count) once hlotrace.distributed.initialize
# joined a job of several processes: the CPU client is then made over every process's devices.
_distributed: list = []


def set_distributed(distributed_client, process_id: int, num_processes: int) -> None:
    """Make the CPU client (not created yet) a client of this multi-process job."""
    if "cpu" in _client_cache:
        raise HlotraceError("the CPU client already exists: hlotrace.distributed.initialize() must come first")
    _distributed[:] = [distributed_client, int(process_id), int(num_processes)]


def cpu_client_exists() -> bool:
    return "cpu" in _client_cache


def _cpu_devices_requested() -> int | None:
    text = os.environ.get(CPU_DEVICES_ENV, "").strip()
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise HlotraceError(f"{CPU_DEVICES_ENV}={text!r}: expected a positive number of CPU devices")
    return n


def _check_cpu_devices_unchanged() -> None:
    now = os.environ.get(CPU_DEVICES_ENV, "").strip()
    if _cpu_devices_setting and now != _cpu_devices_setting[0]:
        before = _cpu_devices_setting[0]
        count = len(_client_cache["cpu"].local_devices())
        raise HlotraceError(
            f"{CPU_DEVICES_ENV} changed from {before or '(unset)'!r} to {now or '(unset)'!r} after hlotrace's CPU "
            f"client was created with {count} device(s); it is read once, when the client is made: set it "
            f"before the first hlotrace computation (or in the environment of a new process)"
        )


def _load_client(platform: str):
    from hlotrace.runtime import jaxlib_compat

    if platform not in _client_cache:
        if platform == "cpu":
            # HLOTRACE_CPU_DEVICES=N: a CPU client with N devices (hlotrace.distributed).
            requested = _cpu_devices_requested()
            if _distributed:
                from hlotrace.runtime import jaxlib_dist

                _client_cache[platform] = jaxlib_dist.make_cpu_client(*_distributed, requested)
            elif requested is None:
                _client_cache[platform] = jaxlib_compat.get_client(platform)
            else:
                from hlotrace.runtime import jaxlib_spmd

                _client_cache[platform] = _cpu_clients[requested] = jaxlib_spmd.make_cpu_client(requested)
            _cpu_devices_setting[:] = [os.environ.get(CPU_DEVICES_ENV, "").strip()]
        else:
            _client_cache[platform] = jaxlib_compat.get_client(platform)
    elif platform == "cpu":
        _check_cpu_devices_unchanged()
    return _client_cache[platform]


def cpu_client(num_devices: int):
    """A CPU client with exactly ``num_devices`` devices: hlotrace's own CPU client when it
    has that many, else a separate one made for that count (kept for the process). Tests use
    it when hlotrace's client was created before ``HLOTRACE_CPU_DEVICES`` could apply."""
    own = _client_cache.get("cpu")
    if own is not None and len(own.local_devices()) == num_devices:
        return own
    if num_devices not in _cpu_clients:
        from hlotrace.runtime import jaxlib_spmd

        _cpu_clients[num_devices] = jaxlib_spmd.make_cpu_client(num_devices)
    return _cpu_clients[num_devices]


def client(platform: str | None = None):
    """The PJRT client: ``platform`` or $HLOTRACE_PLATFORM, else CUDA if present, else CPU."""
    requested = platform or os.environ.get(_PLATFORM_ENV, "").strip().lower() or None
    if requested is not None:
        if requested == "gpu":
            requested = "cuda"
        if requested not in ("cpu", "cuda"):
            from hlotrace.runtime import plugins

            path = plugins.plugin_path(requested)
            if path is None:
                raise BackendError(
                    f"{_PLATFORM_ENV}={requested!r}: expected 'cpu', 'cuda', or a PJRT plugin's name with its "
                    f"library in ${plugins.PLUGIN_ENV} (or hlotrace.runtime.register_plugin(name, path))"
                )
            if requested not in _client_cache:
                _client_cache[requested] = plugins.load(requested, path)
            return _client_cache[requested]
        if _distributed and requested != "cpu":
            raise BackendError(
                f"{_PLATFORM_ENV}={requested!r}: a job of several processes (hlotrace.distributed.initialize) "
                f"runs on the CPU client with gloo collectives; CUDA clients with NCCL are not supported yet"
            )
        try:
            return _load_client(requested)
        except RuntimeError as exc:
            raise BackendError(f"PJRT platform {requested!r} is not available here: {exc}") from None
    if _distributed:  # several processes: their shared (CPU, gloo) client
        return _load_client("cpu")
    try:
        return _load_client("cuda")
    except RuntimeError:
        return _load_client("cpu")


def default_device(platform: str | None = None):
    from hlotrace.runtime import jaxlib_compat

    return jaxlib_compat.client_devices(client(platform))[0]


def platform_name(platform: str | None = None) -> str:
    from hlotrace.runtime import jaxlib_compat

    return jaxlib_compat.client_platform(client(platform))


class CompiledQueries:
    """What XLA says about a loaded executable (``self.loaded``): its optimized HLO (the
    per-device, partitioned program for a mesh), memory plan and cost estimate."""

    def hlo_text(self) -> str:
        from hlotrace.runtime import jaxlib_compat

        return jaxlib_compat.compiled_hlo_text(self.loaded)

    def memory_stats(self):
        from hlotrace.runtime import jaxlib_compat

        return jaxlib_compat.compiled_memory_stats(self.loaded)

    def cost_analysis(self) -> dict:
        from hlotrace.runtime import jaxlib_compat

        return jaxlib_compat.cost_analysis(self.loaded)

    def wrapping_runner(self, wrap, single: bool = False):
        """``run`` with every output passed through ``wrap`` (the only one, alone, with
        ``single``); ``Executable`` fuses it into its executor."""
        run = self.run

        def run_wrapped(buffers):
            outputs = run(buffers)
            return wrap(outputs[0]) if single else list(map(wrap, outputs))

        return run_wrapped


@dataclass
class Executable(CompiledQueries):
    """A compiled module bound to one device, with its fast per-call path.

    ``run(buffers)`` takes device buffers in the module's argument order and returns the
    output buffers (still on the device).
    """

    loaded: object
    device: object
    in_avals: list
    out_avals: list
    compile_seconds: float  # compiling, or loading it from the disk cache
    run: object = field(repr=False, default=None)
    _puts: list = field(repr=False, default_factory=list)
    from_disk_cache: bool = False

    def to_device(self, index: int, array: np.ndarray):
        """Copy argument ``index``'s host array to this executable's device."""
        COUNTS["host_to_device_bytes"] += array.nbytes
        return self._puts[index](array)

    def wrapping_runner(self, wrap, single: bool = False):
        """``run`` whose outputs go through ``wrap`` (``tensor.from_device_buffer``) in the same
        closure: a list of them, or with ``single`` the only output alone. One Python call
        per execution instead of three (counted in ``executions`` like ``run``)."""
        from hlotrace.runtime import jaxlib_compat

        shapes = [(a.shape, a.dtype) for a in self.out_avals]
        return jaxlib_compat.make_executor(self.loaded, shapes, self.device, counts=COUNTS, wrap=wrap, single=single)


# The most recently used executables (xla_trace keeps its own). Bounded: a process that
# compiles thousands of modules (the fuzzer) otherwise runs out of memory maps for their
# code: LLVM then fails with "Cannot allocate memory" and the process dies.
COMPILE_CACHE_SIZE = 256
_compile_cache: collections.OrderedDict[tuple, Executable] = collections.OrderedDict()
_BARRIER = "stablehlo.optimization_barrier"


def module_fingerprint(module_text: str) -> str:
    return hashlib.sha256(module_text.encode()).hexdigest()


def compile(  # noqa: A001  (DESIGN.md names it runtime.compile)
    module_text: str,
    in_avals,
    out_avals,
    *,
    platform: str | None = None,
    disabled_xla_passes: tuple[str, ...] = (),
    spmd=None,
) -> Executable:
    """Compile StableHLO text (cached by fingerprint, avals, device and options): from the
    in-process cache, else from the persistent cache on disk (``hlotrace.runtime.cache``),
    else by XLA (and then stored on disk). ``spmd``: a plan for many devices (see
    :mod:`hlotrace.runtime.spmd`); the result is then an ``SpmdExecutable`` for its mesh.

    >>> exe = compile(text, [Aval((4,), f32)], [Aval((4,), f32)])
    >>> exe.run([exe.to_device(0, np.ones(4, np.float32))])
    """
    if spmd is not None:  # many devices: hlotrace.distributed's plan (mesh, shardings)
        from hlotrace.runtime import spmd as spmd_runtime

        return spmd_runtime.compile_spmd(module_text, in_avals, out_avals, spmd, disabled_xla_passes)
    device = default_device(platform)
    disabled_xla_passes = _passes_to_disable(module_text, platform, disabled_xla_passes)
    key = _cache_key(module_text, in_avals, out_avals, device, disabled_xla_passes)
    cached = _cached(key)
    if cached is not None:
        return cached
    from hlotrace.runtime import tiered

    if key in tiered.pending:  # compiling in the background (a tiered first call): wait for it
        exe = tiered.pending[key].result()
        if exe is not None:
            return exe
    loaded, seconds, from_disk = _load_or_compile(
        client(platform), module_text, in_avals, out_avals, device, disabled_xla_passes
    )
    return _keep(key, _executable(loaded, device, in_avals, out_avals, seconds, from_disk))


def _passes_to_disable(module_text: str, platform, disabled_xla_passes: tuple[str, ...]) -> tuple[str, ...]:
    from hlotrace.runtime import jaxlib_compat

    if _BARRIER in module_text and "cse_barrier_expander" not in disabled_xla_passes:
        if jaxlib_compat.client_platform(client(platform)) == "cpu":
            # XLA:CPU expands optimization barriers right after its first CSE, which then
            # merges rematerialized ops back into the forward pass: keep the barriers.
            return (*disabled_xla_passes, "cse_barrier_expander")
    return disabled_xla_passes


def _cache_key(module_text: str, in_avals, out_avals, device, disabled_xla_passes) -> tuple:
    return (module_fingerprint(module_text), tuple(in_avals), tuple(out_avals), str(device), disabled_xla_passes)


def _cached(key):
    """The in-process cache's executable for ``key`` (a hit counted), else None (a miss counted)."""
    cached = _compile_cache.get(key)
    if cached is not None:
        COUNTS["memory_cache_hits"] += 1
        _compile_cache.move_to_end(key)
        return cached
    count("memory_cache_misses")
    return None


def _executable(loaded, device, in_avals, out_avals, seconds: float, from_disk: bool = False) -> Executable:
    """An Executable around a loaded executable, with its per-call paths."""
    from hlotrace.runtime import jaxlib_compat

    exe = Executable(loaded, device, list(in_avals), list(out_avals), seconds, from_disk_cache=from_disk)
    shapes = [(a.shape, a.dtype) for a in out_avals]
    exe.run = jaxlib_compat.make_executor(loaded, shapes, device, counts=COUNTS)  # counts ``executions``
    exe._puts = [jaxlib_compat.make_host_to_device(a.shape, a.dtype, device) for a in in_avals]
    return exe


def _keep(key, exe: Executable) -> Executable:
    """Put ``exe`` in the bounded in-process cache under ``key``; returns it."""
    _compile_cache[key] = exe
    while len(_compile_cache) > COMPILE_CACHE_SIZE:
        _compile_cache.popitem(last=False)
    return exe


_library_versions: dict = {}


def disk_cache_key(pjrt, module_text: str, in_avals, out_avals, device, disabled_xla_passes=(), fast=False) -> dict:
    """The persistent cache's key fields for compiling ``module_text`` on ``device``."""
    from hlotrace.runtime import cache, jaxlib_compat

    if not _library_versions:
        _library_versions.update(jaxlib_compat.library_versions())
    return cache.key_fields(
        module_text,
        in_avals,
        out_avals,
        platform=jaxlib_compat.client_platform(pjrt),
        platform_version=jaxlib_compat.platform_version(pjrt),
        device_kind=jaxlib_compat.device_kind(device),
        device_count=1,
        versions=dict(_library_versions),
        compile_options=jaxlib_compat.compile_options_fingerprint(disabled_xla_passes, fast),
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _load_or_compile(pjrt, module_text, in_avals, out_avals, device, disabled_xla_passes):
    """(loaded executable, seconds, whether it came from the disk cache)."""
    fields, hit = _load_from_disk(pjrt, module_text, in_avals, out_avals, device, disabled_xla_passes)
    if hit is not None:
        return (*hit, True)
    loaded, seconds = _compile_now(pjrt, module_text, device, disabled_xla_passes)
    _counted_and_stored(loaded, seconds, fields)
    return loaded, seconds, False


def _load_from_disk(pjrt, module_text, in_avals, out_avals, device, disabled_xla_passes, fast=False):
    """(the disk cache's key fields or None when it is off, (loaded, seconds) on a hit else
    None); ``fast``: the quickly compiled executable's entry (hlotrace.runtime.tiered)."""
    from hlotrace.runtime import cache, jaxlib_compat

    if not cache.enabled():
        return None, None
    fields = disk_cache_key(pjrt, module_text, in_avals, out_avals, device, disabled_xla_passes, fast)
    data = cache.load(fields)
    if data is not None:
        start = time.perf_counter()
        try:
            loaded = jaxlib_compat.deserialize_executable(pjrt, data, device, disabled_xla_passes, fast)
        except Exception as exc:  # an entry this XLA refuses: recompile it
            cache.reject(fields, f"XLA could not load it: {_first_line(exc)}")
        else:
            seconds = time.perf_counter() - start
            cache.loaded(fields)
            count("disk_cache_hits")
            count("disk_cache_load_seconds", seconds)
            return fields, (loaded, seconds)
    count("disk_cache_misses")
    return fields, None


def _compile_now(pjrt, module_text, device, disabled_xla_passes, fast: bool = False):
    """(loaded executable, seconds) from XLA; nothing counted (a background thread calls it)."""
    from hlotrace.runtime import jaxlib_compat

    start = time.perf_counter()
    try:
        loaded = jaxlib_compat.compile_module(pjrt, module_text, device, disabled_xla_passes, fast=fast)
    except Exception as exc:  # XLA reports compile failures as plain RuntimeError/XlaRuntimeError
        raise BackendError(f"XLA failed to compile the module: {_first_line(exc)}") from exc
    return loaded, time.perf_counter() - start


def _counted_and_stored(loaded, seconds: float, fields) -> None:
    """Count an optimized compile and store it in the disk cache (``fields``: its key, or
    None when the cache is off)."""
    count("compiles")
    count("compile_seconds", seconds)
    _store(loaded, fields)


def _store(loaded, fields) -> None:
    """Store a loaded executable in the disk cache under ``fields`` (None: the cache is off)."""
    from hlotrace.runtime import cache, jaxlib_compat

    if fields is not None:
        try:
            data = jaxlib_compat.serialize_executable(loaded)
        except Exception as exc:  # some executables may not serialize on some platforms
            cache.warn_once("serialize", f"an executable could not be serialized ({_first_line(exc)}); not cached")
        else:
            cache.store(fields, data)


def register_plugin(name: str, path) -> None:
    """Use the PJRT plugin library at ``path`` as platform ``name`` (see hlotrace.runtime.plugins)."""
    from hlotrace.runtime import plugins

    plugins.register_plugin(name, path)
