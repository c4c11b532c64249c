"""Compiling StableHLO text: the in-process executable cache, and :func:`load_or_compile`,
the one sequence (disk cache, else XLA, then stored on disk) behind every compile -- one
device (:func:`compile`), a tiered first call's two executables (:mod:`.tiered`) and a mesh
(:mod:`.spmd`). What a module compiles for is a :class:`Target`.
"""

from __future__ import annotations

import collections
import hashlib
import time

import hlotrace.runtime.cache as cache
import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace.errors import BackendError
from hlotrace.metrics import COUNTS, count
from hlotrace.runtime.client import client, default_device, platform_name
from hlotrace.runtime.execute import Executable, make_executable

# The most recently used executables (xla_trace keeps its own). Bounded: a process that
# compiles thousands of modules (the fuzzer) otherwise runs out of memory maps for their
# code: LLVM then fails with "Cannot allocate memory" and the process dies.
COMPILE_CACHE_SIZE = 256
EXECUTABLES: collections.OrderedDict[tuple, object] = collections.OrderedDict()
_BARRIER = "stablehlo.optimization_barrier"
_library_versions: dict = {}


def _nothing_in_background(key):
    return None


# A slot that runtime.tiered fills when it is imported (it imports this module, never the
# reverse): ``in_background(key)`` is the optimized executable a tiered first call compiles
# in the background for the in-process cache key ``key``, waited for; None when none is (or
# that compile failed).
in_background = _nothing_in_background


class Target:
    """What a module compiles for: one device (``fast``: XLA:CPU's quick options, for a tiered
    first call) or every device of a mesh (``spmd_options``: jaxlib_spmd's compile options,
    which hold the device assignment)."""

    __slots__ = ("devices", "disabled_xla_passes", "fast", "pjrt", "spmd_options")

    def __init__(self, pjrt, devices, disabled_xla_passes=(), *, fast: bool = False, spmd_options=None):
        self.pjrt = pjrt
        self.devices = tuple(devices)
        self.disabled_xla_passes = tuple(disabled_xla_passes)
        self.fast = fast
        self.spmd_options = spmd_options

    @property
    def what(self) -> str:
        return "module" if self.spmd_options is None else "SPMD module"

    def disk_cacheable(self) -> bool:
        """Whether the disk cache may hold it: not a mesh spanning processes (every process
        must build its part of one program)."""
        if self.spmd_options is None:
            return True
        return len({jaxlib_dist.process_index_of(d) for d in self.devices}) == 1

    def key_fields(self, module_text: str, in_avals, out_avals) -> dict:
        """The persistent cache's key fields for compiling ``module_text`` here."""
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

        if self.spmd_options is None:
            options = jaxlib_compat.compile_options_fingerprint(self.disabled_xla_passes, self.fast)
        else:
            import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

            options = jaxlib_spmd.options_fingerprint(self.spmd_options)
        if not _library_versions:
            _library_versions.update(jaxlib_compat.library_versions())
        return cache.key_fields(
            module_text,
            in_avals,
            out_avals,
            platform=jaxlib_compat.client_platform(self.pjrt),
            platform_version=jaxlib_compat.platform_version(self.pjrt),
            device_kind=jaxlib_compat.device_kind(self.devices[0]),
            device_count=len(self.devices),
            versions=dict(_library_versions),
            compile_options=options,
        )

    def compile(self, module_text: str):
        """The loaded executable from XLA (jaxlib's exception when it fails)."""
        if self.spmd_options is None:
            import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

            return jaxlib_compat.compile_module(
                self.pjrt, module_text, self.devices[0], self.disabled_xla_passes, fast=self.fast
            )
        import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

        return jaxlib_spmd.compile_spmd(self.pjrt, module_text, self.devices, self.spmd_options)

    def deserialize(self, data: bytes):
        """The loaded executable from the disk cache's bytes (jaxlib's exception when refused)."""
        if self.spmd_options is None:
            import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

            return jaxlib_compat.deserialize_executable(
                self.pjrt, data, self.devices[0], self.disabled_xla_passes, self.fast
            )
        import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

        return jaxlib_spmd.deserialize_spmd(self.pjrt, data, self.devices, self.spmd_options)


def module_fingerprint(module_text: str) -> str:
    return hashlib.sha256(module_text.encode()).hexdigest()


# Which metrics a compile adds to: a program's, or a one-op executable of the device eager
# engine (whose count is the engine's own ``eager_compiles``).
PROGRAM_COUNTERS = ("compiles", "compile_seconds")
EAGER_COUNTERS = (None, "eager_compile_seconds")


def compile(  # noqa: A001  (DESIGN.md names it runtime.compile)
    module_text: str,
    in_avals,
    out_avals,
    *,
    platform: str | None = None,
    disabled_xla_passes: tuple[str, ...] = (),
    spmd=None,
    eager: bool = False,
) -> Executable:
    """Compile StableHLO text (cached by fingerprint, avals, device and options): from the
    in-process cache, else from the persistent cache on disk (``hlotrace.runtime.cache``),
    else by XLA (and then stored on disk). ``spmd``: a plan for many devices (see
    :mod:`hlotrace.runtime.spmd`); the result is then an ``SpmdExecutable`` for its mesh.
    ``eager``: a one-op executable of the device eager engine, whose XLA time is counted in
    ``eager_compile_seconds`` instead of ``compiles``/``compile_seconds`` (the programs').

    >>> exe = compile(text, [Aval((4,), f32)], [Aval((4,), f32)])
    >>> exe.run([exe.to_device(0, np.ones(4, np.float32))])
    """
    if spmd is not None:  # many devices: hlotrace.distributed's plan (mesh, shardings)
        import hlotrace.runtime.spmd as spmd_runtime  # cycle: runtime.spmd imports this module

        counters = EAGER_COUNTERS if eager else PROGRAM_COUNTERS
        return spmd_runtime.compile_spmd(module_text, in_avals, out_avals, spmd, disabled_xla_passes, counters)
    device = default_device(platform)
    disabled_xla_passes = passes_to_disable(module_text, platform, disabled_xla_passes)
    key = cache_key(module_text, in_avals, out_avals, device, disabled_xla_passes)
    hit = cached(key)
    if hit is not None:
        return hit
    exe = in_background(key)  # compiling in the background (a tiered first call): wait for it
    if exe is not None:
        return exe
    target = Target(client(platform), (device,), disabled_xla_passes)
    counters = EAGER_COUNTERS if eager else PROGRAM_COUNTERS
    loaded, seconds, from_disk = load_or_compile(target, module_text, in_avals, out_avals, counters=counters)
    return keep(key, make_executable(loaded, device, in_avals, out_avals, seconds, from_disk))


