"""The device eager engine on a mesh: an op application whose inputs include a tensor placed
on a mesh (``t.sharding is not None``) runs as a one-op SPMD executable on that mesh, as jax
runs an op on sharded arrays, and its results stay on the mesh.

- **Layout.** Every placed input must be on the same mesh (else an OpError naming both) and
  keeps its placement; unplaced operands -- host tensors, Python scalars, one-device
  buffers -- are replicated onto the mesh for this op, and the tensors themselves stay where
  they were (a scalar's replicated buffer is kept per value, like the engine's one-device
  ones). The distributed layer decides all of it (``spmd_hooks.eager_layout``, the same
  layouts and re-placement a compiled step's inputs get); this module never imports it.
- **Program.** A one-record trace (:func:`hlotrace.engines.device.one_op_trace`) lowered
  with the distributed layer's plan for it (``spmd_hooks.eager_plan``: the arguments
  annotated as laid out, the results left open for XLA's partitioner, as ``xla_trace``
  leaves a step's results; the lowering applies ``Plan.guard`` to convolutions and pooling)
  and compiled by ``runtime.compile(spmd=plan)``.
- **Results** are Tensors on the executable's result buffers: their ``.sharding`` is the
  layout the partitioner chose (a batch-split input gives a batch-split elementwise result,
  a reduction over the split dimension a replicated one), read from the buffer as for a
  compiled step's results.
- **Cache.** The executables live in the engine's LRU (shared capacity and eviction count)
  under (op, attributes, input avals, mesh, per-input dims): a replicated and a split input
  of one aval, or one spec on two meshes, get executables of their own.
- **A mesh spanning processes** is not handled here: every process would have to compile
  and run each eager op in step with the others (``xla_trace`` checks the module with
  ``agree_on_module`` and the replicas per compiled step; an eager op has no such point:
  one process logging ``loss * 2`` would leave the others' collectives waiting). Such an
  application runs on the NumPy engine on its global value, as before the device engine
  existed, counted in ``eager_host_fallbacks``; compile the code with ``xla_trace`` to run
  it on the devices.

Counted as the one-device path: ``eager_executions``, ``eager_compiles``,
``eager_cache_hits``, ``eager_evictions``; an op without a lowering rule falls back as there.
"""

from __future__ import annotations

import hlotrace.engines.device as device
from hlotrace import lowering, runtime, spmd_hooks
from hlotrace.dispatch import SCALAR_OPERAND, op_error, run_reference
from hlotrace.errors import TraceError
from hlotrace.metrics import COUNTS
from hlotrace.ops.registry import Aval

_ON_MESH = object()  # the first item of every mesh key in the engine's LRU


def run_on_mesh(engine, op, attrs, tensors, out_aval, key):
    """The result of ``op`` on ``tensors`` (one of them placed) from a one-op SPMD
    executable, or None when no input is placed or their mesh spans processes (the caller
    runs the NumPy reference then). ``key``: dispatch's key of the application, or None."""
    for t in tensors:
        if t.sharding is not None:
            break
    else:
        return None
    if spmd_hooks.spans_processes(tensors):
        return None
    try:
        mesh, dims, own = spmd_hooks.eager_layout(tensors)
    except TraceError as exc:  # inputs on two meshes
        raise op_error(op, str(exc), [Aval(t.shape, t.dtype) for t in tensors]) from None
    cache_key = None if key is None else (_ON_MESH, key, mesh, dims)
    entry = engine._entry(cache_key, _build, engine, op, attrs, tensors, out_aval, mesh, dims)
    runner, exe = entry[0], entry[1]
    if runner is None:  # no lowering rule: the op's NumPy reference (warned once)
        COUNTS["eager_host_fallbacks"] += 1
        return run_reference(op, attrs, tensors, out_aval)
    buffers = []
    for index, t in enumerate(tensors):
        if own[index] is None:
            buffers.append(_replicated(engine, exe, index, t))
            continue
        buffer = t._device
        if buffer is None:  # a placed tensor held on the host (or sent back there): laid out once, kept
            buffer = t._device = exe.to_device(index, t._host)
        buffers.append(buffer)
    COUNTS["eager_executions"] += 1
    return runner(buffers)


def _replicated(engine, exe, index: int, t):
    """A buffer of unplaced operand ``t`` replicated as argument ``index`` of ``exe`` wants;
    ``t`` keeps its own value where it is (a Python scalar's buffer is kept per value)."""
    if t._origin is SCALAR_OPERAND:
        host = t._host
        scalar_key = (exe.in_shardings[index], host.dtype, host.tobytes())
        scalars = engine._scalars
        buffer = scalars.get(scalar_key)
        if buffer is None:
            if len(scalars) >= device.SCALAR_CAPACITY:
                scalars.clear()
            buffer = scalars[scalar_key] = exe.to_device(index, host)
        return buffer
    return exe.to_device(index, t.numpy())


def _build(engine, op, attrs, tensors, out_aval, mesh, dims):
    """The cache entry of a new application on ``mesh`` (the one-device engine's layout:
    [runner, executable, None, one result, False]; runner None: no lowering rule)."""
    if lowering.rule_for(op.name, engine.platform) is None:
        device._warn_no_rule(op.name, engine.platform)
        return [None, None, None, False, False]
    trace, outs = device.one_op_trace(op, attrs, tensors, out_aval)
    plan = spmd_hooks.eager_plan(mesh, dims, [len(a.shape) for a in outs])
    lowered = lowering.lower_trace(trace, name=trace.name, spmd=plan, platform=engine.platform)
    COUNTS["eager_compiles"] += 1
    exe = runtime.compile(
        lowered.text(), lowered.in_avals, lowered.out_avals, platform=engine.platform, spmd=plan, eager=True
    )
    single = len(outs) == 1 and outs is not out_aval
    return [device._runner(exe, single), exe, None, single, False]
