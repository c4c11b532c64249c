"""Shared helpers for the benchmarks: timing loops, environment line, table printing.

Every benchmark reports ratios against a peer measured in the same process and the same
run (jax.jit on the same computation, or hlotrace's eager NumPy path); absolute times are
printed for context only. Timing follows ``timeit``: a loop of ``number`` calls is timed
``repeat`` times with the garbage collector disabled, and the per-call time of the best and
of the median loop is reported. When several candidates are compared their loops are
interleaved, the order rotating each round (A B, B A, ...), so that drift on a shared, noisy
machine hits all of them alike.
"""

from __future__ import annotations

import atexit
import datetime
import gc
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

SMALL_ENV = "HLOTRACE_BENCH_SMALL"


# -- timing ------------------------------------------------------------------------------


@dataclass
class Timing:
    """Per-call seconds of each timed loop."""

    name: str
    per_call: list[float]
    number: int

    @property
    def best(self) -> float:
        return min(self.per_call)

    @property
    def median(self) -> float:
        return statistics.median(self.per_call)


def _loop(fn: Callable[[], object], number: int) -> float:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def calibrate(fn: Callable[[], object], min_loop_seconds: float = 0.2, max_number: int = 1_000_000) -> int:
    """Calls per loop so that one loop of ``fn`` lasts about ``min_loop_seconds``.

    Tries 1, 2, 5, 10, 20, ... calls until a loop lasts at least a tenth of the target,
    then scales that count up to the target from the per-call time it measured.
    """
    number = 1
    while True:
        for factor in (1, 2, 5):
            n = number * factor
            seconds = _loop(fn, n)
            if n >= max_number or seconds >= min_loop_seconds / 10:
                per_call = seconds / n
                return max(1, min(max_number, round(min_loop_seconds / per_call)))
        number *= 10


def compare(
    candidates: dict[str, Callable[[], object]],
    *,
    repeat: int = 5,
    number: int | None = None,
    warmup: int = 3,
    min_loop_seconds: float = 0.2,
) -> dict[str, Timing]:
    """Time every candidate ``repeat`` times, interleaving their loops (order rotated per round).

    ``number`` (calls per loop) is calibrated per candidate when not given, so that every
    candidate's loop lasts about ``min_loop_seconds`` (equal exposure to load spikes). Each
    candidate is called ``warmup`` times first.
    """
    numbers = {}
    for name, fn in candidates.items():
        for _ in range(warmup):
            fn()
        numbers[name] = number if number is not None else calibrate(fn, min_loop_seconds)
    results = {name: Timing(name, [], numbers[name]) for name in candidates}
    names = list(candidates)
    for round_index in range(repeat):
        shift = round_index % len(names)  # rotate the order: nobody always goes first
        for name in names[shift:] + names[:shift]:
            results[name].per_call.append(_loop(candidates[name], numbers[name]) / numbers[name])
    return results


def paired_ratio(numerator: Timing, denominator: Timing) -> float:
    """Median over the interleaved loops of numerator/denominator (robust to drift)."""
    return statistics.median(a / b for a, b in zip(numerator.per_call, denominator.per_call, strict=True))


def int_option(argv: list[str], name: str, default: int) -> int:
    """``--name N`` from ``argv``, else ``default``."""
    if name in argv:
        return int(argv[argv.index(name) + 1])
    return default


def time_once(fn: Callable[[], object]) -> tuple[float, object]:
    """Wall seconds of one call (gc disabled) and its result."""
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result
    finally:
        if gc_was_enabled:
            gc.enable()


# -- formatting --------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    """Seconds in the most readable unit (µs, ms or s)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def fmt_ratio(value: float) -> str:
    return f"{value:.2f}x"


def verdict(ratio: float, target: float) -> str:
    return f"target <= {target:g}: {'met' if ratio <= target else 'NOT met'}"


def print_table(headers: list[str], rows: list[list[object]], title: str | None = None) -> None:
    """A plain fixed-width table (first column left-aligned, the others right-aligned)."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        parts = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    if title:
        print(title)
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))
    print()


# -- environment -------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for text in f:
                if text.startswith("model name"):
                    return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def environment() -> dict[str, str]:
    """Platform and version facts for the report header."""
    import jax
    import jaxlib
    import numpy as np

    from hlotrace import runtime
    from hlotrace.runtime import jaxlib_compat

    client = runtime.client()
    devices = jaxlib_compat.client_devices(client)
    return {
        "date": datetime.date.today().isoformat(),
        "platform": runtime.platform_name(),
        "platform_version": jaxlib_compat.platform_version(client),
        "device": str(devices[0]) if devices else "?",
        "jax_default_backend": jax.default_backend(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "nproc": str(usable_cpus()),
    }


def print_header(title: str, module: str, argv: list[str]) -> None:
    """Title, the command that reproduces this output, and the environment line."""
    env = environment()
    print(f"== {title} ==")
    command = " ".join([".venv/bin/python", "-m", module, *map(shlex.quote, argv)])
    print(f"reproduce (from the repo root): {command}")
    print(
        f"platform: {env['platform']} ({env['platform_version']}), device {env['device']}; "
        f"jax {env['jax']}, jaxlib {env['jaxlib']}, numpy {env['numpy']}, python {env['python']}"
    )
    print(f"host: {env['cpu']}, nproc={env['nproc']}; date {env['date']}")
    print()


def small_requested(argv: list[str]) -> bool:
    from hlotrace import config  # imported where used, as this module imports every hlotrace module

    return "--small" in argv or config.get(SMALL_ENV)


def block_tensor(tensor):
    """Wait for an hlotrace Tensor's device buffer (a jax Array held in ``._device``)."""
    return tensor._device.block_until_ready()


def private_compile_cache() -> None:
    """Benchmarks compile into a temporary compile cache of their own, removed at exit, so a
    warm user cache neither skews a first-call figure nor fills up with benchmark programs;
    ``HLOTRACE_CACHE_DIR`` set explicitly wins (a benchmark that times the cache sets its own)."""
    from hlotrace.runtime.cache import CACHE_DIR_ENV

    if os.environ.get(CACHE_DIR_ENV, "").strip():
        return
    path = tempfile.mkdtemp(prefix="hlotrace-bench-cache-")
    os.environ[CACHE_DIR_ENV] = path  # subprocesses a benchmark starts share it
    atexit.register(shutil.rmtree, path, True)


def main_args(argv: list[str] | None) -> list[str]:
    private_compile_cache()
    return list(sys.argv[1:] if argv is None else argv)
