"""Process-wide counters: what hlotrace recorded, compiled, cached, ran and moved.

>>> import hlotrace as ht
>>> ht.metrics()["compiles"]      # a dict of every counter
>>> print(ht.metrics_report())    # a short table
>>> from hlotrace.metrics import count, reset_metrics

(``hlotrace.metrics`` is the function ``metrics``; import from the module with ``from
hlotrace.metrics import ...``.)

Counters (all start at 0 and only grow until :func:`reset_metrics`):

``recordings``
    function calls recorded into a trace by ``xla_trace``/``partial_trace``.
``compiles``, ``compile_seconds``
    XLA compilations and the seconds they took (a disk-cache hit is not a compile), the
    optimized compiles a tiered first call ran in the background included.
``fast_compiles``, ``fast_compile_seconds``, ``background_compiles``
    tiered first calls (``first_call="compiled"`` on the CPU, :mod:`hlotrace.runtime.tiered`):
    the quick compiles their first call ran on and the seconds they took, and the optimized
    compiles that ran in the background meanwhile (also counted in ``compiles``).
``memory_cache_hits``, ``memory_cache_misses``
    ``runtime.compile`` lookups in the in-process executable cache.
``disk_cache_hits``, ``disk_cache_misses``, ``disk_cache_errors``, ``disk_cache_load_seconds``
    lookups in the persistent compile cache (``hlotrace.runtime.cache``) after an
    in-process miss; errors are entries that were rejected (corrupted, unloadable) and
    recompiled; the seconds are those spent loading the hits.
``executions``
    executable runs.
``host_to_device_bytes``, ``device_to_host_bytes``
    bytes of arguments copied to a device, and of device results read back by
    ``Tensor.numpy()`` (once per tensor).
``eager_executions``, ``eager_compiles``, ``eager_compile_seconds``, ``eager_cache_hits``, ``eager_evictions``
    the device eager engine (:mod:`hlotrace.engines.device`): op applications it ran, the
    one-op executables it built (compiled or loaded from the disk cache), the seconds XLA
    took compiling them (in the background too: not in ``compiles``/``compile_seconds``,
    which count programs), the applications that found theirs cached, and the executables
    its LRU dropped. ``executions``, the cache lookups and the transfers count theirs too.
``eager_host_fallbacks``
    eager op applications the device engine handed to the NumPy engine: those with an input
    placed on a mesh that spans processes (every process would have to run each eager op in
    step; the global value is computed on the host, its bytes in ``device_to_host_bytes``;
    a one-process mesh runs one-op SPMD executables), and those of an op without a lowering
    rule (warned once per op).
``shape_syncs``
    eager operations whose result's shape depended on a device value (``x[bool_mask]`` with
    the mask on the device): each waited for the device once to read a count (its bytes are
    in ``device_to_host_bytes``). Never counted by compiled programs, which refuse them.

:func:`count` is on the per-call path: one dict increment, no lock (under threads an
increment may be lost; the figures are for diagnosis, not accounting).
"""

from __future__ import annotations

NAMES = (
    "recordings",
    "compiles",
    "compile_seconds",
    "fast_compiles",
    "fast_compile_seconds",
    "background_compiles",
    "memory_cache_hits",
    "memory_cache_misses",
    "disk_cache_hits",
    "disk_cache_misses",
    "disk_cache_errors",
    "disk_cache_load_seconds",
    "executions",
    "host_to_device_bytes",
    "device_to_host_bytes",
    "eager_executions",
    "eager_compiles",
    "eager_compile_seconds",
    "eager_cache_hits",
    "eager_evictions",
    "shape_syncs",
    "eager_host_fallbacks",
)

# Mutated in place, never rebound: hot paths may hold a reference to it.
COUNTS: dict[str, float] = dict.fromkeys(NAMES, 0)


def count(name: str, amount: float = 1) -> None:
    """Add ``amount`` to counter ``name`` (a new name starts at 0)."""
    try:
        COUNTS[name] += amount
    except KeyError:
        COUNTS[name] = amount


def metrics() -> dict[str, float]:
    """A snapshot of every counter, by name (``NAMES`` first, then any others)."""
    return dict(COUNTS)


def reset_metrics() -> None:
    """Set every counter back to 0."""
    for name in list(COUNTS):
        if name in NAMES:
            COUNTS[name] = 0
        else:
            del COUNTS[name]


def _bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def metrics_report() -> str:
    """A short table of the counters (this process, since the last reset)."""
    c = COUNTS
    rows = [
        ("recordings", f"{c['recordings']:.0f}"),
        ("compiles", f"{c['compiles']:.0f} ({c['compile_seconds']:.3f} s)"),
        ("memory cache hits / misses", f"{c['memory_cache_hits']:.0f} / {c['memory_cache_misses']:.0f}"),
        (
            "disk cache hits / misses",
            f"{c['disk_cache_hits']:.0f} / {c['disk_cache_misses']:.0f}"
            + (f" ({c['disk_cache_errors']:.0f} rejected)" if c["disk_cache_errors"] else "")
            + (f" (loading {c['disk_cache_load_seconds']:.3f} s)" if c["disk_cache_hits"] else ""),
        ),
        ("executions", f"{c['executions']:.0f}"),
        ("host -> device", _bytes(c["host_to_device_bytes"])),
        ("device -> host", _bytes(c["device_to_host_bytes"])),
    ]
    if c["fast_compiles"] or c["background_compiles"]:  # tiered first calls (hlotrace.runtime.tiered)
        rows.insert(
            2,
            (
                "quick first-call compiles",
                f"{c['fast_compiles']:.0f} ({c['fast_compile_seconds']:.3f} s; "
                f"{c['background_compiles']:.0f} optimized in the background)",
            ),
        )
    if c["eager_executions"] or c["eager_host_fallbacks"]:  # the device eager engine (hlotrace.engines)
        rows.append(
            (
                "eager ops on the device",
                f"{c['eager_executions']:.0f} ({c['eager_compiles']:.0f} one-op executables, "
                f"{c['eager_compile_seconds']:.3f} s compiling; {c['eager_host_fallbacks']:.0f} on the host)",
            )
        )
    rows += [(name, f"{value:g}") for name, value in c.items() if name not in NAMES]
    width = max(len(name) for name, _ in rows)
    return "\n".join(["hlotrace metrics (this process)"] + [f"  {name:<{width}}  {value}" for name, value in rows])
