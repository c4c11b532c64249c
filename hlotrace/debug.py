"""Which op made the numbers diverge? ``bisect`` runs a recorded program with its
intermediate results as extra outputs and names the first record whose compiled value leaves
the tolerance of a reference.

>>> report = hlotrace.debug.bisect(step, x, y)          # against the eager NumPy run
>>> print(report.text())                                 # or report.to_json()
first divergence: record 12 (exp) at model.py:31 (in forward), module MLP.fc2 ...

References (``against``): ``"eager"`` (the NumPy references, the recording's own values),
``"float64"`` (the references carried in float64 where they accept it), ``"interpreter"``
(the StableHLO reference interpreter, in a subprocess), or another platform (``"cpu"``,
``"cuda"``: the same instrumented module compiled there). Intermediates are added a window
of records at a time (``window``), so memory stays bounded on big programs; the windows go
in program order and the first one holding a divergence ends the search.

Each record is compared with the tolerance table along its path (the table's entry of every
float record it depends on, as the fuzzer's oracles do). The report says when the extra
outputs changed XLA's optimized program (the instrumented module's own results differ from
the original module's) and when a divergence is a known XLA behaviour (subnormals flushed
to zero, which XLA:CPU does and NumPy does not).
"""

from __future__ import annotations

import json
import types
from dataclasses import asdict, dataclass, field

import numpy as np

from hlotrace import state
from hlotrace.arguments import flatten, wrap_arrays
from hlotrace.dtypes import short_name
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace
from hlotrace.ops.registry import OPS
from hlotrace.recording import implicit_tensors
from hlotrace.trace import Trace

AGAINST = ("eager", "float64", "interpreter", "cpu", "cuda")
DEFAULT_WINDOW = 64


@dataclass
class Divergence:
    """The first record outside tolerance."""

    index: int
    op: str
    location: str  # the user's file:line (in function)
    module_path: str  # the nn.Module path (``MLP.fc1``), or ""
    scope: str  # the ``trace.scope`` name, or ""
    output: str  # the record's result, e.g. ``x%12 f32[4,5]``
    elements: int  # how many elements are outside tolerance
    max_error: float  # the largest |actual - reference| among them (nan when a NaN/inf differs)
    where: list[int]  # the index of the first bad element
    actual: float | int | bool
    expected: float | int | bool
    tolerance: str
    inputs: list[str]  # each operand summarised (reference values)
    known: str = ""  # a known XLA behaviour that explains it, or ""


@dataclass
class BisectReport:
    against: str
    records: int  # records in the program
    checked: int  # records compared before the search stopped
    window: int
    divergence: Divergence | None = None
    outputs_agree: bool = True  # the program's own outputs within tolerance of the reference
    instrumented_changed_program: bool = False  # the extra outputs changed the original outputs
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [
            f"bisect against {self.against}: {self.checked} of {self.records} records checked (window {self.window})"
        ]
        d = self.divergence
        if d is None:
            lines.append("no record outside tolerance")
        else:
            where = ", ".join(p for p in (d.location, f"module {d.module_path}" if d.module_path else "") if p)
            lines.append(f"first divergence: record {d.index} ({d.op}) at {where}")
            if d.scope:
                lines.append(f"  scope: {d.scope}")
            lines.append(f"  result {d.output}: {d.elements} element(s) outside {d.tolerance}")
            lines.append(
                f"  first at {tuple(d.where)}: got {d.actual!r}, {self.against} {d.expected!r}; max error {d.max_error:.6g}"
            )
            lines.extend(f"  input {s}" for s in d.inputs)
            if d.known:
                lines.append(f"  known XLA behaviour: {d.known}")
        lines.append("the program's outputs " + ("agree" if self.outputs_agree else "DISAGREE") + " with the reference")
        if self.instrumented_changed_program:
            lines.append(
                "note: adding the intermediates as outputs changed XLA's optimized program (its results differ "
                "from the original module's); the divergence may not be the one the original program has"
            )
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, default=float)


# -- entry points -------------------------------------------------------------------------


def bisect(fn, *args, against: str = "eager", window: int = DEFAULT_WINDOW, platform=None, passes=None, **kwargs):
    """Record ``fn(*args, **kwargs)`` once (eagerly, as an ``xla_trace`` first call does; every
    tensor it updates is put back afterwards) and bisect the recorded program."""
    args, kwargs = wrap_arrays(args), wrap_arrays(kwargs)
    leaves: list = []
    holders: list = []
    flatten((args, kwargs), leaves, [], holders)
    held = state.collect(holders)[1] if holders else []
    inputs, _ = state.distinct_inputs(leaves, held)
    implicit = [t for t in implicit_tensors() if all(t is not u for u in inputs)]
    before = {id(t): np.array(t.numpy()) for t in (*inputs, *implicit)}
    grads = {id(t): t.grad for t in inputs}
    snapshot = state.Snapshot([*inputs, *implicit])
    traced = xla_trace(fn, platform=platform, passes=passes)
    try:
        traced(*args, **kwargs)
    finally:
        snapshot.restore()
    entry = traced._last
    grad_positions = entry.io.grad_inputs if entry.io is not None else ()
    values = [before[id(t)] for t in inputs]
    values += [grads[id(inputs[i])].numpy() for i in grad_positions]
    values += [before[id(t)] for t in entry.late]
    if len(values) != len(entry.trace.inputs):
        raise HlotraceError(f"bisect: found {len(values)} input values for {len(entry.trace.inputs)} trace inputs")
    return bisect_trace(entry.trace, values, against=against, window=window, platform=platform, passes=passes)


