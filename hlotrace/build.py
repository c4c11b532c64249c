"""Building one compiled entry of an ``xla_trace`` function: :func:`build_entry` records the
call, plans its layout over a mesh, lowers, runs the pass pipeline, dumps, agrees on the
module across processes, compiles (plainly or tiered), words a compile failure, and (for a
first call recorded from shapes) puts the state back and runs the executable.

The call path, its keys and caches are :mod:`hlotrace.traced`'s; it calls this for a
signature it has no entry for, and is handed the new entry through ``keep`` before anything
runs, as it was before this module existed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass

from hlotrace import config
from hlotrace import spmd_hooks as _spmd
from hlotrace.arguments import is_single_result, make_rebuild, output_structure
from hlotrace.compiled import CompiledEntry, StateIO, donation, produced_buffer, state_outputs, write_dump
from hlotrace.errors import BackendError, ConfigError, TraceError, argument_error
from hlotrace.metrics import count
from hlotrace.overrides import OVERRIDES as _OVERRIDES
from hlotrace.passes.selection import precision_named
from hlotrace.source import user_location
from hlotrace.tensor import Tensor
from hlotrace.trace import Recorder

DUMP_ENV = "HLOTRACE_DUMP_TO"
FIRST_CALL_ENV = "HLOTRACE_FIRST_CALL"
FIRST_CALLS = ("eager", "compiled")  # also read by hlotrace.lowering.builder on a verifier failure
# The matmul precision of the recordings made inside TracedFunction.lower, as the function's
# calls choose it (hlotrace.aot's record_and_lower names none): see choosing_precision.
_AHEAD_OF_TIME_PRECISION: contextvars.ContextVar = contextvars.ContextVar("hlotrace_aot_precision", default=None)


def check_first_call(value: str | None) -> str | None:
    """``value`` when it names a first call (or is None), else a TraceError."""
    if value is not None and value not in FIRST_CALLS:
        raise TraceError(f"first_call must be 'eager' or 'compiled' (or ${FIRST_CALL_ENV}), not {value!r}")
    return value


def check_megengine_options(decorator: str, without_host, symbolic_shape) -> None:
    """MegEngine's ``without_host``/``symbolic_shape``: the one value each that hlotrace honours."""
    if without_host is not True:  # MegEngine's False: the Python function runs on every call
        raise argument_error(decorator, "without_host", without_host, "True (Python runs on the recording call only)")
    if symbolic_shape is not False:
        raise argument_error(decorator, "symbolic_shape", symbolic_shape, "False (programs have static shapes)")


@contextlib.contextmanager
def choosing_precision(precision):
    """Recordings inside the block that name no precision lower with ``precision`` (a name, or
    $HLOTRACE_MATMUL_PRECISION's raw value as the function's calls read it): the function's
    own, for ``step.lower(...)`` (hlotrace.aot), keyed as its calls are."""
    token = _AHEAD_OF_TIME_PRECISION.set(precision)
    try:
        yield
    finally:
        _AHEAD_OF_TIME_PRECISION.reset(token)


def _first_call_setting() -> str:
    """$HLOTRACE_FIRST_CALL (default ``"eager"``); a bad value is a TraceError naming it."""
    try:
        return config.get(FIRST_CALL_ENV)
    except ConfigError as exc:
        raise TraceError(f"{exc} (the first_call of functions that give none)") from None


