"""Columns (test commands), scratch copies of the repository, and running mutants through them."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hlotrace.testing.mutation.catalog import Mutant

PROPERTY_FILE = "tests/test_op_properties.py"
GRADIENT_FILE = "tests/test_gradients.py"
PASSES_DIR = "tests/passes"
PYTEST = ("{python}", "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider")
_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$", re.M)


def pytest_killer(output: str, returncode: int) -> str:
    """The first ``FAILED``/``ERROR`` node id of pytest's short summary, else how it ended."""
    match = _SUMMARY_LINE.search(output)
    if match:
        return match.group(2).strip()
    if returncode < 0:  # no summary: the interpreter itself died (a crash in XLA or MLIR)
        try:
            return f"crashed ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"crashed (signal {-returncode})"
    return f"exit status {returncode}"


@dataclass(frozen=True)
class Column:
    """One way of testing a mutant: a command run in the scratch copy's root.

    A non-zero exit kills the mutant; ``killer`` names what killed it from the output.
    ``contains``: columns whose tests this one also runs, so their kills count here without
    running anything, and ``exclude`` of a contained column that survived is appended to this
    command (its tests already passed). ``runs_property_tests``: a kill by the hinted ops'
    property tests (run first, see :func:`hint_ids`) counts for this column.
    """

    name: str
    argv: tuple[str, ...]  # "{python}" stands for the interpreter running the harness
    description: str
    contains: tuple[str, ...] = ()
    runs_property_tests: bool = False
    exclude: tuple[str, ...] = ()
    killer: Callable[[str, int], str] = pytest_killer
    no_tests_codes: tuple[int, ...] = (4, 5)  # exit codes meaning "ran nothing": a harness error
    # The command for one mutant (replaces argv), e.g. the fuzzer aimed at the mutant's ops.
    argv_for: Callable[[Mutant | None], tuple[str, ...]] | None = None
    default: bool = True  # run unless --columns names the columns
    # Why the column cannot test this mutant (None: it can); such a mutant is "n/a" there
    # and not counted in the column's ratio.
    not_applicable: Callable[[Mutant], str | None] | None = None
    # Run after the mutant is undone, on a kill: the verdict that stands (e.g. a fuzzer
    # repro that also fails on the unmutated tree was not found because of the mutant).
    confirm: Callable[[Scratch, Verdict], Verdict] | None = None
    artifact: Callable[[str], str] | None = None  # the file named in the output, for confirm


COLUMNS: dict[str, Column] = {}


def register_column(column: Column) -> Column:
    COLUMNS[column.name] = column
    return column


register_column(
    Column(
        "property",
        (*PYTEST, PROPERTY_FILE),
        "the generated property tests alone (tests/test_op_properties.py)",
        runs_property_tests=True,
        exclude=("--deselect", PROPERTY_FILE),
    )
)
register_column(
    Column(
        "gradient",
        (*PYTEST, GRADIENT_FILE),
        "the generated gradient tests alone (tests/test_gradients.py)",
        exclude=("--deselect", GRADIENT_FILE),
    )
)
register_column(
    Column(
        "passes",
        (*PYTEST, PASSES_DIR),
        "the pass tests alone (tests/passes/: per-pass rules and the generated differential tests)",
        exclude=("--ignore", PASSES_DIR),
    )
)
register_column(
    Column(
        "suite",
        PYTEST,
        "the whole `make test` suite",
        contains=("property", "gradient", "passes"),
        runs_property_tests=True,
    )
)


FUZZ_SECONDS = 60
# Ops the fuzzer draws besides a mutant's own, so that its op meets broadcasting, reductions,
# reshapes and casts.
FUZZ_COMPANIONS = ("add", "multiply", "sum", "reshape", "astype", "exp")
_SAVED_LINE = re.compile(r"^saved (\S+) \((\d+) ops\): ([^\[]+)\[", re.M)


def fuzz_argv(mutant: Mutant | None) -> tuple[str, ...]:
    """``hlotrace fuzz`` for FUZZ_SECONDS, stopping at the first bug, aimed at the mutant's ops
    (and their companions); every op when the mutant names none (a pass mutant)."""
    argv = ("{python}", "-m", "hlotrace", "fuzz", "--seconds", str(FUZZ_SECONDS), "--jobs", "1", "--seed", "0")
    argv += ("--stop-on-bug", "--out", ".fuzz-mutant")
    if mutant is not None and mutant.ops:
        argv += ("--ops", ",".join(dict.fromkeys((*mutant.ops, *FUZZ_COMPANIONS))))
    if mutant is not None and mutant.family == "sharding":  # the spmd oracle places inputs on a mesh
        argv += ("--devices", "4")
    return argv


def _saved(output: str) -> tuple[list, list]:
    """The (path, size, class) of every repro ``hlotrace fuzz`` saved, and of those that are
    bugs (a rule, pass, spmd or engine bug, or a crash: the fuzzer's ``BUGS``)."""
    from hlotrace.testing.fuzz.oracles import BUGS  # lazy: loads the fuzz oracles (~10 modules)

    found = _SAVED_LINE.findall(output)
    return found, [f for f in found if f[2].strip() in BUGS]