def bisect_trace(trace: Trace, inputs, *, against="eager", window=DEFAULT_WINDOW, platform=None, passes=None):
    """Bisect ``trace`` run on ``inputs`` (one array per ``trace.inputs`` entry)."""
    if against not in AGAINST:
        raise HlotraceError(f"bisect: against must be one of {', '.join(AGAINST)}, not {against!r}")
    if window < 1:
        raise HlotraceError(f"bisect: window must be at least 1, not {window}")
    inputs = [np.asarray(a) for a in inputs]
    reference = _reference_values(trace, inputs, against)
    original = _run(trace, list(trace.outputs), inputs, platform, passes)
    report = BisectReport(against, len(trace.records), 0, window)
    if against not in ("eager", "float64"):
        report.notes.append(
            f"the {against} reference runs the same lowered module: it finds where XLA differs from it, "
            f"not a wrong lowering rule (use --against eager or float64 for those)"
        )
    if against in ("eager", "float64"):
        expected_outputs = [reference[v] for v in trace.outputs]
    else:
        by_var = _other_backend(trace, list(trace.outputs), inputs, against)
        expected_outputs = [by_var[v] for v in trace.outputs]
    report.outputs_agree = all(
        not _bad(trace, v, a, e).any() for v, a, e in zip(trace.outputs, original, expected_outputs, strict=True)
    )
    for start in range(0, len(trace.records), window):
        indices = range(start, min(len(trace.records), start + window))
        extra = [trace.records[i].outputs[0] for i in indices]
        outputs = _run(trace, [*trace.outputs, *extra], inputs, platform, passes)
        if any(_bits_differ(a, b) for a, b in zip(outputs, original, strict=False)):
            report.instrumented_changed_program = True
        expected = reference if against in ("eager", "float64") else _other_backend(trace, extra, inputs, against)
        for i, var, actual in zip(indices, extra, outputs[len(trace.outputs) :], strict=True):
            report.checked += 1
            want = expected[var]
            bad = _bad(trace, var, actual, want)
            if bad.any():
                report.divergence = _divergence(trace, i, var, actual, want, bad, reference)
                return report
    return report


# -- running ------------------------------------------------------------------------------


def _instrumented(trace: Trace, outputs: list[int]) -> Trace:
    clone = Trace.from_json(*trace.to_json())
    clone.outputs = list(outputs)
    return clone


def _run(trace: Trace, outputs, inputs, platform, passes) -> list[np.ndarray]:
    import hlotrace.passes.manager as manager  # lazy: loads jax
    from hlotrace import lowering, runtime  # lazy: loads jax

    lowered = lowering.lower_trace(_instrumented(trace, outputs), name=f"{trace.name}_bisect")
    pipeline = manager.resolve(passes, runtime.platform_name(platform))  # the platform's default
    optimized = manager.run(lowered, pipeline) if pipeline else lowered
    exe = runtime.compile(optimized.text(), optimized.in_avals, optimized.out_avals, platform=platform)
    buffers = [exe.to_device(k, np.ascontiguousarray(a)) for k, a in enumerate(inputs)]
    return [np.asarray(b) for b in exe.run(buffers)]


def _reference_values(trace: Trace, inputs, against: str) -> dict[int, np.ndarray]:
    """Every var's eager (or float64) value: also the input summaries for other references."""
    from hlotrace.testing.fuzz.evaluate import evaluate  # lazy: loads testing.fuzz.evaluate (4 modules)

    return evaluate(trace, inputs, wide=against == "float64")


def _other_backend(trace: Trace, extra: list[int], inputs, against: str) -> dict[int, np.ndarray]:
    if against == "interpreter":
        from hlotrace import lowering  # lazy: loads jax
        from hlotrace.testing.fuzz.interpreter import (  # lazy: loads testing.fuzz.interpreter (3 modules)
            Interpreter,
            unsupported_reason,
        )

        text = lowering.lower_trace(_instrumented(trace, extra), name=f"{trace.name}_bisect").text()
        reason = unsupported_reason(text)
        if reason is not None:
            raise HlotraceError(f"bisect: the interpreter cannot run this program ({reason})")
        interpreter = Interpreter()
        try:
            values = interpreter.run(text, inputs)
        finally:
            interpreter.close()
        if isinstance(values, str):  # it crashed or timed out: say so, never zip the reason
            raise HlotraceError(f"bisect: the StableHLO interpreter did not run this program: {values}")
    else:
        values = _run(trace, extra, inputs, against, "")
    return dict(zip(extra, values, strict=True))


