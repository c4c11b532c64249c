"""Tiered compilation, opt-in, for a first call that needs its results now
(``xla_trace(first_call="compiled", tiered_compile=True)`` or ``HLOTRACE_TIERED_COMPILE=1``).

XLA:CPU spends most of a training step's compile in LLVM. :func:`compile_first` compiles
the module quickly for the first call (``jaxlib_compat.FAST_CPU_OPTIONS``: about 5x faster
to compile, 2-3x slower to run) and, once the first run is enqueued, the optimized
executable in a background thread (it waits for the first run's results before compiling,
so the two do not share the cores); the function's second call waits for it
(:meth:`Upgrade.result`) and every later call runs it. The schedule is fixed, not a race:
the first call always runs the quick executable and every other call the optimized one, so
a program's results do not depend on how fast the machine compiled.

Both executables are cached (in memory and on disk, under their own compile options), and
the first call runs the quick one even when the optimized one is cached too: a warm cache
makes the first call cheaper (a load instead of a compile) but never changes its results.

Why opt-in: the quick executable's results can differ from the optimized one's in the last
bits (its loops sum in another order), so a tiered step's first update differs slightly
from an untiered one's; and a warm cache's first call runs the slower quick executable
(measured in BENCHMARKS.md: the CNN step's cold first call 2x faster, its warm one ~0.3 s
slower). By default, and on other platforms than the CPU, the first call compiles once,
optimized, as any call. tests/test_first_call.py holds every op's tiered first call to the
tolerance table against the optimized result, and its second call to bitwise equality.

The background thread only runs XLA's compile (which releases the GIL); counting, the disk
cache and the in-process cache are updated on the calling thread when the result is
collected. Python waits for a compile still running at exit (a non-daemon worker).
"""

from __future__ import annotations

import concurrent.futures
import logging

import hlotrace.runtime.cache as cache
import hlotrace.runtime.compiler as compiler
import hlotrace.runtime.jaxlib_compat as jaxlib_compat
from hlotrace import config
from hlotrace.metrics import count
from hlotrace.runtime.client import client, default_device, platform_name
from hlotrace.runtime.compiler import Target
from hlotrace.runtime.execute import make_executable

TIERED_ENV = "HLOTRACE_TIERED_COMPILE"
_log = logging.getLogger("hlotrace")

# In-process cache key -> Upgrade, while its optimized compile has not been collected.
pending: dict[tuple, Upgrade] = {}
_pool: list = []  # the one background worker, made on first use
_warned: set[str] = set()


FAST_COUNTERS = ("fast_compiles", "fast_compile_seconds")


def enabled(setting: bool | None = None) -> bool:
    """``setting`` when given, else $HLOTRACE_TIERED_COMPILE (default off)."""
    if setting is not None:
        return bool(setting)
    return config.get(TIERED_ENV)  # a ConfigError naming the variable when the value is no switch


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        _log.warning("hlotrace: %s", message)


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    if not _pool:
        _pool.append(concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="hlotrace-compile"))
    return _pool[0]


def _compile_after(ready, compile_now, *args):
    """The background job: wait until the first call's results are computed (``ready``, a
    device buffer, or None), so that the first run does not share the cores with LLVM,
    then compile."""
    if ready is not None:
        try:
            ready.block_until_ready()
        except Exception:  # a failed first run: compile anyway, the next call may succeed
            pass
    return compile_now(*args)


class Upgrade:
    """The optimized executable to compile in the background for one module: started by
    :meth:`start` after the first call is enqueued, collected by :meth:`result`."""

    def __init__(self, key, target: Target, module_text, in_avals, out_avals, eager=False):
        self.key, self.device = key, target.devices[0]
        self.eager = eager  # a device eager engine's one-op executable (counted as such)
        self.fields = None  # the disk cache's key (None: the cache is off)
        self.target, self.module_text = target, module_text
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self.future = None
        self.executable = None
        self.failed = False
        self.on_disk = False  # the disk cache has it: loaded by result(), nothing compiled

    def start(self, ready=None) -> None:
        """Start the optimized compile once ``ready`` (a device buffer the first call
        produced, or None: now) is computed; a second start does nothing."""
        if self.future is None and self.executable is None and not self.failed and not self.on_disk:
            self.future = _executor().submit(_compile_after, ready, compiler.compile_now, self.target, self.module_text)

    def result(self):
        """The optimized Executable (waiting for the compile, started now if it was not; or
        loaded from the disk cache), counted, stored in the disk cache and kept in the
        in-process cache; None when XLA failed to compile it (warned once: the caller keeps
        running the quick executable)."""
        if self.executable is not None or self.failed:
            return self.executable
        if self.on_disk:
            self.on_disk = False
            self.fields, hit = compiler.load_from_disk(self.target, self.module_text, self.in_avals, self.out_avals)
            if hit is not None:
                return self._adopt(*hit, from_disk=True)
            # The entry went (evicted, or rejected as corrupted): compile it now.
        self.start()
        try:
            loaded, seconds = self.future.result()
        except Exception as exc:  # the quick compile succeeded: keep its executable
            self.failed = True
            pending.pop(self.key, None)
            _warn_once(
                "optimized",
                f"the optimized compile of a first-called module failed ({exc}); its function keeps running "
                f"the quickly compiled executable",
            )
            return None
        if self.eager:
            compiler.count_and_store(self.target, loaded, seconds, self.fields, compiler.EAGER_COUNTERS)
        else:
            compiler.count_and_store(self.target, loaded, seconds, self.fields)
            count("background_compiles")
        return self._adopt(loaded, seconds)

    def _adopt(self, loaded, seconds: float, from_disk: bool = False):
        """Keep the optimized executable (in-process cache, no longer pending); returns it."""
        exe = make_executable(loaded, self.device, self.in_avals, self.out_avals, seconds, from_disk)
        self.executable = compiler.keep(self.key, exe)
        pending.pop(self.key, None)
        return self.executable


