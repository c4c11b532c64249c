"""Building one compiled entry of an ``xla_trace`` function: :func:`build_entry` records the
call, plans its layout over a mesh, lowers, runs the pass pipeline, dumps, agrees on the
module across processes, compiles (plainly or tiered), words a compile failure, and (for a
first call recorded from shapes) puts the state back and runs the executable.

The call path, its keys and caches are :mod:`hlotrace.traced`'s; it calls this for a
signature it has no entry for, and is handed the new entry through ``keep`` before anything
runs, as it was before this module existed.
"""

from __future__ import annotations

import os

from hlotrace import config
from hlotrace import spmd_hooks as _spmd
from hlotrace.arguments import is_single_result, make_rebuild, output_structure
from hlotrace.compiled import CompiledEntry, donation, produced_buffer, state_outputs, write_dump
from hlotrace.errors import BackendError, ConfigError, TraceError
from hlotrace.metrics import count
from hlotrace.overrides import OVERRIDES as _OVERRIDES
from hlotrace.source import user_location
from hlotrace.tensor import Tensor
from hlotrace.trace import Recorder

DUMP_ENV = "HLOTRACE_DUMP_TO"
FIRST_CALL_ENV = "HLOTRACE_FIRST_CALL"
FIRST_CALLS = ("eager", "compiled")  # also read by hlotrace.lowering.builder on a verifier failure


def check_first_call(value: str | None) -> str | None:
    """``value`` when it names a first call (or is None), else a TraceError."""
    if value is not None and value not in FIRST_CALLS:
        raise TraceError(f"first_call must be 'eager' or 'compiled' (or ${FIRST_CALL_ENV}), not {value!r}")
    return value


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
):
    """(the new CompiledEntry, the call's result) for one call of ``fn`` whose signature has
    no entry yet.

    ``inputs``: the call's distinct input tensors (``donatable``: the positions whose old
    buffers the step may consume), ``snapshot`` their state before the call (late inputs are
    added to it), ``placements`` their layout over a mesh (None: one device), ``number``
    this entry's number among the function's (for dump file names). ``keep(entry, recorder,
    flat)`` is called once the entry exists, before it runs: ``flat`` says the entry may be
    keyed by its arguments' shapes and dtypes alone (stateless, one device, positional
    Tensors). The caller restores ``snapshot`` when this raises.

    >>> entry, result = build_entry(fn, (x,), {}, [x], (), state.Snapshot([x]), "", None,
    ...                             name="f", number=1, keep=lambda *a: None)
    """
    import hlotrace.runtime.tiered as tiered
    from hlotrace import lowering, passes, runtime

    count("recordings")
    # Implicit state the function reads (a random generator's key) becomes a late input,
    # saved in the snapshot so that a failure puts it back too.
    abstract = (first_call or _first_call_setting()) == "compiled"
    # A mesh spanning processes: no process holds the global values, record from shapes.
    abstract = abstract or (_spmd.active and _spmd.spans_processes(inputs))
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
    lowered = lowering.lower_trace(
        trace,
        name=name,
        donate=donation(trace, len(inputs), io, pair_by_aval=not spmd),
        spmd=spmd or None,
        platform=runtime.platform_name(platform),  # its platform-scoped rules win
    )
    optimized = lowered
    if pipeline:
        dump = config.get(DUMP_ENV)
        stages = os.path.join(dump, f"{name}.{number}.passes") if dump else None
        optimized = passes.run(lowered, pipeline, dump_to=stages)
    text = optimized.text()
    if spmd:  # every process of a multi-process mesh must compile this same module
        _spmd.agree_on_module(name, trace, text, spmd.devices)
    upgrade = None  # a tiered first call's optimized executable, compiling meanwhile
    try:
        if abstract and not spmd:
            executable, upgrade = tiered.compile_first(
                text, optimized.in_avals, optimized.out_avals, platform=platform, setting=tiered_compile
            )
        else:
            executable = runtime.compile(
                text, optimized.in_avals, optimized.out_avals, platform=platform, spmd=spmd or None
            )
    except BackendError as exc:
        raise BackendError(
            f"{exc} (compiling {name}, {len(trace.records)} recorded ops, first called at "
            f"{user_location(3)}; HLOTRACE_DUMP_TO=DIR keeps the lowered module, `hlotrace stages` shows "
            f"every stage). Every parameter, optimizer state and .grad is as it was before the call."
        ) from exc
    stateless = not io.writes and not io.grad_writes and not grad_inputs and not late
    entry = CompiledEntry(
        trace,
        lowered,
        executable,
        make_rebuild(template),
        num_results,
        None if stateless else io,
        late,
        optimized,
        single=is_single_result(template),
    )
    flat = (
        not kwargs
        and entry.io is None
        and not spmd
        and not _OVERRIDES
        and len(inputs) == len(args)
        and all(type(a) is Tensor for a in args)
    )
    keep(entry, recorder, flat)
    if dump_to := config.get(DUMP_ENV):
        write_dump(dump_to, f"{name}.{number}", entry, lowered.text(), text if pipeline else None, upgrade)
    if abstract:
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