# -- comparing ----------------------------------------------------------------------------


def _tolerance(trace: Trace, var: int):
    from hlotrace.testing.fuzz.compare import output_tolerance  # lazy: loads testing.fuzz.compare (7 modules)

    return output_tolerance(types.SimpleNamespace(trace=trace), var)


def _bad(trace: Trace, var: int, actual, expected) -> np.ndarray:
    from hlotrace.testing.tolerances import mismatches  # lazy: loads testing.tolerances (2 modules)

    actual, expected = np.asarray(actual), np.asarray(expected)
    if expected.dtype != actual.dtype:
        with np.errstate(all="ignore"):
            expected = expected.astype(actual.dtype)  # a float64 reference, at the record's dtype
    if actual.shape != expected.shape:
        return np.ones(max(actual.size, 1), bool)
    return mismatches(actual, expected, _tolerance(trace, var))


def _bits_differ(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape != b.shape or a.tobytes() != b.tobytes()


def _summary(trace: Trace, var: int, value) -> str:
    aval = trace.aval(var)
    head = f"x%{var} {short_name(aval.dtype)}[{','.join(map(str, aval.shape))}]"
    if var in trace.constants:
        head += " (constant)"
    value = np.asarray(value)
    if value.size == 0:
        return f"{head}: empty"
    if value.dtype.kind not in "fV" and value.dtype.name != "bfloat16":
        return f"{head}: min {value.min()!r}, max {value.max()!r}"
    wide = value.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    span = f"min {finite.min():.6g}, max {finite.max():.6g}" if finite.size else "no finite values"
    return f"{head}: {span}, {int(np.isnan(wide).sum())} NaN, {int(np.isinf(wide).sum())} inf"


def _divergence(trace: Trace, index: int, var: int, actual, expected, bad, reference) -> Divergence:
    from hlotrace.testing.fuzz.compare import only_subnormals  # lazy: loads testing.fuzz.compare (7 modules)

    record = trace.records[index]
    actual, expected = np.asarray(actual), np.asarray(expected)
    if expected.dtype != actual.dtype:
        with np.errstate(all="ignore"):
            expected = expected.astype(actual.dtype)
    first = tuple(int(k) for k in np.argwhere(bad)[0]) if actual.shape == expected.shape else ()
    with np.errstate(all="ignore"):
        errors = np.abs(actual.astype(np.float64) - expected.astype(np.float64))[bad] if first or bad.size else []
    max_error = float(np.max(errors)) if len(errors) else float("nan")
    known = ""
    if actual.shape == expected.shape and only_subnormals(actual, expected, bad):
        known = "subnormals flushed to zero (XLA:CPU flushes denormals; NumPy keeps them)"
    elif _explained_by_flushed_inputs(trace, record, var, actual, reference):
        known = (
            "its operands hold subnormals, which XLA:CPU flushes to zero: NumPy on the flushed operands "
            "gives XLA's result"
        )
    aval = trace.aval(var)

    return Divergence(
        index=index,
        op=record.op,
        location=str(record.location) if record.location else "",
        module_path=trace.paths.get(index, ""),
        scope=trace.scopes.get(index, ""),
        output=f"x%{var} {short_name(aval.dtype)}[{','.join(map(str, aval.shape))}]",
        elements=int(bad.sum()),
        max_error=max_error,
        where=list(first),
        actual=actual[first].item() if first or actual.ndim == 0 else None,
        expected=expected[first].item() if first or expected.ndim == 0 else None,
        tolerance="rtol {:.2g}, atol {:.2g}".format(*_tolerance(trace, var)[:2]),
        inputs=[_summary(trace, v, reference[v]) for v in record.inputs],
        known=known,
    )


def _explained_by_flushed_inputs(trace: Trace, record, var: int, actual, reference) -> bool:
    from hlotrace.testing.values import flush_subnormals  # lazy: loads testing.values (2 modules)

    operands = [np.asarray(reference[v]) for v in record.inputs]
    flushed = [flush_subnormals(a) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else a for a in operands]
    if all(f is a or np.array_equal(f, a) for f, a in zip(flushed, operands, strict=True)):
        return False  # no subnormal operand
    try:
        with np.errstate(all="ignore"):
            redone = np.asarray(OPS[record.op].reference(*flushed, **record.attrs)).astype(np.asarray(actual).dtype)
    except Exception:
        return False
    return not _bad(trace, var, actual, redone).any()
