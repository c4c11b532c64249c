"""The device eager engine: every op application runs on the device, as a one-op executable
built from that op's own lowering rule -- the rule xla_trace's programs use, so an eager op
and the same op inside a compiled program compute alike, and the NumPy references stay the
oracle both are tested against.

An application ``op(*tensors, **attrs)`` (already checked, promoted and inferred by
:func:`hlotrace.dispatch.apply`) is keyed by (op, canonical attributes, input avals,
platform). A key seen before runs its executable at once; a new key records a one-record
trace, lowers it (``lowering.lower_trace``) and compiles it through ``runtime.compile``
(whose persistent disk cache keeps it across processes). The executables live in an LRU
of :data:`CAPACITY` entries. Results are device Tensors; ``.numpy()`` (and ``print``) copy
them to the host, and nothing else waits for the device: PJRT dispatches asynchronously.
Host operands (NumPy-backed tensors, Python scalars turned into tensors) are copied to the
device once and keep their device buffer.

Attributes that hold regions (control flow) have no cheap key: those applications are
lowered on every call and found by their module text in ``runtime.compile``'s cache.

An application with an input placed on a mesh runs as a one-op SPMD executable on that
mesh, cached in the same LRU (:mod:`hlotrace.engines.placed`); on a mesh spanning
processes it runs on the NumPy engine, counted in ``eager_host_fallbacks``.

Counted in ``hlotrace.metrics()``: ``eager_executions``, ``eager_compiles``,
``eager_cache_hits``, ``eager_evictions`` (and the transfers, as every runtime transfer).
"""

from __future__ import annotations

import collections
import logging

from hlotrace import lowering, runtime, spmd_hooks
from hlotrace.dispatch import SCALAR_OPERAND, op_error, run_reference
from hlotrace.metrics import COUNTS
from hlotrace.ops.registry import Aval
from hlotrace.runtime import tiered
from hlotrace.tensor import from_device_buffer
from hlotrace.trace import OpRecord, Trace

CAPACITY = 4096  # one-op executables kept (least recently used dropped first)
_COPY = object()  # the key of the copy executables (an XLA program returning its argument copies it)
SCALAR_CAPACITY = 1024  # device buffers of Python scalar operands kept (all dropped when full)


