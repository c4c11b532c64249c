"""Ahead of time, in JAX's shape: ``step.lower(*args)`` records an ``xla_trace`` function
from the arguments' shapes and dtypes (nothing runs, no state changes) and returns a
:class:`Lowered`; ``.compile()`` gives a :class:`Compiled`, which is the function's own
compiled entry for that signature (a later ordinary call uses it, with no second compile).

>>> lowered = step.lower(x, y, net, opt, gm)   # no execution, every tensor as it was
>>> print(lowered.as_text())                   # StableHLO as lowered; passes=True: as compiled
>>> compiled = lowered.compile()
>>> compiled.cost_analysis()["flops"], compiled.memory_analysis()["temp"]
>>> loss = compiled(x, y, net, opt, gm)        # the same as step(x, y, net, opt, gm)
"""

from __future__ import annotations

import inspect

from hlotrace import recompiles, state
from hlotrace.arguments import ArrayArgument, wrap_arrays
from hlotrace.build import compile_recording, record_and_lower
from hlotrace.errors import TraceError
from hlotrace.recording import RECORDER

__all__ = ["Compiled", "Lowered", "describe_entry", "lower"]


def _function_name(traced) -> str:
    return getattr(traced.fn, "__name__", "traced")


def _check_arguments(traced, args, kwargs) -> None:
    """A call the function itself cannot take is one TraceError naming its parameters."""
    try:
        signature = inspect.signature(traced.fn)
    except (TypeError, ValueError):  # a builtin or callable without a signature: let it say
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TraceError(f"{_function_name(traced)}.lower(...): {exc}; {_function_name(traced)}{signature}") from None


def lower(traced, args, kwargs) -> Lowered:
    """:meth:`hlotrace.traced.TracedFunction.lower`: record ``traced`` for these arguments
    from shapes only, lower it and run its pass pipeline; the state is put back at once."""
    name = _function_name(traced)
    if RECORDER.get() is not None:
        raise TraceError(f"{name}.lower(...) while another function is being recorded; lower it outside")
    _check_arguments(traced, args, kwargs)
    pipeline = traced._pipeline()
    try:
        key, leaves, holders, held, slots, inputs, placements = traced._key(args, kwargs, pipeline)
    except ArrayArgument:
        return lower(traced, wrap_arrays(args), wrap_arrays(kwargs))
    if traced._guard is not None and traced._guard.stale():  # capture_as_const="refresh"
        traced._forget_entries()
    signature = recompiles.describe(pipeline, args, kwargs, held, slots)
    snapshot = state.Snapshot(inputs)
    num_state = len(held.tensors) if held is not None else 0
    number = len(traced._cache) + 1
    try:
        recording = record_and_lower(
            traced.fn,
            args,
            kwargs,
            inputs,
            state.state_positions(len(leaves), num_state, slots),
            snapshot,
            pipeline,
            placements,
            name=name,
            number=number,
            abstract=True,
            capture_as_const=traced.capture_as_const,
            platform=traced.platform,
        )
    finally:
        # Recorded from shapes: the state it updated holds placeholders (or, after a
        # failure, half an update). Every tensor, .grad and the random key goes back.
        snapshot.restore()
    return Lowered(traced, recording, key, signature, holders, inputs, number)


class Lowered:
    """A function recorded and lowered for one signature, not compiled
    (``xla_trace_function.lower(*args, **kwargs)``).

    ``trace``: the recorded Trace. ``lowered`` / ``optimized``: the LoweredModule before
    and after the pass pipeline; ``in_avals`` / ``out_avals``: the module's argument and
    result avals (inputs are the argument tensors, the state the step reaches, their
    ``.grad`` and implicit state such as the random key; outputs the results, then the state
    written back; :mod:`hlotrace.compiled`). The module is named ``jit_<function name>``.
    """

    def __init__(self, traced, recording, key, signature, holders, inputs, number):
        self._traced = traced
        self._recording = recording
        self._key = key
        self._signature = signature
        self._holders = holders
        self._inputs = inputs
        self._number = number
        self.trace = recording.trace
        self.lowered = recording.lowered
        self.optimized = recording.optimized
        self.in_avals = list(recording.optimized.in_avals)
        self.out_avals = list(recording.optimized.out_avals)

    @property
    def name(self) -> str:
        """The module's name, as XLA and its dumps see it (``jit_step``)."""
        from hlotrace.lowering.builder import module_name  # lazy: loads jax (not at import time)

        return module_name(_function_name(self._traced))

    def as_text(self, *, passes: bool = False, debug_info: bool = False) -> str:
        """StableHLO text as lowered (``passes=True``: after the pass pipeline, what is
        compiled); ``debug_info=True`` prints every op's location (record, op, file:line)."""
        module = self.optimized if passes else self.lowered
        return module.text(debug_info=debug_info)

    def compiler_ir(self, *, passes: bool = False):
        """The MLIR module (``jaxlib.mlir.ir.Module``) as lowered, or after the passes."""
        return (self.optimized if passes else self.lowered).module

    def compile(self) -> Compiled:
        """Compile the module (XLA's optimizing compile, never a tiered quick one) into the
        function's entry for this signature: a later ordinary call with such arguments runs
        it without compiling again. When the function already holds an entry for the
        signature (called, or compiled before), that entry is the result and nothing compiles."""
        traced, key = self._traced, self._key
        entry = traced._cache.get(key)
        if entry is None:
            name = _function_name(traced)
            pipeline = self._recording.pipeline
            entry, _ = compile_recording(
                self._recording,
                name=name,
                number=self._number,
                keep=lambda entry, recorder, flat: traced._keep(
                    key, name, self._holders, pipeline, self._inputs, entry, recorder, flat
                ),
                platform=traced.platform,
                quick_first=False,
            )
            traced._described_new(key, self._signature)
        return Compiled(traced, entry, key, self._signature)

    def __repr__(self) -> str:
        return f"<Lowered {self.name}: {len(self.trace.records)} ops, {_signature_line(self._signature)}>"