def fuzz_artifact(output: str) -> str:
    """The first repro of a bug that ``hlotrace fuzz`` saved ("" if none)."""
    _, bugs = _saved(output)
    return bugs[0][0] if bugs else ""


def fuzz_killer(output: str, returncode: int) -> str:
    """``fuzzer: rule bug, 1 ops``: the class and size of the first shrunk repro of a bug
    (a rule or pass bug, or a crash), else of the first one saved."""
    found, bugs = _saved(output)
    if found:
        _, size, kind = (bugs or found)[0]
        return f"fuzzer: {kind.strip()}, {size} ops"
    return pytest_killer(output, returncode)


def fuzz_not_applicable(mutant: Mutant) -> str | None:
    """VJP rules (in ``hlotrace/ops/`` and ``hlotrace/autodiff.py``; the catalog names their
    mutants ``...vjp...``) are out of the fuzzer's reach: eager and compiled run the same
    recorded backward ops, and no oracle differentiates. Other mutants of those files (a
    helper a lowering rule imports, say) are the fuzzer's to find."""
    in_vjp_file = mutant.file.startswith("hlotrace/ops/") or mutant.file == "hlotrace/autodiff.py"
    if in_vjp_file and ("vjp" in mutant.id or mutant.family == "vjp"):
        return "a VJP rule: the fuzzer has no gradient oracle"
    return None


def fuzz_confirm(scratch: Scratch, verdict: Verdict) -> Verdict:
    """A fuzzer kill stands only if its shrunk repro passes on the unmutated tree
    (``hlotrace replay`` exits 0): a disagreement the tree has anyway says nothing of the mutant."""
    if not verdict.killed or not verdict.artifact:
        return verdict
    code, output, _, _ = scratch.run(("{python}", "-m", "hlotrace", "replay", verdict.artifact), 300.0)
    if code == 1:
        lines = [line for line in output.splitlines() if line.startswith("verdict:")]
        why = lines[0].removeprefix("verdict:").strip() if lines else "the disagreement reproduces"
        return replace(verdict, killed=False, by=f"not the mutant's: the unmutated tree fails too ({why})")
    return verdict


register_column(
    Column(
        "fuzzer",
        fuzz_argv(None),
        f"`hlotrace fuzz` for {FUZZ_SECONDS} s on the mutant's ops (opt-in: --columns ...,fuzzer)",
        killer=fuzz_killer,
        no_tests_codes=(2,),
        argv_for=fuzz_argv,
        default=False,
        not_applicable=fuzz_not_applicable,
        confirm=fuzz_confirm,
        artifact=fuzz_artifact,
    )
)


def ordered(names: list[str]) -> list[Column]:
    """The columns named, each after the columns it contains."""
    result: list[Column] = []
    pending = [COLUMNS[n] for n in names]
    while pending:
        ready = [c for c in pending if not any(d in names and d not in [r.name for r in result] for d in c.contains)]
        if not ready:
            raise ValueError(f"columns contain each other in a cycle: {[c.name for c in pending]}")
        result.append(ready[0])
        pending.remove(ready[0])
    return result


@dataclass(frozen=True)
class Verdict:
    killed: bool
    by: str = ""  # node id (or exit status) that killed the mutant
    seconds: float = 0.0
    timed_out: bool = False
    via: str = ""  # "hint" or the contained column whose kill this is
    error: str = ""  # harness problem: the run tested nothing
    not_applicable: str = ""  # why the column cannot test this mutant (not counted there)
    artifact: str = ""  # a file the run left (the fuzzer's shrunk repro), for ``confirm``