class DeviceEngine:
    """Runs op applications as cached one-op executables on one platform's default device."""

    def __init__(self, platform: str | None = None, capacity: int = CAPACITY, quick_first: bool | None = None):
        self.platform = runtime.platform_name(platform)
        self.capacity = capacity
        self.quick_first = quick_first
        self._runners: collections.OrderedDict[tuple, tuple] = collections.OrderedDict()
        self._device = None
        self._scalars: dict = {}  # (dtype, bytes) -> device buffer of a Python scalar operand

    def __call__(self, op, attrs: dict, tensors, out_aval, key=None):
        """The result of ``op`` on ``tensors`` (Tensor, or a tuple for several outputs).
        ``key``: dispatch's key of the application (op, avals, attributes), when it has one.
        An input placed on a mesh runs it as a one-op SPMD executable on that mesh
        (:mod:`hlotrace.engines.placed`), except on a mesh spanning processes: there the op
        runs on the NumPy engine (its global value; counted in ``eager_host_fallbacks``)."""
        if op.host_check is not None:
            _check_on_host(op, attrs, tensors)
        if spmd_hooks.active:
            from hlotrace.engines.placed import run_on_mesh  # cycle: placed builds on this module

            out = run_on_mesh(self, op, attrs, tensors, out_aval, key)
            if out is not None:
                return out
            # Still placed (on a mesh spanning processes): never a one-device executable.
            for t in tensors:
                if t.sharding is not None:
                    COUNTS["eager_host_fallbacks"] += 1
                    return run_reference(op, attrs, tensors, out_aval)
        entry = self._entry(key, self._build, op, attrs, tensors, out_aval)
        runner, exe = entry[0], entry[1]
        if runner is None:  # no lowering rule: the op's NumPy reference (warned once)
            COUNTS["eager_host_fallbacks"] += 1
            return run_reference(op, attrs, tensors, out_aval)
        buffers = [t._device for t in tensors]
        for buffer in buffers:  # not ``None in buffers``: that asks each jax array ``== None`` (2 us)
            if buffer is None:
                self._put(tensors, buffers, exe)
                break
        COUNTS["eager_executions"] += 1
        return runner(buffers)

    def cached(self, key, buffers):
        """The one-result application ``key`` run on device ``buffers`` when its executable is
        cached (dispatch's fast path: operands on the device, no attributes), else None."""
        entry = self._runners.get(key)
        if entry is None or spmd_hooks.active or not entry[4]:
            return None
        # _touch, inlined: this is every steady eager op's path (a method call is ~0.1 us of 5.7).
        self._runners.move_to_end(key)
        COUNTS["eager_cache_hits"] += 1
        if entry[2] is not None:
            _settle(entry)  # tiered: the second application runs the optimized executable
        COUNTS["eager_executions"] += 1
        return entry[0](buffers)

    def _entry(self, key, build, *args):
        """The cache entry under ``key`` (a hit: touched), else ``build(*args)``, kept under
        ``key`` unless it is None (an application without a key is built every time)."""
        entry = self._runners.get(key) if key is not None else None
        if entry is not None:
            self._touch(key, entry)
            return entry
        entry = build(*args)
        if key is not None:
            self._keep(key, entry)
        return entry

    def _touch(self, key, entry) -> None:
        """A cache hit: ``entry`` becomes the most recently used, counted, and (tiered) switched
        to its optimized executable, waiting for its background compile if needed."""
        self._runners.move_to_end(key)
        COUNTS["eager_cache_hits"] += 1
        if entry[2] is not None:  # a quickly compiled executable: is the optimized one ready?
            _settle(entry)

    def _put(self, tensors, buffers, exe) -> None:
        """Copy the host operands to the device (each tensor keeps its buffer)."""
        for index, t in enumerate(tensors):
            if buffers[index] is not None:
                continue
            if t._origin is SCALAR_OPERAND:  # lr, 0.9, 1: copied to the device once per value
                host = t._host
                scalar_key = (host.dtype, host.tobytes())
                buffer = self._scalars.get(scalar_key)
                if buffer is None:
                    if len(self._scalars) >= SCALAR_CAPACITY:
                        self._scalars.clear()
                    buffer = self._scalars[scalar_key] = exe.to_device(index, host)
            else:
                buffer = exe.to_device(index, t._host)
            t._device = buffers[index] = buffer

    def _build(self, op, attrs, tensors, out_aval):
        """The cache entry of a new application: [runner, executable, the optimized
        executable's Upgrade or None, one result, whether dispatch's fast path may run it]
        (runner None: the op has no lowering rule on this platform)."""
        if lowering.rule_for(op.name, self.platform) is None:
            _warn_no_rule(op.name, self.platform)
            return [None, None, None, False, False]
        trace, outs = one_op_trace(op, attrs, tensors, out_aval)
        lowered = lowering.lower_trace(trace, name=trace.name, platform=self.platform)
        text = lowered.text()
        COUNTS["eager_compiles"] += 1
        upgrade = None
        quick_first = tiered.enabled() if self.quick_first is None else self.quick_first
        if quick_first and self.platform == "cpu":
            # Tiered (opt-in, $HLOTRACE_TIERED_COMPILE): LLVM at -O0 first (several times faster
            # to compile: a model's first eager step compiles every op it uses) for the first
            # application only; the optimized executable compiles in the background and runs
            # every later one (_settle waits for it). A fixed schedule, not a race: the quick
            # executable rounds differently (tanh, matmul), so swapping it whenever the compile
            # finished made results depend on the machine's speed.
            exe, upgrade = tiered.compile_first(
                text, lowered.in_avals, lowered.out_avals, platform="cpu", setting=True, eager=True
            )
            if upgrade is not None:
                upgrade.start()
        else:
            exe = runtime.compile(text, lowered.in_avals, lowered.out_avals, platform=self.platform, eager=True)
        single = len(outs) == 1 and outs is not out_aval
        return [_runner(exe, single), exe, upgrade, single, single and op.host_check is None]

    def copy(self, t):
        """A copy of ``t``'s device buffer on the device (tensor.HOOKS.device_copy), or None
        for a tensor placed on a mesh (its copy goes through the host)."""
        buffer = t._device
        if spmd_hooks.active and t.sharding is not None:
            return None
        key = (_COPY, buffer.shape, buffer.dtype)
        entry = self._runners.get(key)
        if entry is None:
            trace = Trace(name="eager_copy")
            trace.inputs = trace.outputs = [trace.new_var(buffer.shape, buffer.dtype)]
            lowered = lowering.lower_trace(trace, name=trace.name, platform=self.platform)
            COUNTS["eager_compiles"] += 1
            exe = runtime.compile(
                lowered.text(), lowered.in_avals, lowered.out_avals, platform=self.platform, eager=True
            )
            entry = [exe.run, exe, None, True, False]
            self._keep(key, entry)
        else:
            self._touch(key, entry)
        COUNTS["eager_executions"] += 1
        return entry[0]([buffer])[0]

    def _keep(self, key, entry) -> None:
        """Cache ``entry`` under ``key``, dropping the least recently used past the capacity."""
        self._runners[key] = entry
        if len(self._runners) > self.capacity:
            self._runners.popitem(last=False)
            COUNTS["eager_evictions"] += 1

    def settle(self) -> None:
        """Wait for every optimized executable still compiling in the background, and use it."""
        for entry in self._runners.values():
            if entry[2] is not None:
                _settle(entry)

    def clear(self) -> None:
        """Drop every cached executable and scalar buffer."""
        self._runners.clear()
        self._scalars.clear()

    def __len__(self) -> int:
        return len(self._runners)


