"""Runtime: choose a PJRT client, compile StableHLO, execute with buffers kept on device.

``HLOTRACE_PLATFORM=cpu|cuda`` forces a platform; by default CUDA is used when its PJRT
plugin and a GPU are present, else the CPU. ``compile`` looks in an in-process cache, then
in the persistent compile cache on disk (:mod:`hlotrace.runtime.cache`), then compiles.
Counters for both caches, compiles, executions and transfers: :mod:`hlotrace.metrics`.

The modules, by job: :mod:`.client` (client, platform, devices), :mod:`.compiler` (compile,
the in-process cache and ``load_or_compile`` with the disk cache), :mod:`.execute`
(``Executable``: execute, transfers), :mod:`.spmd` (a mesh), :mod:`.tiered` (a first call's
quick executable); jax/jaxlib are called in ``jaxlib_*`` only.
"""

from __future__ import annotations

from hlotrace.runtime.client import (
    CLIENTS,
    CPU_DEVICES_ENV,
    CPU_DEVICES_SETTING,
    client,
    cpu_client,
    cpu_client_exists,
    default_device,
    live_buffer_count,
    platform_name,
    register_plugin,
    set_distributed,
)
from hlotrace.runtime.compiler import (
    Target,
    compile,  # noqa: A004  (DESIGN.md names it runtime.compile)
    disk_cache_key,
    load_or_compile,
    module_fingerprint,
)
from hlotrace.runtime.execute import CompiledQueries, Executable

# The names tests and tools read (never rebound, so these stay the same objects).
_client_cache = CLIENTS
_cpu_devices_setting = CPU_DEVICES_SETTING

__all__ = [
    "CLIENTS",
    "CPU_DEVICES_ENV",
    "CPU_DEVICES_SETTING",
    "CompiledQueries",
    "Executable",
    "Target",
    "client",
    "compile",
    "cpu_client",
    "cpu_client_exists",
    "default_device",
    "disk_cache_key",
    "live_buffer_count",
    "load_or_compile",
    "module_fingerprint",
    "platform_name",
    "register_plugin",
    "set_distributed",
]