def build_entry(
    fn,
    args,
    kwargs,
    inputs,
    donatable,
    snapshot,
    pipeline: str,
    placements,
    *,
    name: str,
    number: int,
    keep,
    first_call: str | None = None,
    capture_as_const=False,
    platform: str | None = None,
    tiered_compile: bool | None = None,
    precision=None,
):
    """(the new CompiledEntry, the call's result) for one call of ``fn`` whose signature has
    no entry yet.

    ``inputs``: the call's distinct input tensors (``donatable``: the positions whose old
    buffers the step may consume), ``snapshot`` their state before the call (late inputs are
    added to it), ``placements`` their layout over a mesh (None: one device), ``number``
    this entry's number among the function's (for dump file names), ``precision`` the matmul
    precision (:func:`record_and_lower`'s). ``keep(entry, recorder,
    flat)`` is called once the entry exists, before it runs: ``flat`` says the entry may be
    keyed by its arguments' shapes and dtypes alone (stateless, one device, positional
    Tensors). The caller restores ``snapshot`` when this raises.

    >>> entry, result = build_entry(fn, (x,), {}, [x], (), state.Snapshot([x]), "", None,
    ...                             name="f", number=1, keep=lambda *a: None)
    """
    abstract = (first_call or _first_call_setting()) == "compiled"
    recording = record_and_lower(
        fn,
        args,
        kwargs,
        inputs,
        donatable,
        snapshot,
        pipeline,
        placements,
        name=name,
        number=number,
        abstract=abstract,
        capture_as_const=capture_as_const,
        platform=platform,
        precision=precision,
    )
    entry, upgrade = compile_recording(
        recording, name=name, number=number, keep=keep, platform=platform, tiered_compile=tiered_compile
    )
    if not recording.abstract:
        return entry, recording.result
    # The recording ran on shapes only and left placeholders in the state it updated:
    # put every tensor back, then run the program like any later call (on the quickly
    # compiled executable when tiered: the next call waits for the optimized one).
    snapshot.restore()
    result = None
    try:
        result = entry(inputs)
    finally:
        if upgrade is not None:
            entry.upgrade = upgrade
            upgrade.start(produced_buffer(result, inputs, entry.io))
    return entry, result


@dataclass
class Recording:
    """One call recorded, lowered and run through the pass pipeline, not compiled yet
    (:func:`record_and_lower`; :func:`compile_recording` makes its CompiledEntry)."""

    trace: object  # hlotrace.trace.Trace
    recorder: Recorder
    lowered: object  # hlotrace.lowering.LoweredModule, as lowered
    optimized: object  # ``lowered`` after the pass pipeline (the same object without one)
    pipeline: str
    io: StateIO
    template: object  # the result's structure (hlotrace.arguments.output_structure)
    num_results: int
    late: tuple  # implicit state read by the step (its late inputs)
    spmd: object  # the mesh plan (hlotrace.distributed), or None: one device
    abstract: bool  # recorded from shapes only (the state was put back)
    flat: bool  # stateless, one device, positional Tensors: keyed by shapes and dtypes alone
    result: object = None  # what the recorded call returned (values only when it ran eagerly)


def record_and_lower(
    fn,
    args,
    kwargs,
    inputs,
    donatable,
    snapshot,
    pipeline: str,
    placements,
    *,
    name: str,
    number: int,
    abstract: bool,
    capture_as_const=False,
    platform: str | None = None,
    precision=None,
) -> Recording:
    """Record one call of ``fn`` (from shapes only when ``abstract``), lower it to a module
    named ``jit_<name>`` and run ``pipeline`` over it; the arguments are
    :func:`build_entry`'s. ``precision``: the matmul precision's name, or
    $HLOTRACE_MATMUL_PRECISION's raw value as the caller keyed it (None: the one
    :func:`choosing_precision` chose, else the variable's unset default, ``"highest"``). An
    abstract recording leaves placeholders in the state it updated: the caller restores
    ``snapshot`` before anything reads it."""
    from hlotrace import lowering, passes, runtime  # lazy: lowering and runtime load jax

    count("recordings")
    # A mesh spanning processes: no process holds the global values, record from shapes.
    abstract = abstract or (_spmd.active and _spmd.spans_processes(inputs))
    # Implicit state the function reads (a random generator's key) becomes a late input,
    # saved in the snapshot so that a failure puts it back too.
    recorder = Recorder(name=name, capture_as_const=capture_as_const, on_late_input=snapshot.add, abstract=abstract)
    # Every input is recorded as itself: the function reaches a tensor through its
    # arguments, its holders, a GradManager's watch list or a tied module, and in-place
    # updates and gradients must land in that very object, as they do eagerly.
    grad_inputs = tuple(i for i, t in enumerate(inputs) if t.grad is not None)
    grads = [inputs[i].grad for i in grad_inputs]
    _refuse_aliased_grads(inputs, grads)
    with recorder:
        trace_inputs = recorder.trace.inputs
        for tensor in (*inputs, *grads):
            trace_inputs.append(recorder.add_input(tensor))
        result = fn(*args, **kwargs)
        outputs: list = []
        template = output_structure(result, outputs)
        num_results = len(outputs)
        io = state_outputs(recorder, inputs, donatable, grad_inputs, snapshot, outputs)
        recorder.set_outputs(outputs)
    trace = recorder.trace
    late = tuple(recorder.late_inputs)
    # Many devices, else None: laid out as the inputs were when the call began (the
    # eager recording may have changed them since: a .grad cleared by the optimizer).
    spmd = placements is not None and _spmd.plan(trace, placements, io, num_results)
    trace.donate = donation(trace, len(inputs), io, pair_by_aval=not spmd)  # saved with the trace
    lowered = lowering.lower_trace(
        trace,
        name=name,
        donate=trace.donate,
        spmd=spmd or None,
        platform=runtime.platform_name(platform),  # its platform-scoped rules win
        precision=precision_named(precision if precision is not None else _AHEAD_OF_TIME_PRECISION.get()),
    )
    optimized = lowered
    if pipeline:
        dump = config.get(DUMP_ENV)
        stages = os.path.join(dump, f"{name}.{number}.passes") if dump else None
        optimized = passes.run(lowered, pipeline, dump_to=stages)
    stateless = not io.writes and not io.grad_writes and not grad_inputs and not late
    flat = (
        stateless
        and not kwargs
        and not spmd
        and not _OVERRIDES
        and len(inputs) == len(args)
        and all(type(a) is Tensor for a in args)
    )
    return Recording(
        trace,
        recorder,
        lowered,
        optimized,
        pipeline,
        io,
        template,
        num_results,
        late,
        spmd or None,
        abstract,
        flat,
        None if abstract else result,
    )