def passes_to_disable(module_text: str, platform, disabled_xla_passes: tuple[str, ...], pjrt=None) -> tuple[str, ...]:
    """``disabled_xla_passes`` and the XLA passes a module needs off on the client ``pjrt``
    (else ``platform``'s: a name, or None for the default client)."""
    if _BARRIER in module_text and "cse_barrier_expander" not in disabled_xla_passes:
        if pjrt is not None:
            import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

            on_cpu = jaxlib_compat.client_platform(pjrt) == "cpu"
        else:
            on_cpu = platform_name(platform) == "cpu"
        if on_cpu:
            # XLA:CPU expands optimization barriers right after its first CSE, which then
            # merges rematerialized ops back into the forward pass: keep the barriers.
            return (*disabled_xla_passes, "cse_barrier_expander")
    return disabled_xla_passes


def cache_key(module_text: str, in_avals, out_avals, device, disabled_xla_passes) -> tuple:
    """The in-process cache's key of a one-device executable."""
    return (module_fingerprint(module_text), tuple(in_avals), tuple(out_avals), str(device), disabled_xla_passes)


def cached(key, executables=None):
    """The in-process cache's executable for ``key`` (a hit counted), else None (a miss counted)."""
    executables = EXECUTABLES if executables is None else executables
    hit = executables.get(key)
    if hit is not None:
        COUNTS["memory_cache_hits"] += 1
        executables.move_to_end(key)
        return hit
    count("memory_cache_misses")
    return None


def keep(key, exe, executables=None, size: int | None = None):
    """Put ``exe`` in the bounded in-process cache under ``key``; returns it."""
    executables = EXECUTABLES if executables is None else executables
    size = COMPILE_CACHE_SIZE if size is None else size
    executables[key] = exe
    while len(executables) > size:
        executables.popitem(last=False)
    return exe


def disk_cache_key(pjrt, module_text: str, in_avals, out_avals, device, disabled_xla_passes=(), fast=False) -> dict:
    """The persistent cache's key fields for compiling ``module_text`` on one ``device``."""
    return Target(pjrt, (device,), disabled_xla_passes, fast=fast).key_fields(module_text, in_avals, out_avals)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_or_compile(target: Target, module_text: str, in_avals, out_avals, *, counters=PROGRAM_COUNTERS):
    """(loaded executable, seconds, whether it came from the disk cache): from the disk
    cache, else compiled by XLA (counted under ``counters``) and stored there."""
    fields, hit = load_from_disk(target, module_text, in_avals, out_avals)
    if hit is not None:
        return (*hit, True)
    loaded, seconds = compile_now(target, module_text)
    count_and_store(target, loaded, seconds, fields, counters)
    return loaded, seconds, False


def load_from_disk(target: Target, module_text: str, in_avals, out_avals):
    """(the disk cache's key fields, or None when it is off for ``target``; (loaded, seconds)
    on a hit, else None)."""
    if not cache.enabled() or not target.disk_cacheable():
        return None, None
    fields = target.key_fields(module_text, in_avals, out_avals)
    data = cache.load(fields)
    if data is not None:
        start = time.perf_counter()
        try:
            loaded = target.deserialize(data)
        except Exception as exc:  # an entry this XLA refuses: recompile it
            cache.reject(fields, f"XLA could not load it: {first_line(exc)}")
        else:
            seconds = time.perf_counter() - start
            cache.loaded(fields)
            count("disk_cache_hits")
            count("disk_cache_load_seconds", seconds)
            return fields, (loaded, seconds)
    count("disk_cache_misses")
    return fields, None


def compile_now(target: Target, module_text: str):
    """(loaded executable, seconds) from XLA; nothing counted (a background thread calls it)."""
    start = time.perf_counter()
    try:
        loaded = target.compile(module_text)
    except Exception as exc:  # XLA reports compile failures as plain RuntimeError/XlaRuntimeError
        raise BackendError(f"XLA failed to compile the {target.what}: {first_line(exc)}") from exc
    return loaded, time.perf_counter() - start


def count_and_store(target: Target, loaded, seconds: float, fields, counters=PROGRAM_COUNTERS) -> None:
    """Count a compile (``counters``: the names of its count, None for none, and of its
    seconds) and store it in the disk cache (``fields``: its key, or None when it is off)."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    if counters[0] is not None:
        count(counters[0])
    count(counters[1], seconds)
    if fields is not None:
        try:
            data = jaxlib_compat.serialize_executable(loaded)
        except Exception as exc:  # some executables may not serialize on some platforms
            what = "an executable" if target.spmd_options is None else "an SPMD executable"
            cache.warn_once("serialize", f"{what} could not be serialized ({first_line(exc)}); not cached")
        else:
            cache.store(fields, data)