class Compiled:
    """One compiled signature of an ``xla_trace`` function (``lowered.compile()``): its
    executable's optimized HLO, cost and memory analyses, and a call that runs it with the
    same argument structure, writing state back as the function's own call does."""

    def __init__(self, traced, entry, key, signature):
        self._traced = traced
        self._entry = entry
        self._key = key
        self._signature = signature
        self.trace = entry.trace
        self.in_avals = list(entry.optimized.in_avals)
        self.out_avals = list(entry.optimized.out_avals)

    @property
    def executable(self):
        """The runtime Executable (hlotrace.runtime)."""
        entry = self._entry
        entry.settle()
        return entry.executable

    def as_text(self) -> str:
        """XLA's optimized HLO module (``HloModule jit_<name>``: fusions, layouts, schedule)."""
        return self.executable.hlo_text()

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost estimate of one run: ``flops``, ``transcendentals``, ``bytes accessed``
        (and per-operand ``bytes accessed0{}``, ...)."""
        return self.executable.cost_analysis()

    def memory_analysis(self) -> dict[str, int]:
        """XLA's memory plan in bytes: ``temp``, ``argument``, ``output``, ``alias`` (outputs
        written into donated inputs) and ``generated_code``."""
        return self.executable.memory_stats()

    def __call__(self, *args, **kwargs):
        traced = self._traced
        pipeline = self._key[0]
        try:
            key, _, _, held, slots, inputs, _ = traced._key(args, kwargs, pipeline)
        except ArrayArgument:
            return self(*wrap_arrays(args), **wrap_arrays(kwargs))
        if key != self._key:
            now = recompiles.describe(pipeline, args, kwargs, held, slots)
            lines = recompiles.differences(self._signature, now) or [
                "the state the arguments hold (a module's or optimizer's structure)"
            ]
            raise TraceError(
                f"this Compiled {_function_name(traced)} was compiled for other arguments: "
                f"{'; '.join(lines)} (compiled -> given). Call {_function_name(traced)}(...) to compile "
                f"another signature, or lower and compile one for these arguments"
            )
        return self._entry(inputs)

    def __repr__(self) -> str:
        from hlotrace.lowering.builder import module_name  # lazy: loads jax (not at import time)

        return f"<Compiled {module_name(_function_name(self._traced))}: {_signature_line(self._signature)}>"


def _signature_line(signature: dict[str, str]) -> str:
    """One line of a recompiles.describe() signature: each argument path, a state holder with
    its tensors' count (its structural key left out), the aliasing when some tensor is
    reached twice, the pass pipeline last (long, and seldom what differs)."""
    parts = []
    for path, value in signature.items():
        if path == "pass pipeline" or path.endswith((" structure", " state")):
            continue
        if path == "aliasing" and value == "every argument tensor distinct":
            continue
        state = signature.get(f"{path} state")
        parts.append(f"{path}: {value} ({state})" if state is not None else f"{path}: {value}")
    parts.append(f"passes {signature.get('pass pipeline', '?')}")
    return ", ".join(parts)


def describe_entry(number: int, entry, signature: dict[str, str] | None) -> str:
    """``step.describe_entries()``'s line for one entry."""
    described = _signature_line(signature) if signature is not None else "(signature not recorded)"
    if entry.upgrade is not None:
        cache = "quick executable; the optimized one compiling"
    elif getattr(entry.executable, "from_disk_cache", False):
        cache = "loaded from the disk cache"
    else:
        cache = "compiled"
    return f"{number}. {described} -- {len(entry.trace.records)} ops, {cache}"