def one_op_trace(op, attrs, tensors, out_aval):
    """(a Trace of the one application ``op(*tensors, **attrs)``, its output avals)."""
    trace = Trace(name=f"eager_{op.name}")
    trace.inputs = [trace.new_var(t.shape, t.dtype) for t in tensors]
    outs = out_aval if isinstance(out_aval, tuple) and not hasattr(out_aval, "shape") else (out_aval,)
    trace.outputs = [trace.new_var(a.shape, a.dtype) for a in outs]
    trace.records.append(OpRecord(op.name, dict(attrs), tuple(trace.inputs), tuple(trace.outputs), None))
    return trace, outs


def _check_on_host(op, attrs, tensors) -> None:
    """Raise what ``op``'s reference would for operand values XLA silently accepts (an
    out-of-range index), for the operands that are on the host (OpDef.host_check)."""
    avals = [Aval(t.shape, t.dtype) for t in tensors]
    reason = op.host_check(avals, [t._host for t in tensors], **attrs)
    if reason is not None:
        raise op_error(op, reason, avals)


_WARNED_NO_RULE: set = set()


def _warn_no_rule(name: str, platform: str) -> None:
    if (name, platform) not in _WARNED_NO_RULE:
        _WARNED_NO_RULE.add((name, platform))
        logging.getLogger("hlotrace").warning(
            "op %r has no lowering rule for %s: the device engine runs its NumPy reference on the host "
            "(counted in eager_host_fallbacks); compiling it fails until one is registered "
            "(@hlotrace.lowering.rule(%r))",
            name,
            platform,
            name,
        )


def _runner(exe, single: bool):
    if single:
        return exe.wrapping_runner(from_device_buffer, single=True)
    run = exe.wrapping_runner(from_device_buffer)

    def runner(buffers):
        return tuple(run(buffers))

    return runner


def _settle(entry) -> None:
    """Switch ``entry`` ([runner, executable, upgrade, single]) to its optimized executable,
    waiting for the background compile if it is still running; keep the quick one if XLA
    failed it."""
    upgrade = entry[2]
    optimized = upgrade.result()
    entry[2] = None
    if optimized is not None:
        entry[0], entry[1] = _runner(optimized, entry[3]), optimized