def _in_background(key):
    """The optimized executable compiled in the background for ``key`` (waited for; fills
    :data:`compiler.in_background`), else None."""
    upgrade = pending.get(key)
    return None if upgrade is None else upgrade.result()


compiler.in_background = _in_background


def compile_first(
    module_text: str, in_avals, out_avals, *, platform: str | None = None, setting: bool | None = None, eager=False
):
    """(executable for the first call, Upgrade or None) for one-device StableHLO text.

    With tiering off (``setting``, else $HLOTRACE_TIERED_COMPILE; the default) or on another platform
    than the CPU: the optimized executable and None. Otherwise the quickly compiled
    executable (``FAST_CPU_OPTIONS``; from the in-process or disk cache when it is there, so
    that a warm cache does not change the first call's results) and the Upgrade to the
    optimized one: at hand when cached, else compiled in a background thread once the
    caller has enqueued the first run (:meth:`Upgrade.start`). ``eager``: a one-op executable
    of the device eager engine (both compiles counted in ``eager_compile_seconds`` only)."""
    if not enabled(setting) or platform_name(platform) != "cpu":
        return compiler.compile(module_text, in_avals, out_avals, platform=platform, eager=eager), None
    device = default_device(platform)
    disabled = compiler.passes_to_disable(module_text, platform, ())
    key = compiler.cache_key(module_text, in_avals, out_avals, device, disabled)
    target = Target(client(platform), (device,), disabled)
    quick = _quick(key, target, module_text, in_avals, out_avals, eager)
    if quick is None:  # this XLA refuses the options: one optimized compile
        return compiler.compile(module_text, in_avals, out_avals, platform=platform, eager=eager), None
    upgrade = pending.get(key)
    if upgrade is None:
        _collect_finished()
        upgrade = Upgrade(key, target, module_text, in_avals, out_avals, eager)
        upgrade.executable = compiler.EXECUTABLES.get(key)
        if upgrade.executable is None:
            # On disk: loaded by the second call (off the first call's path); else compiled
            # in the background after the first run.
            upgrade.fields = target.key_fields(module_text, in_avals, out_avals) if cache.enabled() else None
            upgrade.on_disk = upgrade.fields is not None and cache.contains(upgrade.fields)
            pending[key] = upgrade
    return quick, upgrade


def _collect_finished() -> None:
    """Collect the background compiles that finished (their functions may never be called a
    second time): each then lives in the bounded in-process cache and on disk, not in
    ``pending``, which therefore holds at most the compiles still running."""
    for upgrade in [u for u in pending.values() if u.future is not None and u.future.done()]:
        upgrade.result()


def _quick(key, target: Target, module_text, in_avals, out_avals, eager=False):
    """The quickly compiled executable: from the in-process cache, the disk cache, or XLA
    (then stored in both); None when this XLA refuses FAST_CPU_OPTIONS (warned once)."""
    quick_key = (*key, "quick")
    hit = compiler.cached(quick_key)
    if hit is not None:
        return hit
    quick = Target(target.pjrt, target.devices, target.disabled_xla_passes, fast=True)
    try:
        loaded, seconds, from_disk = compiler.load_or_compile(
            quick, module_text, in_avals, out_avals, counters=compiler.EAGER_COUNTERS if eager else FAST_COUNTERS
        )
    except Exception as exc:
        if not jaxlib_compat.is_unknown_option_error(exc.__cause__ or exc):
            raise
        _warn_once("options", f"this XLA refuses the quick-compile options ({exc}); first calls compile optimized")
        return None
    exe = make_executable(loaded, target.devices[0], in_avals, out_avals, seconds, from_disk)
    return compiler.keep(quick_key, exe)
