"""Run a program against every oracle and classify each disagreement.

Oracles: the eager NumPy result (what hlotrace promises), the compiled PJRT result of the
module as lowered, the compiled result with each registered pass switched on (all exact
passes at once, then all passes; each alone when a group disagrees), the StableHLO
reference interpreter (in a worker subprocess), the program run eagerly by the device engine
(``eager-device``), with ``devices`` the compiled program on a
mesh of that many devices (its inputs placed at random: hlotrace.testing.fuzz.spmd), and a
float64 re-execution of the eager program, the judge that decides which side is wrong.

The tolerance of each output and the comparisons: hlotrace.testing.fuzz.compare.

Classes (each finding carries its evidence):
  rule bug          the compiled result disagrees with an eager result that the float64 judge
                    confirms, and the interpreter (when it runs the module) does not side with
                    the eager result; or the module does not lower, verify or compile;
  pass bug          the module as lowered agrees, the module after a pass does not (an exact
                    pass: not bitwise equal; any pass: outside the tolerance), or a pass fails;
  engine bug        the program run eagerly by the device engine (each op a one-op executable
                    of its lowering rule) disagrees with the compiled module (bitwise where only
                    elementwise ops compute the output, else within the tolerance) or with eager
                    NumPy, where the compiled module agrees with NumPy; or an application fails
                    there (hlotrace.testing.fuzz.eager_device; ``eager_device``: "short" programs
                    by default, "all", "off");
  spmd bug          with ``devices`` (or a layout saved with the program): the module compiled for
                    a mesh, its inputs placed at random, disagrees with the one-device compiled
                    result (bitwise for elementwise outputs, else within the tolerance), or does
                    not lower, compile or run there (hlotrace.testing.fuzz.spmd);
  XLA disagreement  the interpreter agrees with eager NumPy and XLA does not (or the other way
                    round): the StableHLO says one thing and XLA computes another;
  undefined input   the eager result is itself off from the float64 judge at the elements that
                    disagree (overflow, cancellation, a comparison of near-equal values), or an
                    op on the path is outside its declared domain (OpDef.domain). A NaN or inf
                    that eager and the judge agree on is a defined result, not an undefined input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlotrace import passes
from hlotrace.errors import HlotraceError
from hlotrace.ops.registry import OPS
from hlotrace.passes.registry import PASSES, platform_defaults
from hlotrace.testing.fuzz.compare import (
    ILL_CONDITIONED,
    PERTURBATIONS,
    bit_differences,
    disagreeing,
    first_diff,
    mismatches_or_shape,
    only_subnormals,
    output_tolerance,
    path_records,
    record_tolerance,
)
from hlotrace.testing.fuzz.evaluate import evaluate, is_float
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.values import flush_subnormals, subnormals

RULE_BUG = "rule bug"
PASS_BUG = "pass bug"
XLA_DISAGREEMENT = "XLA disagreement"
UNDEFINED_INPUT = "undefined input"
CRASH = "crash"  # the process checking the program died (XLA or jaxlib aborted)
SPMD_BUG = "spmd bug"  # on a mesh the program disagrees with one device (hlotrace.testing.fuzz.spmd)
# Run eagerly by the device engine, the program disagrees with the compiled module or NumPy
# while the compiled module agrees with NumPy (hlotrace.testing.fuzz.eager_device).
ENGINE_BUG = "engine bug"
CLASSES = (RULE_BUG, PASS_BUG, SPMD_BUG, ENGINE_BUG, CRASH, XLA_DISAGREEMENT, UNDEFINED_INPUT)
BUGS = (RULE_BUG, PASS_BUG, SPMD_BUG, ENGINE_BUG, CRASH)  # what makes `hlotrace fuzz` exit with status 1
# The interpreter runs programs whose values hold at most this many elements in all (it
# takes ~370 ns per element per op, and much longer in cumulative sums and gathers).
INTERPRETER_ELEMENTS = 4096


@dataclass(frozen=True)
class Finding:
    kind: str  # one of CLASSES
    oracle: str  # "compiled", "pass:<name>", "pipeline:<text>", "interpreter", "lowering"
    output: int | None  # the program output that disagrees (None: the whole module failed)
    evidence: str  # one line

    def signature(self) -> tuple:
        """What the shrinker keeps constant: the same class, oracle and output."""
        return (self.kind, self.oracle, self.output)

    def __str__(self) -> str:
        where = f" output {self.output}" if self.output is not None else ""
        return f"{self.kind} [{self.oracle}{where}]: {self.evidence}"


@dataclass
class Verdict:
    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # oracle -> why it did not run
    compiles: int = 0
    layout: dict | None = None  # the spmd oracle's layout of its findings (spmd.Layout.to_json)

    @property
    def bugs(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in BUGS]

    def first(self) -> Finding | None:
        return (self.bugs or self.findings or [None])[0]


@dataclass
class Oracles:
    """Which oracles run: ``passes`` (names; default every registered pass), ``pipeline`` (a
    whole pipeline compared too; default none), ``interpreter`` (an
    :class:`~hlotrace.testing.fuzz.interpreter.Interpreter`, or None to skip it)."""

    passes: tuple[str, ...] | None = None
    pipeline: str | None = None  # also compare the module after this whole pipeline
    interpreter: object | None = None
    platform: str | None = None
    # A fuzzing session checks one pass group per program, in turn (program index here):
    # ~30% more programs per hour, each pass still on every other program. None: all groups.
    rotate: int | None = None
    # The spmd oracle: each program's inputs placed at random on a mesh of this many devices
    # (None: only for a program saved with its layout, see hlotrace.testing.fuzz.spmd).
    devices: int | None = None
    # The eager-device oracle (hlotrace.testing.fuzz.eager_device): "all" programs, "short"
    # ones (the default: few one-op compiles) or "off".
    eager_device: str = "short"

    def pass_names(self) -> tuple[str, ...]:
        """The passes to check, in pipeline order: every platform's default pipeline's, then the rest."""
        if self.passes is not None:
            return self.passes
        from hlotrace.passes.manager import parse_pipeline  # lazy: loads jax and hlotrace's own passes

        default = list(dict.fromkeys(s.name for p in platform_defaults().values() for s in parse_pipeline(p)))
        return (*default, *sorted(set(PASSES) - set(default)))


# -- the check ----------------------------------------------------------------------------


def _flushed(program: Program) -> list[np.ndarray] | None:
    """Eager outputs with subnormals flushed at the inputs, constants and every step."""
    inputs = [flush_subnormals(a) if is_float(np.asarray(a).dtype) else a for a in program.inputs]
    env = evaluate(program.trace, inputs, flush=True)
    return [env[v] for v in program.trace.outputs]


class _Run:
    """The results of one program, computed on demand."""

    def __init__(self, program: Program, oracles: Oracles):
        self.program = program
        self.oracles = oracles
        self.verdict = Verdict()
        env = evaluate(program.trace, program.inputs)
        self.eager = [env[v] for v in program.trace.outputs]
        self._judge = self._alt = self._perturbed = self._nudged = None
        self.tolerances = [output_tolerance(program, v) for v in program.trace.outputs]

    @property
    def judge(self):
        if self._judge is None:
            env = evaluate(self.program.trace, self.program.inputs, wide=True)
            self._judge = [env[v] for v in self.program.trace.outputs]
        return self._judge

    @property
    def nudged(self):
        """PERTURBATIONS eager runs (each a list of outputs) in which every float record's
        result is nudged by its own tolerance: all up, all down, then random signs (seeded)."""
        if self._nudged is None:
            trace = self.program.trace
            self._nudged = []
            for k in range(PERTURBATIONS):
                rng = np.random.default_rng(k)

                def nudge(index, value, k=k, rng=rng):
                    tolerance = record_tolerance(self.program, index)
                    if tolerance is None or value.size == 0:
                        return value
                    signs = np.full(value.shape, (1.0, -1.0)[k]) if k < 2 else rng.choice((-1.0, 1.0), size=value.shape)
                    wide = value.astype(np.float64)
                    return (wide * (1 + tolerance.rtol * signs) + tolerance.atol * signs).astype(value.dtype)

                env = evaluate(trace, self.program.inputs, perturb=nudge)
                self._nudged.append([env[v] for v in trace.outputs])
        return self._nudged

    @property
    def perturbed(self):
        """Per output, the nudged eager result furthest from the plain one: how far the
        program carries the errors the table allows."""
        if self._perturbed is None:
            self._perturbed = []
            for k, eager in enumerate(self.eager):
                candidates = [run[k] for run in self.nudged]
                if not is_float(eager.dtype) or eager.size == 0:
                    self._perturbed.append(candidates[0])
                    continue
                with np.errstate(all="ignore"):
                    wide = eager.astype(np.float64)
                    distances = np.stack([np.abs(c.astype(np.float64) - wide) for c in candidates])
                    distances = np.where(np.isnan(distances), np.inf, distances)
                pick = np.argmax(distances, axis=0)
                self._perturbed.append(np.choose(pick, candidates))
        return self._perturbed

    def ill_conditioned(self, k: int) -> np.ndarray:
        """Elements not determined by the program at its precision, so not checked: float
        ones that the table's per-op errors move by more than ILL_CONDITIONED x the output's
        own tolerance, or to NaN; integer or bool ones that any nudge changes (argsort of a near tie, a
        comparison of near-equal values)."""
        expected = self.eager[k]
        if expected.size == 0:
            return np.zeros(expected.shape, bool)
        if not is_float(expected.dtype):
            unsettled = np.zeros(expected.shape, bool)
            for run in self.nudged:
                if np.shape(run[k]) == expected.shape:
                    unsettled |= np.asarray(run[k]) != expected
            return unsettled
        tolerance = self.tolerances[k]
        with np.errstate(all="ignore"):
            e = expected.astype(np.float64)
            moved = np.abs(np.asarray(self.perturbed[k], np.float64) - e)
            moved = np.where(np.isnan(moved), np.inf, moved)  # a nudge out of an op's domain (acos(1 + ulp))
            return np.isfinite(e) & (moved > ILL_CONDITIONED * (tolerance.atol + tolerance.rtol * np.abs(e)))

    @property
    def alternative(self):
        if self._alt is None:
            self._alt = _flushed(self.program)
        return self._alt

    def bad(self, k: int, actual) -> np.ndarray:
        expected = self.eager[k]
        bad = mismatches_or_shape(actual, expected, self.tolerances[k])
        if bad.any():
            bad = disagreeing(
                actual, expected, self.tolerances[k], self.judge[k], self.alternative[k], self.perturbed[k]
            )
            chaotic = bad & self.ill_conditioned(k)
            if chaotic.any():
                bad &= ~chaotic
                self.verdict.skipped[f"output {k}"] = f"{int(chaotic.sum())} ill-conditioned element(s) not checked"
        return bad

    def compile_run(self, lowered):
        from hlotrace.testing.differential import run_lowered  # lazy: loads testing.differential (1 module)

        self.verdict.compiles += 1
        return run_lowered(lowered, self.program.inputs, platform=self.oracles.platform)

    def add(self, kind, oracle, output, evidence):
        self.verdict.findings.append(Finding(kind, oracle, output, " ".join(evidence.split())))


def check(program: Program, oracles: Oracles | None = None) -> Verdict:
    """Every oracle on ``program``; the verdict lists each disagreement, classified."""
    from hlotrace.lowering import lower_trace  # lazy: loads jax

    oracles = oracles or Oracles()
    run = _Run(program, oracles)
    try:
        lowered = lower_trace(program.trace)
        base = run.compile_run(lowered)
    except Exception as exc:  # an error, or a raw exception out of a rule or the bindings
        run.add(RULE_BUG, "lowering", None, f"{type(exc).__name__}: {exc}")
        return run.verdict
    base_bad = []
    for k, actual in enumerate(base):
        bad = run.bad(k, actual)
        base_bad.append(bad.any())
        if bad.any():
            _classify_compiled(run, lowered, k, actual, bad)
    _check_interpreter(run, lowered, base_bad)
    from hlotrace.testing.fuzz.eager_device import check_eager_device  # cycle: eager_device imports this module

    check_eager_device(run, base, base_bad)
    _check_passes(run, lowered, base, base_bad)
    if oracles.devices or program.meta.get("spmd"):
        from hlotrace.testing.fuzz.spmd import check_spmd  # cycle: testing.fuzz.spmd imports this module

        check_spmd(run, lowered, base, base_bad)
    return run.verdict


def _check_passes(run: _Run, lowered, base, base_bad: list) -> None:
    """Two compiles cover every pass: all exact passes at once (bitwise equal to the module as
    lowered), then all passes at once (within the tolerance). When one of them disagrees,
    each pass in it is switched on alone to name the culprit."""
    names = run.oracles.pass_names()
    exact = [n for n in names if PASSES[n].exact]
    # All passes = the exact ones, then the others: when the others change nothing, the
    # module is the exact group's and is not compiled again.
    everything = exact + [n for n in names if not PASSES[n].exact]
    groups = [(exact, True), (everything, False)] if len(exact) < len(names) else [(exact, True)]
    if run.oracles.rotate is not None:
        groups = [groups[run.oracles.rotate % len(groups)]]
    texts = {lowered.text(): None}
    for group, is_exact in groups:
        found = _run_variant(run, lowered, ",".join(group), is_exact, base, base_bad, texts)
        if found and len(group) > 1:
            for name in group:
                _run_variant(run, lowered, name, PASSES[name].exact, base, base_bad, texts, oracle=f"pass:{name}")
    pipeline = run.oracles.pipeline
    if pipeline:
        _run_variant(run, lowered, pipeline, False, base, base_bad, texts, oracle=f"pipeline:{pipeline}")


def _run_variant(run: _Run, lowered, pipeline: str, exact: bool, base, base_bad, texts: dict, oracle=None) -> bool:
    """Compile ``lowered`` after ``pipeline`` (unless an identical module was compiled
    already: ``texts`` maps module text to its results, None for the module as lowered);
    whether a disagreement was found (findings are added only for single passes, i.e. when
    ``oracle`` is given or the pipeline is one pass)."""
    name = oracle or (f"pass:{pipeline}" if "," not in pipeline else f"passes:{pipeline}")
    report = oracle is not None or "," not in pipeline
    try:
        after = passes.run(lowered, pipeline)
    except Exception as exc:  # a pass that fails or breaks the module is a pass bug
        if report:
            run.add(PASS_BUG, name, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return True
    text = after.text()
    if text in texts:
        results = texts[text]
        if results is None:
            return False  # the pass changed nothing
    else:
        try:
            results = texts[text] = run.compile_run(after)
        except HlotraceError as exc:
            if report:
                run.add(PASS_BUG, name, None, f"the module after the pass does not compile: {exc}")
            return True
    before = len(run.verdict.findings)
    _check_variant(run, name, exact, base, results, base_bad)
    found = len(run.verdict.findings) > before
    if found and not report:
        del run.verdict.findings[before:]
    return found


def _classify_compiled(run: _Run, lowered, k: int, actual, bad) -> None:
    expected, judge = run.eager[k], run.judge[k]
    if np.shape(actual) != np.shape(expected):
        run.add(RULE_BUG, "compiled", k, f"shape {np.shape(actual)}, eager {np.shape(expected)}")
        return
    reason = domain_violation(run.program, run.program.trace.outputs[k])
    if reason:
        run.add(UNDEFINED_INPUT, "compiled", k, f"{first_diff(actual, expected, bad)}; {reason}")
        return
    # A NaN or infinity that eager and the judge agree on is a defined result (NaN in, NaN
    # out): a compiled result without it is wrong. Only where they differ is the input undefined.
    eager_off = disagreeing(expected, _narrow(judge, expected.dtype), run.tolerances[k]) & bad
    if eager_off.any():
        run.add(
            UNDEFINED_INPUT,
            "compiled",
            k,
            f"{first_diff(actual, expected, bad)}; the float64 re-execution differs from eager there",
        )
        return
    run.add(RULE_BUG, "compiled", k, first_diff(actual, expected, bad))


def subnormal_note(program: Program, var_id: int) -> str:
    """``; subnormal operands ...`` when an input or constant the output depends on holds a
    float subnormal (XLA:CPU flushes some of them and not others), else ``""``."""
    values = dict(zip(program.trace.inputs, program.inputs, strict=True)) | dict(program.trace.constants)
    used = {v for i in path_records(program, var_id) for v in program.trace.records[i].inputs}
    if any(v in values and is_float(values[v].dtype) and subnormals(values[v]).any() for v in used):
        return "; subnormal operands on the path (XLA:CPU flushes some of them)"
    return ""


def domain_violation(program: Program, var_id: int) -> str | None:
    """The first record on ``var_id``'s path whose operands are outside its op's domain."""
    path = path_records(program, var_id)
    if not any(OPS[program.trace.records[i].op].domain for i in path):
        return None
    env = evaluate(program.trace, program.inputs)
    for i in path:
        record = program.trace.records[i]
        domain = OPS[record.op].domain
        reason = domain and domain(*[env[v] for v in record.inputs], **record.attrs)
        if reason:
            return f"record {i} {record.op}: {reason}"
    return None


def _narrow(judge, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(judge).astype(dtype)


def _check_interpreter(run: _Run, lowered, base_bad: list) -> None:
    interpreter = run.oracles.interpreter
    if interpreter is None:
        run.verdict.skipped["interpreter"] = "not asked for"
        return
    if sum(int(np.prod(v.shape)) for v in run.program.trace.vars.values()) > INTERPRETER_ELEMENTS:
        run.verdict.skipped["interpreter"] = "too large for the interpreter"
        return
    results = interpreter.run(lowered.text(), run.program.inputs)
    if isinstance(results, str):
        run.verdict.skipped["interpreter"] = results
        return
    for k, value in enumerate(results):
        bad = run.bad(k, value)
        compiled_finding = next((f for f in run.verdict.findings if f.output == k and f.oracle == "compiled"), None)
        if compiled_finding is not None and compiled_finding.kind == RULE_BUG and not bad.any():
            # The StableHLO computes what eager NumPy does in the spec's interpreter: XLA is the odd one out.
            run.verdict.findings.remove(compiled_finding)
            note = subnormal_note(run.program, run.program.trace.outputs[k])
            run.add(
                XLA_DISAGREEMENT, "compiled", k, f"{compiled_finding.evidence}; the interpreter agrees with eager{note}"
            )
        elif bad.any() and not base_bad[k]:
            evidence = f"{first_diff(value, run.eager[k], bad)} (XLA agrees with eager)"
            reason = domain_violation(run.program, run.program.trace.outputs[k])
            if reason:
                run.add(UNDEFINED_INPUT, "interpreter", k, f"{evidence}; {reason}")
            else:
                note = subnormal_note(run.program, run.program.trace.outputs[k])
                run.add(XLA_DISAGREEMENT, "interpreter", k, evidence + note)


def _check_variant(run: _Run, oracle: str, exact: bool, base, results, base_bad: list) -> None:
    from hlotrace.testing.differential import bitwise_equal  # lazy: loads testing.differential (1 module)

    for k, (before, after) in enumerate(zip(base, results, strict=True)):
        if base_bad[k]:
            # The module as lowered is already wrong here (reported as such); XLA's wrong
            # results need not be repeatable (exp of a folded NaN returns uninitialized memory).
            continue
        if exact and not bitwise_equal(after, before):
            diff = bit_differences(after, before)
            evidence = f"an exact pass changed bits: {first_diff(after, before, diff)} (vs no pass)"
            if only_subnormals(before, after, diff):
                # XLA:CPU flushes subnormals in some fusions (and constant folding does not):
                # the pass changed which, not the arithmetic.
                run.add(XLA_DISAGREEMENT, oracle, k, f"{evidence}; only subnormals and zeros differ")
            else:
                run.add(PASS_BUG, oracle, k, evidence)
            continue
        if run.bad(k, after).any():
            run.add(PASS_BUG, oracle, k, first_diff(after, run.eager[k], run.bad(k, after)))