class Scratch:
    """A private copy of the repository in which mutants are applied and tests run."""

    def __init__(self, root: Path, rev: str | None, verbose: bool = False):
        self.path = Path(tempfile.mkdtemp(prefix="hlotrace-mutation-")).resolve()
        self.verbose = verbose
        self._procs: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._stopped = False
        if rev is None:
            listing = subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, check=True
            )
            for name in filter(None, listing.stdout.decode().split("\0")):
                source = Path(root) / name
                if source.is_file():
                    (self.path / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, self.path / name)
        else:
            archive = subprocess.run(["git", "archive", "--format=tar", rev], cwd=root, capture_output=True, check=True)
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                tar.extractall(self.path, filter="data")
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.path), os.environ.get("PYTHONPATH")]))
        # HLOTRACE_HYPOTHESIS_SEED, when set, passes through: ci's fixed seed is the default.
        self.env.update(HLOTRACE_PLATFORM="cpu", HLOTRACE_HYPOTHESIS_PROFILE="ci", PYTHONDONTWRITEBYTECODE="1")
        self.env.pop("HLOTRACE_DUMP_TO", None)
        # Mutated programs stay out of the user's compile cache; the mutants' runs share one
        # cache inside this copy (the test session's own would start cold for every mutant).
        self.env.setdefault("HLOTRACE_CACHE_DIR", str(self.path / ".compile-cache"))

    def check_import(self) -> str | None:
        """None if ``import hlotrace`` in this copy loads the copy, else what it loads."""
        code = "import os, hlotrace; print(os.path.realpath(hlotrace.__file__))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=self.path, env=self.env, capture_output=True, text=True)
        loaded = proc.stdout.strip() or proc.stderr.strip()
        return None if proc.returncode == 0 and loaded.startswith(str(self.path) + os.sep) else loaded

    def property_ids(self) -> list[str]:
        """Node ids of the property tests (collected in this copy)."""
        argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider"]
        proc = subprocess.run([*argv, PROPERTY_FILE], cwd=self.path, env=self.env, capture_output=True, text=True)
        return [line for line in proc.stdout.splitlines() if line.startswith(PROPERTY_FILE + "::")]

    def run(self, argv: tuple[str, ...], timeout: float) -> tuple[int, str, float, bool]:
        """(exit status, output, seconds, timed out) of ``argv`` run in this copy."""
        shutil.rmtree(self.path / ".hypothesis", ignore_errors=True)  # no examples replayed across mutants
        argv = tuple(sys.executable if a == "{python}" else a for a in argv)
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=self.path, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        with self._lock:
            self._procs.add(proc)
            if self._stopped:  # interrupted while this run was starting
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            output, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        except BaseException:  # Ctrl-C: the child runs in its own session and did not get SIGINT
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            with self._lock:
                self._procs.discard(proc)
        seconds = time.monotonic() - start
        if self.verbose:
            print(f"    ran {' '.join(argv[1:])[:150]} -> {proc.returncode} ({seconds:.1f}s)", flush=True)
        return proc.returncode, output, seconds, timed_out

    def kill_all(self) -> None:
        """Kill the running tests and every later run (interruption)."""
        with self._lock:
            self._stopped = True
            for proc in self._procs:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _verdict(column: Column, result: tuple[int, str, float, bool], via: str = "") -> Verdict:
    code, output, seconds, timed_out = result
    if timed_out:
        return Verdict(True, "timeout", seconds, timed_out=True, via=via)
    if code in column.no_tests_codes:
        tail = "\n".join(output.strip().splitlines()[-5:])
        return Verdict(False, seconds=seconds, via=via, error=f"exit status {code}, nothing tested: {tail}")
    artifact = ""
    if code and column.artifact is not None:
        artifact = column.artifact(output)
    return Verdict(code != 0, column.killer(output, code) if code else "", seconds, via=via, artifact=artifact)


def run_columns(
    scratch: Scratch, names: list[str], hint_ids: list[str], timeout: float, mutant: Mutant | None = None
) -> dict[str, Verdict]:
    """Run the columns against the scratch copy as it is now; one Verdict per column."""
    verdicts: dict[str, Verdict] = {}
    hint: Verdict | None = None
    for column in ordered(names):
        inherited = next((c for c in column.contains if c in verdicts and verdicts[c].killed), None)
        if inherited:
            verdicts[column.name] = replace(verdicts[inherited], seconds=0.0, via=inherited)
            continue
        if column.runs_property_tests and hint_ids:
            if hint is None:
                hint = _verdict(column, scratch.run((*PYTEST, *hint_ids), timeout), via="hint")
            if hint.killed:
                verdicts[column.name] = hint
                continue
        reason = column.not_applicable(mutant) if column.not_applicable and mutant else None
        if reason:
            verdicts[column.name] = Verdict(False, not_applicable=reason)
            continue
        argv = column.argv_for(mutant) if column.argv_for else column.argv
        for contained in column.contains:
            if contained in verdicts and not verdicts[contained].error:
                argv = (*argv, *COLUMNS[contained].exclude)
        verdicts[column.name] = _verdict(column, scratch.run(argv, timeout))
    return verdicts


def hint_ids(ops, property_ids: list[str]) -> list[str]:
    """The property tests of ``ops``: node ids ending in ``[<op>]`` or ``[<op>-<more>]``."""
    pattern = re.compile(r"\[(?:" + "|".join(map(re.escape, ops)) + r")(?:-[^\]]*)?\]$") if ops else None
    return [i for i in property_ids if pattern and pattern.search(i)]


def run_mutant(scratch: Scratch, mutant: Mutant, names: list[str], property_ids: list[str], timeout: float):
    """Apply ``mutant`` to the scratch copy, run the columns, restore the file."""
    path = scratch.path / mutant.file
    original = path.read_bytes()
    path.write_bytes(mutant.apply(original.decode("utf-8")).encode("utf-8"))
    try:
        verdicts = run_columns(scratch, names, hint_ids(mutant.ops, property_ids), timeout, mutant)
    finally:
        path.write_bytes(original)
    for name, verdict in verdicts.items():
        column = COLUMNS[name]
        if column.confirm is not None and verdict.killed and not verdict.via:
            verdicts[name] = column.confirm(scratch, verdict)
    return verdicts
