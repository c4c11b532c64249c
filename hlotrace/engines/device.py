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

Counted in ``hlotrace.metrics()``: ``eager_executions``, ``eager_compiles``,
``eager_cache_hits``, ``eager_evictions`` (and the transfers, as every runtime transfer).
"""

from __future__ import annotations

import collections

from hlotrace import lowering, runtime, spmd_hooks
from hlotrace.errors import OpError
from hlotrace.metrics import COUNTS
from hlotrace.tensor import from_device_buffer
from hlotrace.trace import OpRecord, Trace

CAPACITY = 4096  # one-op executables kept (least recently used dropped first)


class DeviceEngine:
    """Runs op applications as cached one-op executables on one platform's default device."""

    def __init__(self, platform: str | None = None, capacity: int = CAPACITY):
        self.platform = runtime.platform_name(platform)
        self.capacity = capacity
        self._runners: collections.OrderedDict[tuple, tuple] = collections.OrderedDict()
        self._device = None

    def __call__(self, op, attrs: dict, tensors, out_aval, key=None):
        """The result of ``op`` on ``tensors`` (Tensor, or a tuple for several outputs).
        ``key``: dispatch's key of the application (op, avals, attributes), when it has one."""
        runner = None
        if key is not None:
            entry = self._runners.get(key)
            if entry is not None:
                self._runners.move_to_end(key)
                COUNTS["eager_cache_hits"] += 1
                runner, exe = entry
        if runner is None:
            runner, exe = self._build(op, attrs, tensors, out_aval)
            if key is not None:
                self._runners[key] = (runner, exe)
                if len(self._runners) > self.capacity:
                    self._runners.popitem(last=False)
                    COUNTS["eager_evictions"] += 1
        buffers = []
        for index, t in enumerate(tensors):
            buffer = t._device
            if buffer is None:
                buffer = t._device = exe.to_device(index, t._host)
            elif spmd_hooks.active and t.sharding is not None:
                raise _placement_error(op, t)
            buffers.append(buffer)
        COUNTS["eager_executions"] += 1
        return runner(buffers)

    def _build(self, op, attrs, tensors, out_aval):
        trace = Trace(name=f"eager_{op.name}")
        trace.inputs = [trace.new_var(t.shape, t.dtype) for t in tensors]
        outs = out_aval if isinstance(out_aval, tuple) and not hasattr(out_aval, "shape") else (out_aval,)
        trace.outputs = [trace.new_var(a.shape, a.dtype) for a in outs]
        trace.records.append(OpRecord(op.name, dict(attrs), tuple(trace.inputs), tuple(trace.outputs), None))
        lowered = lowering.lower_trace(trace, name=trace.name, platform=self.platform)
        before = COUNTS["compiles"] + COUNTS["disk_cache_hits"] + COUNTS["memory_cache_hits"]
        exe = runtime.compile(lowered.text(), lowered.in_avals, lowered.out_avals, platform=self.platform)
        if COUNTS["compiles"] + COUNTS["disk_cache_hits"] + COUNTS["memory_cache_hits"] != before:
            COUNTS["eager_compiles"] += 1
        single = len(outs) == 1 and outs is not out_aval
        if single:
            runner = exe.wrapping_runner(from_device_buffer, single=True)
        else:
            run = exe.wrapping_runner(from_device_buffer)

            def runner(buffers):
                return tuple(run(buffers))

        return runner, exe

    def clear(self) -> None:
        """Drop every cached executable."""
        self._runners.clear()

    def __len__(self) -> int:
        return len(self._runners)


def _placement_error(op, t) -> OpError:
    return OpError(
        f"{op.name}: an input of shape {list(t.shape)} is placed on a mesh ({t.sharding}); the device eager "
        f"engine runs one-device "
        f"executables. Compile the computation with xla_trace (it keeps the placement), or use the NumPy "
        f"engine for it: with ht.eager_engine('numpy'): ..."
    )
