"""Where a model step's call goes: host time per call of bench_models' CNN and transformer
steps, hlotrace against jax.jit in the same run, and a cProfile of hlotrace's calls.

For each step three figures per candidate, each the median of ``--repeat`` loops:
- enqueue: a loop of calls that never waits, divided by the calls (then one wait): the
  host's work per call when the device keeps up -- on a GPU this is the per-call overhead
  that a fast step cannot hide;
- blocking: every call waits for its loss (bench_models' figure);
- and hlotrace's Python profile of ``--calls`` calls (top functions by own time).

    .venv/bin/python -m benchmarks.profile_models [--repeat N] [--calls N]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time

from benchmarks.bench_models import model_cases, setup_pair
from benchmarks.common import fmt_ratio, fmt_time, int_option, main_args, print_header, print_table


def _enqueue(call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        out = call()
    elapsed = time.perf_counter() - start
    out.block_until_ready()
    return elapsed / number


def _blocking(call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call().block_until_ready()
    return (time.perf_counter() - start) / number


def profile_case(case, repeat: int, calls: int) -> dict:
    title = case[0]
    hlotrace_call, jax_call, *_ = setup_pair(*case)
    figures = {}
    for call in (hlotrace_call, jax_call):
        for _ in range(5):
            call().block_until_ready()
    for kind, measure in (("enqueue", _enqueue), ("blocking", _blocking)):
        for name, call in (("hlotrace", hlotrace_call), ("jax.jit", jax_call)):
            figures[(kind, name)] = statistics.median(measure(call, calls) for _ in range(repeat))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        out = hlotrace_call()
    profiler.disable()
    out.block_until_ready()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(12)
    rows = []
    for kind in ("enqueue", "blocking"):
        ours, peer = figures[(kind, "hlotrace")], figures[(kind, "jax.jit")]
        rows.append([kind, fmt_time(ours), fmt_time(peer), fmt_ratio(ours / peer)])
    print_table(
        ["per call", "hlotrace", "jax.jit", "hlotrace / jax"],
        rows,
        title=f"{title}: median of {repeat} loops of {calls} calls",
    )
    print(f"{title}: hlotrace's Python profile of {calls} calls (own time):")
    print("\n".join(text.getvalue().strip().splitlines()[:30]) + "\n")
    return {kind: figures[(kind, "hlotrace")] / figures[(kind, "jax.jit")] for kind in ("enqueue", "blocking")}


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat, calls = int_option(argv, "--repeat", 5), int_option(argv, "--calls", 200)
    print_header("model steps: host time per call, hlotrace vs jax.jit", "benchmarks.profile_models", argv)
    return {case[0]: profile_case(case, repeat, calls) for case in model_cases()}


if __name__ == "__main__":
    main()
    sys.exit(0)
