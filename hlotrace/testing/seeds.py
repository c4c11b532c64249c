"""The seed sweep (``make test-seeds``): the generated property and gradient tests under
several random base seeds, one pytest run per seed.

``make test`` runs them with the ``ci`` profile's fixed base seed 0, so a rule, sample or
tolerance row that only one other seed breaks goes unnoticed there. This runs them with
the ``ci`` example budget (or ``dev``'s) under ``--seeds N`` fresh random base seeds (or
the ``--seed`` values given), prints a table (seed, cases, failures) and, for each failure,
the one-line command that reproduces it; it exits 1 if any case failed.

    python -m hlotrace.testing.seeds --seeds 10 [--profile ci|dev] [--jobs 2] [-k divide]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from hlotrace.runtime.cache import CACHE_DIR_ENV
from hlotrace.testing.check import SEED_ENV

PROFILE_ENV = "HLOTRACE_HYPOTHESIS_PROFILE"
TEST_FILES = ("tests/test_op_properties.py", "tests/test_gradients.py")


@dataclass
class SeedRun:
    seed: int
    cases: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (node id, first line of the message)
    seconds: float = 0.0
    error: str = ""  # pytest ended without a report (collection error, crash)


def random_seeds(count: int) -> list[int]:
    return [int.from_bytes(os.urandom(4), "little") for _ in range(count)]


def _node_id(case: ET.Element) -> str:
    path = case.get("classname", "").replace(".", "/")
    return f"{path}.py::{case.get('name')}"


def _first_line(case: ET.Element) -> str:
    for tag in ("failure", "error"):
        element = case.find(tag)
        if element is not None:
            message = (element.get("message") or element.text or "").strip()
            return message.splitlines()[0][:200] if message else tag
    return ""


def run_seed(seed: int, profile: str, jobs: str, keyword: str | None, python: str = sys.executable) -> SeedRun:
    """One pytest run of the generated tests under base seed ``seed``."""
    result = SeedRun(seed)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.xml")
        command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *TEST_FILES]
        if jobs != "0":
            command += ["-n", jobs]
        if keyword:
            command += ["-k", keyword]
        env = {**os.environ, PROFILE_ENV: profile, SEED_ENV: str(seed)}
        # Every random example compiles a program no later run will see again: keep them out
        # of the persistent compile cache (10,000 entries a seed) unless it was asked for.
        env.setdefault(CACHE_DIR_ENV, "off")
        start = time.monotonic()
        process = subprocess.run(command, env=env, capture_output=True, text=True)
        result.seconds = time.monotonic() - start
        if not os.path.exists(report):
            result.error = (process.stdout + process.stderr).strip().splitlines()[-1:] or ["no report"]
            result.error = result.error[0]
            return result
        for case in ET.parse(report).getroot().iter("testcase"):
            if case.find("skipped") is not None:
                continue
            result.cases += 1
            if case.find("failure") is not None or case.find("error") is not None:
                result.failed.append((_node_id(case), _first_line(case)))
    if process.returncode not in (0, 1) and not result.failed:
        result.error = f"pytest exited {process.returncode}"
    return result


def reproduce_command(node_id: str, seed: int, profile: str) -> str:
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else sys.executable
    return f"{PROFILE_ENV}={profile} {SEED_ENV}={seed} {python} -m pytest '{node_id}'"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="how many random base seeds (default 10)")
    parser.add_argument("--seed", type=int, action="append", default=[], help="a base seed to run (repeatable)")
    parser.add_argument("--profile", choices=("ci", "dev", "thorough"), default="ci")
    parser.add_argument("--jobs", default="auto", help="pytest-xdist workers per run (0: one process)")
    parser.add_argument("-k", dest="keyword", help="only the cases pytest -k selects (e.g. divide)")
    args = parser.parse_args(argv)

    seeds = args.seed or random_seeds(args.seeds)
    print(f"seed sweep: profile {args.profile}, base seeds {' '.join(map(str, seeds))}", flush=True)
    print(f"{'seed':>10}  {'cases':>5}  {'failures':>8}  {'time':>6}", flush=True)
    runs = []
    for seed in seeds:
        run = run_seed(seed, args.profile, args.jobs, args.keyword)
        runs.append(run)
        failures = "error" if run.error else str(len(run.failed))
        print(f"{seed:>10}  {run.cases:>5}  {failures:>8}  {run.seconds:>5.0f}s", flush=True)
        for node_id, message in run.failed:
            print(f"    FAILED {node_id}: {message}", flush=True)
            print(f"      reproduce: {reproduce_command(node_id, seed, args.profile)}", flush=True)
        if run.error:
            print(f"    ERROR: {run.error}", flush=True)
    cases = sum(run.cases for run in runs)
    failed = sum(len(run.failed) for run in runs)
    broken = sum(1 for run in runs if run.error)
    print(
        f"{len(runs)} seeds, {cases} cases, {failed} failures" + (f", {broken} runs without a report" if broken else "")
    )
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
