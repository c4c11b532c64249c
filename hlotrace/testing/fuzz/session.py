"""A fuzzing session: generate, check, shrink and save, for a time budget, in worker processes.

Program ``i`` of a session with seed ``S`` is ``generate(program_seed(S, i))``: the same
seed gives the same programs in the same order (how many fit in the time budget depends on
the machine). Each worker process checks whole programs (generation, every oracle, and the
shrinking of a bug it finds); a worker that dies (XLA or jaxlib aborting) is reported as a
crash with the program's seed, and replaced. A program the generator could not build (no op
fitted, or an op's reference failed) is no finding: the report counts it as not generated,
apart from the programs that ran (which alone make the throughput).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib
import importlib.util
import multiprocessing
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

import hlotrace  # noqa: F401
from hlotrace.metrics import metrics
from hlotrace.testing.fuzz.oracles import BUGS, CLASSES, CRASH, XLA_DISAGREEMENT, Finding, Oracles, check

# Classes worth a shrunk, saved repro (undefined inputs are counted, not saved).
SAVED_CLASSES = (*BUGS, XLA_DISAGREEMENT)


def program_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


@dataclass
class Settings:
    seed: int = 0
    ops: tuple[str, ...] | None = None
    passes: tuple[str, ...] | None = None
    pipeline: str | None = None
    imports: tuple[str, ...] = ()
    out_dir: str | None = None
    interpreter: bool = True
    max_ops: int = 30
    platform: str | None = None
    shrink: bool = True
    devices: int | None = None  # the spmd oracle's mesh size (hlotrace fuzz --devices N)
    eager_device: str = "short"  # the eager-device oracle: "all", "short" or "off" (--eager-device)


@dataclass
class Outcome:
    """What checking one program found (picklable: it crosses the worker boundary)."""

    index: int
    seed: int
    size: int = 0
    findings: list = field(default_factory=list)  # (kind, oracle, output, evidence)
    skipped: list = field(default_factory=list)  # reasons
    saved: str | None = None
    description: str = ""
    shrunk_size: int | None = None
    shrink_checks: int = 0
    not_generated: str | None = None  # why the generator could not build this program
    metrics: dict = field(default_factory=dict)  # hlotrace.metrics() counters this program moved


@dataclass
class Report:
    """A session's counts. ``programs`` (and the throughput) counts the programs that ran;
    a program the generator could not build is counted apart, in ``not_generated``."""

    programs: int = 0
    records: int = 0
    seconds: float = 0.0
    classes: Counter = field(default_factory=Counter)  # class -> programs with such a finding
    saved: list = field(default_factory=list)  # (class, path, description, shrunk size)
    skipped: Counter = field(default_factory=Counter)
    examples: dict = field(default_factory=dict)  # class -> first Outcome of that class
    not_generated: int = 0
    not_generated_example: Outcome | None = None  # the first one, with its seed and why
    metrics: Counter = field(default_factory=Counter)  # summed over the programs (every worker)

    @property
    def bugs(self) -> int:
        return sum(self.classes[c] for c in BUGS)

    def add(self, outcome: Outcome) -> None:
        self.metrics.update(outcome.metrics)
        if outcome.not_generated is not None:
            self.not_generated += 1
            self.not_generated_example = self.not_generated_example or outcome
            return
        self.programs += 1
        self.records += outcome.size
        for kind in {f[0] for f in outcome.findings}:
            self.classes[kind] += 1
            self.examples.setdefault(kind, outcome)
        for reason in outcome.skipped:
            self.skipped[reason] += 1
        if outcome.saved:
            kind = outcome.findings[0][0] if outcome.findings else ""
            self.saved.append((kind, outcome.saved, outcome.description, outcome.shrunk_size))

    def table(self) -> str:
        rate = self.programs / self.seconds if self.seconds else 0.0
        lines = [
            f"{self.programs} programs ({self.records} ops) in {self.seconds:.0f} s: {rate:.2f} programs/s, "
            f"{rate * 3600:,.0f} per hour"
            + (f" (programs that ran; {self.not_generated} not generated)" if self.not_generated else ""),
            f"{'class':<18} {'programs':>8}  first seed",
        ]
        for kind in CLASSES:
            example = self.examples.get(kind)
            lines.append(f"{kind:<18} {self.classes[kind]:>8}  {example.seed if example else '-'}")
        first = self.not_generated_example
        lines.append(f"{'not generated':<18} {self.not_generated:>8}  {first.seed if first else '-'}")
        if first:
            lines.append(f"not generated, first: {first.not_generated}")
        for _kind, path, description, size in self.saved:
            lines.append(f"saved {path} ({size} ops): {description}")
        if self.skipped:
            top = ", ".join(f"{reason} ({n})" for reason, n in self.skipped.most_common(3))
            lines.append(f"oracles skipped: {top}")
        m = self.metrics
        if m:
            lines.append(
                f"work (hlotrace.metrics, all workers): {m['compiles']:.0f} XLA compiles "
                f"({m['compile_seconds']:.1f} s), {m['executions']:.0f} executions, "
                f"{m['memory_cache_hits']:.0f} in-process compile-cache hits"
            )
        return "\n".join(lines)


_IMPORTED: set = set()


def import_user_modules(names) -> None:
    """Import each of ``names`` once per process: a module name (``mypkg.ops``) or a ``.py``
    file path."""
    for name in names:
        key = os.path.abspath(name) if name.endswith(".py") or os.sep in name else name
        if key in _IMPORTED:
            continue
        if name.endswith(".py") or os.sep in name:
            if not os.path.exists(name):
                raise ImportError(f"no such file: {name}")
            module_name = f"hlotrace_user_{os.path.splitext(os.path.basename(name))[0]}"
            spec = importlib.util.spec_from_file_location(module_name, name)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(name)
        _IMPORTED.add(key)


# -- one program ------------------------------------------------------------------------

_WORKER: dict = {}


def _oracles(settings: Settings) -> Oracles:
    if "oracles" not in _WORKER:
        from hlotrace.testing.fuzz.interpreter import Interpreter  # lazy: loads testing.fuzz.interpreter (1 module)

        _WORKER["oracles"] = Oracles(
            passes=settings.passes,
            pipeline=settings.pipeline,
            interpreter=Interpreter() if settings.interpreter else None,
            platform=settings.platform,
            devices=settings.devices,
            eager_device=settings.eager_device,
        )
    return _WORKER["oracles"]


def _init_worker(settings: Settings) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import_user_modules(settings.imports)


def run_one(settings: Settings, index: int) -> Outcome:
    """Generate, check and (on a finding worth saving) shrink and save program ``index``;
    the outcome carries the hlotrace.metrics counters the work moved (summed in the report)."""
    before = metrics()
    outcome = _run_one(settings, index)
    after = metrics()
    outcome.metrics = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    return outcome


def _run_one(settings: Settings, index: int) -> Outcome:
    from hlotrace.testing.fuzz.generate import GeneratorError, generate  # lazy: loads testing.fuzz.generate (6 modules)
    from hlotrace.testing.fuzz.shrink import describe, shrink  # lazy: loads testing.fuzz.shrink (1 module)

    seed = program_seed(settings.seed, index)
    outcome = Outcome(index, seed)
    try:
        program = generate(seed, settings.ops, settings.max_ops)
    except GeneratorError as exc:  # not a finding: no program ran
        outcome.not_generated = " ".join(str(exc).split())
        return outcome
    outcome.size = program.size
    oracles = _oracles(settings)
    verdict = check(program, dataclasses.replace(oracles, rotate=index))
    outcome.findings = [(f.kind, f.oracle, f.output, f.evidence) for f in verdict.findings]
    outcome.skipped = sorted(set(verdict.skipped.values()))
    worth = [f for f in verdict.findings if f.kind in SAVED_CLASSES]
    if worth and settings.out_dir:
        finding = next((f for f in worth if f.kind in BUGS), worth[0])
        if finding.oracle == "spmd" and verdict.layout:  # shrink (and save) on the layout it showed on
            program = dataclasses.replace(program, meta={**program.meta, "spmd": verdict.layout})
        try:
            small, found, checks = shrink(program, finding, oracles) if settings.shrink else (program, finding, 0)
        except Exception as exc:  # a shrinker bug must not end the session: save the program whole
            small, found, checks = program, finding, 0
            outcome.skipped.append(f"shrinking failed: {type(exc).__name__}: {exc}")
        # The shrinker re-checks with the oracles the finding needed; the small program is
        # checked by all of them once more (an interpreter that could not run the whole
        # program may run this one, and turn a rule bug into an XLA disagreement).
        final = check(small, oracles)
        again = next((f for f in final.findings if f.oracle == found.oracle), None) or final.first()
        if again is not None:
            found = again
        small.description = describe(small, found)
        layout = small.meta.get("spmd") if found.oracle == "spmd" else None
        small.meta = {"class": found.kind, "oracle": found.oracle, **({"spmd": layout} if layout else {})}
        if found.kind != finding.kind:  # the shrunk program's verdict replaces the first one
            outcome.findings = [f for f in outcome.findings if (f[0], f[1]) != (finding.kind, finding.oracle)]
            outcome.findings.insert(0, (found.kind, found.oracle, found.output, f"after shrinking: {found.evidence}"))
        os.makedirs(settings.out_dir, exist_ok=True)
        path = os.path.join(settings.out_dir, f"{found.kind.replace(' ', '-')}-{seed}.trace.json")
        small.save(path)
        outcome.saved, outcome.description = path, small.description
        outcome.shrunk_size, outcome.shrink_checks = small.size, checks
    return outcome


# -- the session --------------------------------------------------------------------------


def _crash(index: int, seed: int, why: str) -> Outcome:
    return Outcome(index, seed, findings=[(CRASH, "worker", None, why)])


def fuzz(
    settings: Settings,
    seconds: float,
    jobs: int = 1,
    max_programs: int | None = None,
    progress=None,
    stop_on_bug: bool = False,
) -> Report:
    """Fuzz for ``seconds`` (or ``max_programs``, or until the first bug with ``stop_on_bug``);
    ``progress(report)`` is called as results arrive. ``jobs`` > 1 checks programs in that
    many worker processes."""
    report = Report()
    start = time.perf_counter()
    deadline = start + seconds
    limit = max_programs if max_programs is not None else sys.maxsize

    def done(outcome: Outcome) -> None:
        nonlocal deadline
        report.add(outcome)
        report.seconds = time.perf_counter() - start
        if stop_on_bug and report.bugs:
            deadline = 0.0
        if progress:
            progress(report)

    if jobs <= 1:
        _init_worker(settings)
        index = 0
        while index < limit and time.perf_counter() < deadline:
            done(run_one(settings, index))
            index += 1
        _close_worker()
        report.seconds = time.perf_counter() - start
        return report
    context = multiprocessing.get_context("spawn")
    index = 0
    while index < limit and time.perf_counter() < deadline:
        pool = concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_init_worker, initargs=(settings,)
        )
        pending: dict = {}
        try:
            while (index < limit and time.perf_counter() < deadline) or pending:
                while len(pending) < 2 * jobs and index < limit and time.perf_counter() < deadline:
                    pending[pool.submit(run_one, settings, index)] = index
                    index += 1
                finished, _ = concurrent.futures.wait(pending, timeout=1.0, return_when="FIRST_COMPLETED")
                for future in finished:
                    i = pending.pop(future)
                    done(future.result())
        except concurrent.futures.process.BrokenProcessPool:
            # A worker died: which program killed it is not known, so each in-flight one is
            # re-run alone; the one that dies again is the crash.
            for i in sorted(pending.values()):
                done(_run_alone(settings, i, context))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    report.seconds = time.perf_counter() - start
    return report


def _run_alone(settings: Settings, index: int, context) -> Outcome:
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=context, initializer=_init_worker, initargs=(settings,)
    ) as pool:
        try:
            return pool.submit(run_one, settings, index).result()
        except concurrent.futures.process.BrokenProcessPool:
            outcome = _crash(index, program_seed(settings.seed, index), "the process checking this program died")
    _save_crash(settings, outcome)
    return outcome


def _save_crash(settings: Settings, outcome: Outcome) -> None:
    """Save the program that killed its worker, whole: generating it runs only the NumPy
    references, so this process can; checking it (and so shrinking it) cannot."""
    from hlotrace.testing.fuzz.generate import generate  # lazy: loads testing.fuzz.generate (6 modules)
    from hlotrace.testing.fuzz.shrink import describe  # lazy: loads testing.fuzz.shrink (1 module)

    if not settings.out_dir:
        return
    program = generate(outcome.seed, settings.ops, settings.max_ops)
    outcome.size = program.size
    crash = Finding(CRASH, "worker", None, "the process checking it died (not shrunk)")
    program.description = describe(program, crash)
    program.meta = {"class": CRASH, "oracle": "worker"}
    os.makedirs(settings.out_dir, exist_ok=True)
    path = os.path.join(settings.out_dir, f"crash-{outcome.seed}.trace.json")
    program.save(path)
    outcome.saved, outcome.description, outcome.shrunk_size = path, program.description, program.size


def _close_worker() -> None:
    oracles = _WORKER.pop("oracles", None)
    if oracles is not None and oracles.interpreter is not None:
        oracles.interpreter.close()
