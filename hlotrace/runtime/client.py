"""The PJRT client: which platform, which devices.

``HLOTRACE_PLATFORM=cpu|cuda`` (or a registered plugin's name) forces a platform; by
default CUDA is used when its PJRT plugin and a GPU are present, else the CPU.
``HLOTRACE_CPU_DEVICES=N`` gives the CPU client N devices (read once, when it is made).
"""

from __future__ import annotations

import hlotrace.runtime.jaxlib_dist as jaxlib_dist
import hlotrace.runtime.plugins as plugins
from hlotrace import config
from hlotrace.errors import BackendError, HlotraceError

PLATFORM_ENV = "HLOTRACE_PLATFORM"
CPU_DEVICES_ENV = "HLOTRACE_CPU_DEVICES"
CLIENTS: dict[str, object] = {}  # platform -> its client, made on first use
CPU_DEVICES_SETTING: list = []  # $HLOTRACE_CPU_DEVICES as it was when the CPU client was made
_cpu_clients: dict[int, object] = {}  # extra CPU clients by device count (cpu_client)
# (distributed runtime client, process id, process count) once hlotrace.distributed.initialize
# joined a job of several processes: the CPU client is then made over every process's devices.
_distributed: list = []


def set_distributed(distributed_client, process_id: int, num_processes: int) -> None:
    """Make the CPU client (not created yet) a client of this multi-process job."""
    if "cpu" in CLIENTS:
        raise HlotraceError("the CPU client already exists: hlotrace.distributed.initialize() must come first")
    _distributed[:] = [distributed_client, int(process_id), int(num_processes)]


def cpu_client_exists() -> bool:
    return "cpu" in CLIENTS


def _cpu_devices_text() -> str:
    """$HLOTRACE_CPU_DEVICES as a number's text ("" when unset); a ConfigError when it is not
    a positive number."""
    n = config.get(CPU_DEVICES_ENV)
    return "" if n is None else str(n)


def _check_cpu_devices_unchanged() -> None:
    now = _cpu_devices_text()
    if CPU_DEVICES_SETTING and now != CPU_DEVICES_SETTING[0]:
        before = CPU_DEVICES_SETTING[0]
        count = len(CLIENTS["cpu"].local_devices())
        raise HlotraceError(
            f"{CPU_DEVICES_ENV} changed from {before or '(unset)'!r} to {now or '(unset)'!r} after hlotrace's CPU "
            f"client was created with {count} device(s); it is read once, when the client is made: set it "
            f"before the first hlotrace computation (or in the environment of a new process)"
        )


def _load_client(platform: str):
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    if platform not in CLIENTS:
        if platform == "cpu":
            # HLOTRACE_CPU_DEVICES=N: a CPU client with N devices (hlotrace.distributed).
            requested = config.get(CPU_DEVICES_ENV)
            if _distributed:
                CLIENTS[platform] = jaxlib_dist.make_cpu_client(*_distributed, requested)
            elif requested is None:
                CLIENTS[platform] = jaxlib_compat.get_client(platform)
            else:
                import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

                CLIENTS[platform] = _cpu_clients[requested] = jaxlib_spmd.make_cpu_client(requested)
            CPU_DEVICES_SETTING[:] = [_cpu_devices_text()]
        else:
            CLIENTS[platform] = jaxlib_compat.get_client(platform)
    elif platform == "cpu":
        _check_cpu_devices_unchanged()
    return CLIENTS[platform]


def cpu_client(num_devices: int):
    """A CPU client with exactly ``num_devices`` devices: hlotrace's own CPU client when it
    has that many, else a separate one made for that count (kept for the process). Tests use
    it when hlotrace's client was created before ``HLOTRACE_CPU_DEVICES`` could apply."""
    own = CLIENTS.get("cpu")
    if own is not None and len(own.local_devices()) == num_devices:
        return own
    if num_devices not in _cpu_clients:
        import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

        _cpu_clients[num_devices] = jaxlib_spmd.make_cpu_client(num_devices)
    return _cpu_clients[num_devices]


def client(platform: str | None = None):
    """The PJRT client: ``platform`` or $HLOTRACE_PLATFORM, else CUDA if present, else CPU."""
    requested = platform or config.get(PLATFORM_ENV)
    if requested is not None:
        if requested == "gpu":
            requested = "cuda"
        if requested not in ("cpu", "cuda"):
            path = plugins.plugin_path(requested)
            if path is None:
                raise BackendError(
                    f"{PLATFORM_ENV}={requested!r}: expected 'cpu', 'cuda', or a PJRT plugin's name with its "
                    f"library in ${plugins.PLUGIN_ENV} (or hlotrace.runtime.register_plugin(name, path))"
                )
            if requested not in CLIENTS:
                CLIENTS[requested] = plugins.load(requested, path)
            return CLIENTS[requested]
        if _distributed and requested != "cpu":
            raise BackendError(
                f"{PLATFORM_ENV}={requested!r}: a job of several processes (hlotrace.distributed.initialize) "
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


def live_buffer_count(platform: str | None = None) -> int:
    """How many device arrays the platform's client holds now (leak checks: a loop that frees
    what it made keeps this flat)."""
    return len(client(platform).live_arrays())


def default_device(platform: str | None = None):
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    return jaxlib_compat.client_devices(client(platform))[0]


def platform_name(platform: str | None = None) -> str:
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    return jaxlib_compat.client_platform(client(platform))


def register_plugin(name: str, path) -> None:
    """Use the PJRT plugin library at ``path`` as platform ``name`` (see hlotrace.runtime.plugins)."""
    plugins.register_plugin(name, path)
