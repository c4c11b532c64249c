"""``python -m hlotrace.testing.mutation``: run the mutant catalog through every column.

Exit status: 0 done (targets met or not enforced), 1 a kill ratio below its target, 2 a bad
command line or catalog (nothing was run), 3 a red baseline, a scratch copy that does not
import itself, or a run that tested nothing; 130 interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hlotrace.testing.mutation.report as report
from hlotrace import config
from hlotrace.testing.mutation.catalog import CatalogError, SourceTree, load_catalog, validate
from hlotrace.testing.mutation.runner import COLUMNS, Scratch, Verdict, hint_ids, run_columns, run_mutant

ROOT = Path(__file__).resolve().parents[3]
CATALOG = ROOT / "tests" / "mutants"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m hlotrace.testing.mutation", description=__doc__.split("\n")[0])
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="SUBSTR",
        help="mutants whose family/id contains SUBSTR (repeatable)",
    )
    p.add_argument("--list", action="store_true", help="print the catalog and exit")
    p.add_argument(
        "--columns",
        default=",".join(c for c in COLUMNS if COLUMNS[c].default),
        help=f"comma-separated columns (default: {','.join(c for c in COLUMNS if COLUMNS[c].default)}; "
        f"also: {','.join(c for c in COLUMNS if not COLUMNS[c].default)})",
    )
    p.add_argument("--rev", help="test a git revision's tree (git archive) instead of the working tree")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel workers, one scratch copy each")
    p.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per test run; longer counts as killed (timeout)"
    )
    p.add_argument("--markdown", type=Path, metavar="FILE", help="write the report to FILE")
    p.add_argument(
        "--update", type=Path, metavar="FILE", help="replace the report between FILE's mutation-table markers"
    )
    p.add_argument("--min-suite", type=float, default=0.95, help="target kill ratio of the suite column")
    p.add_argument("--min-property", type=float, default=0.90, help="target kill ratio of the property column")
    p.add_argument(
        "--min-any",
        type=float,
        default=0.95,
        help="target kill ratio of the columns together (killed by at least one; with several columns)",
    )
    p.add_argument("--min", action="append", default=[], metavar="COLUMN=RATIO", help="target of another column")
    p.add_argument("--no-targets", action="store_true", help="show the ratios only; never exit 1")
    p.add_argument("--skip-baseline", action="store_true", help="do not check that the unmutated copy passes")
    p.add_argument("--check-equivalent", action="store_true", help="also run the mutants marked equivalent")
    p.add_argument("-v", "--verbose", action="store_true", help="print every test command as it finishes")
    return p.parse_args(argv)


def _fail(message: str, status: int) -> int:
    print(f"mutation: error: {message}", file=sys.stderr)
    return status


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _header(args, argv, jobs: int) -> str:
    rev = _git("rev-parse", "--verify", f"{args.rev or 'HEAD'}^{{commit}}")
    tree = f"commit `{rev[:12]}`"
    if args.rev is None and _git("status", "--porcelain"):
        tree += " plus the working tree's uncommitted changes"
    command = " ".join(["python -m hlotrace.testing.mutation", *map(shlex.quote, argv)])
    seed = config.get("HLOTRACE_HYPOTHESIS_SEED")
    profile = "hypothesis profile `ci`" + (f", HLOTRACE_HYPOTHESIS_SEED={seed}" if seed is not None else "")
    return f"Measured on {tree}, {time.strftime('%Y-%m-%d')}, with `{command}` ({jobs} job(s), XLA:CPU, {profile})."


def _targets(args, columns: list[str]) -> dict[str, float]:
    if args.no_targets:
        return {}
    targets = {"suite": args.min_suite, "property": args.min_property}
    if len(columns) > 1:
        targets[report.ANY] = args.min_any
    for item in args.min:
        column, _, ratio = item.partition("=")
        targets[column] = float(ratio)
    return {c: t for c, t in targets.items() if c in columns or c == report.ANY}


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C: children killed, copies removed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args(argv)
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns:
        return _fail(f"unknown column(s) {unknown or columns}; known: {', '.join(COLUMNS)}", 2)
    if args.rev and not _git("rev-parse", "--verify", "--quiet", f"{args.rev}^{{commit}}"):
        return _fail(f"--rev {args.rev!r} is not a commit of {ROOT}", 2)
    for item in args.min:
        column, _, ratio = item.partition("=")
        if column not in COLUMNS or not ratio.replace(".", "", 1).isdigit():
            return _fail(f"--min {item!r}: expected COLUMN=RATIO with a known column", 2)
    try:
        mutants = load_catalog(CATALOG)
    except CatalogError as exc:
        return _fail(f"bad catalog in {CATALOG}:\n{exc}", 2)
    selected = [m for m in mutants if not args.only or any(s in m.name for s in args.only)]
    if not selected:
        return _fail(f"no mutant matches --only {args.only}", 2)
    source = SourceTree(ROOT, args.rev)
    problems = validate(mutants, source, selected)
    if problems:
        return _fail("the catalog does not match the code:\n  " + "\n  ".join(problems), 2)
    lines = {m.name: f"{m.file}:{m.line(source.read(m.file))}" for m in selected}
    if args.list:
        for m in selected:
            tag = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
            print(f"{m.name}  ({lines[m.name]}; ops: {', '.join(m.ops) or '-'})\n    {m.why}{tag}")
        print(f"{len(selected)} mutants ({sum(m.equivalent is not None for m in selected)} equivalent)")
        print("columns: " + "; ".join(f"{c} ({COLUMNS[c].description})" for c in columns))
        return 0
    if args.update and not (args.update.is_file() and report.has_markers(args.update)):
        return _fail(f"{args.update} lacks the markers {report.BEGIN} ... {report.END}", 2)

    to_run = [m for m in selected if m.equivalent is None or args.check_equivalent]
    jobs = max(1, min(args.jobs, len(to_run)))
    results = report.Results(columns, selected, lines, targets=_targets(args, columns))
    results.header = _header(args, argv, jobs)
    if not to_run:
        print(report.render(results))
        return 0
    start = time.monotonic()
    print(f"mutation: copying {args.rev or 'the working tree'} into {jobs} scratch copies", flush=True)
    scratches = [Scratch(ROOT, args.rev, args.verbose) for _ in range(jobs)]
    try:
        for scratch in scratches:
            loaded = scratch.check_import()
            if loaded is not None:
                return _fail(f"`import hlotrace` in {scratch.path} loads {loaded}, not the scratch copy", 3)
        property_ids = scratches[0].property_ids()
        if not property_ids:
            return _fail("no property tests collected in the scratch copy", 3)
        no_hint = [f"{m.name}: {op}" for m in to_run for op in m.ops if not hint_ids((op,), property_ids)]
        if no_hint:
            return _fail("hinted ops without a property test:\n  " + "\n  ".join(no_hint), 2)
        if not args.skip_baseline:
            status = _baseline(scratches[0], columns, args.timeout)
            if status:
                return status
        interrupted = _run_pool(scratches, to_run, columns, property_ids, args.timeout, results)
    finally:
        for scratch in scratches:
            scratch.remove()
    results.wall_seconds = time.monotonic() - start
    text = report.render(results)
    print("\n" + text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.update and not interrupted:
        report.update_between_markers(args.update, text)
    if interrupted:
        return 130
    errors = [m for m, verdicts in results.verdicts.items() if any(v.error for v in verdicts.values())]
    if errors:
        return _fail(f"runs that tested nothing (see ERROR cells): {', '.join(errors)}", 3)
    missed = results.below_targets()
    if missed:
        print("mutation: below target: " + "; ".join(missed), file=sys.stderr)
        return 1
    return 0


def _baseline(scratch: Scratch, columns: list[str], timeout: float) -> int:
    print(f"mutation: baseline: running the unmutated copy through {', '.join(columns)}", flush=True)
    verdicts = run_columns(scratch, columns, [], timeout)
    for column, verdict in verdicts.items():
        if verdict.killed or verdict.error:
            what = verdict.error or report.cell(verdict, short=True)
            command = " ".join(COLUMNS[column].argv).replace("{python}", "python")
            return _fail(
                f"the unmutated code fails column {column!r} ({what}); every mutant would look killed. "
                f"Reproduce with `{command}` (or pass --skip-baseline).",
                3,
            )
    seconds = sum(v.seconds for v in verdicts.values())
    print(f"mutation: baseline green ({seconds:.0f}s)", flush=True)
    return 0


def _run_pool(scratches, to_run, columns, property_ids, timeout, results) -> bool:
    """Run ``to_run`` over one thread per scratch copy; True if interrupted (Ctrl-C)."""
    queue = collections.deque(to_run)
    lock, stop = threading.Lock(), threading.Event()

    def worker(scratch: Scratch) -> None:
        while True:
            with lock:
                if stop.is_set() or not queue:
                    return
                mutant = queue.popleft()
            began = time.monotonic()
            try:
                verdicts = run_mutant(scratch, mutant, columns, property_ids, timeout)
            except Exception as exc:  # a harness failure must not silently drop the mutant
                verdicts = {c: Verdict(False, error=f"{type(exc).__name__}: {exc}") for c in columns}
            with lock:
                if stop.is_set():
                    return
                results.verdicts[mutant.name] = verdicts
                line = report.progress_line(
                    len(results.verdicts), len(to_run), mutant, verdicts, time.monotonic() - began
                )
                print(line, flush=True)

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in scratches]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        stop.set()
        for scratch in scratches:
            scratch.kill_all()
        for thread in threads:
            thread.join()
        print("mutation: interrupted; the report below holds the mutants that finished", file=sys.stderr)
        return True
    return False


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(_fail("interrupted", 130))