def compile_recording(
    recording: Recording,
    *,
    name: str,
    number: int,
    keep,
    platform: str | None = None,
    tiered_compile: bool | None = None,
    quick_first: bool = True,
):
    """(the CompiledEntry of ``recording``, a tiered first call's background compile or
    None): compile the optimized module, hand the entry to ``keep(entry, recorder, flat)``
    (:func:`build_entry`'s) and write $HLOTRACE_DUMP_TO's files. ``quick_first``: an
    abstract recording may be compiled tiered (``tiered_compile``; a first call's)."""
    import hlotrace.runtime.tiered as tiered  # lazy: loads jax
    from hlotrace import runtime  # lazy: loads jax

    trace, optimized, spmd = recording.trace, recording.optimized, recording.spmd
    text = optimized.text()
    if spmd:  # every process of a multi-process mesh must compile this same module
        _spmd.agree_on_module(name, trace, text, spmd.devices)
    upgrade = None  # a tiered first call's optimized executable, compiling meanwhile
    try:
        if recording.abstract and quick_first and not spmd:
            executable, upgrade = tiered.compile_first(
                text, optimized.in_avals, optimized.out_avals, platform=platform, setting=tiered_compile
            )
        else:
            executable = runtime.compile(text, optimized.in_avals, optimized.out_avals, platform=platform, spmd=spmd)
    except BackendError as exc:
        raise BackendError(
            f"{exc} (compiling {name}, {len(trace.records)} recorded ops, first called at "
            f"{user_location(3)}; HLOTRACE_DUMP_TO=DIR keeps the lowered module, `hlotrace stages` shows "
            f"every stage). Every parameter, optimizer state and .grad is as it was before the call."
        ) from exc
    io = recording.io
    stateless = not io.writes and not io.grad_writes and not io.grad_inputs and not recording.late
    entry = CompiledEntry(
        trace,
        recording.lowered,
        executable,
        make_rebuild(recording.template),
        recording.num_results,
        None if stateless else io,
        recording.late,
        optimized,
        single=is_single_result(recording.template),
    )
    keep(entry, recording.recorder, recording.flat)
    if dump_to := config.get(DUMP_ENV):
        pipeline = recording.pipeline
        write_dump(dump_to, f"{name}.{number}", entry, recording.lowered.text(), text if pipeline else None, upgrade)
    return entry, upgrade


def _refuse_aliased_grads(inputs, grads) -> None:
    """A ``.grad`` that is itself an input, or shared by two inputs, cannot be one input
    read and written back the way the eager run does: refuse it, naming the tensors."""
    seen = {id(t): f"an input of shape {t.shape}" for t in inputs}
    for owner, grad in zip((t for t in inputs if t.grad is not None), grads, strict=True):
        other = seen.get(id(grad))
        if other is not None:
            raise TraceError(
                f"the .grad of an input of shape {owner.shape} and dtype {owner.dtype} is also {other} "
                f"(the same Tensor object); a compiled step cannot read and write it as both. "
                f"Give each tensor its own .grad (e.g. g.detach() * 1) at {user_location(4)}"
            )
        seen[id(grad)] = f"the .grad of an input of shape {owner.shape}"
