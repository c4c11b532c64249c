"""Run every benchmark, one after the other in this process, and print a summary of ratios.

    .venv/bin/python -m benchmarks.run_all [--small] [--repeat N]

``--small`` (or HLOTRACE_BENCH_SMALL=1) shrinks the softmax input and the compile chain, and
runs the DataLoader benchmark (which has no smaller size) with 5 timed loops instead of 15;
``--repeat N`` overrides each benchmark's number of timed loops. Run it on an otherwise idle
machine: every figure is a ratio against a peer measured in the same run, but concurrent
load still adds noise.
"""

from __future__ import annotations

import gc
import sys
import time

from benchmarks import (
    bench_compile,
    bench_loader,
    bench_models,
    bench_overhead,
    bench_passes,
    bench_softmax,
    bench_train,
    passes_reductions,
)
from benchmarks.common import fmt_ratio, fmt_time, main_args, print_table, small_requested

BENCHMARKS = (bench_overhead, bench_softmax, bench_compile, bench_train, bench_models, bench_passes, bench_loader)
LOADER_SMALL_REPEAT = 5  # bench_loader has no smaller size: --small runs fewer of its loops


def _argv_for(bench, argv: list[str]) -> list[str]:
    """The arguments ``bench`` runs with: run_all's, plus fewer loops for bench_loader under
    --small (an explicit --repeat wins)."""
    if bench is bench_loader and small_requested(argv) and "--repeat" not in argv:
        return [*argv, "--repeat", str(LOADER_SMALL_REPEAT)]
    return argv


def main(argv: list[str] | None = None) -> list[dict]:
    argv = main_args(argv)
    print(f"reproduce (from the repo root): .venv/bin/python -m benchmarks.run_all {' '.join(argv)}".rstrip())
    print()
    start = time.perf_counter()
    results = []
    for bench in BENCHMARKS:
        results.append(bench.main(_argv_for(bench, argv)))
        gc.collect()

    rows = []
    for r in results:
        target = "—" if r["target"] is None else f"<= {r['target']:g}: {'met' if r['met'] else 'NOT met'}"
        if r["bench"] == "overhead":
            rows.append(
                [
                    "overhead: x + y f32[4], per call",
                    fmt_time(r["hlotrace_s"]),
                    fmt_time(r["jax_s"]),
                    fmt_ratio(r["ratio"]),
                    target,
                ]
            )
        elif r["bench"] == "softmax":
            shape = ",".join(map(str, r["shape"]))
            rows.append(
                [
                    f"softmax f32[{shape}], per call",
                    fmt_time(r["hlotrace_s"]),
                    fmt_time(r["jax_s"]),
                    fmt_ratio(r["ratio"]),
                    target,
                ]
            )
            rows.append(
                [
                    "softmax vs jax with NaN-propagating max",
                    fmt_time(r["hlotrace_s"]),
                    fmt_time(r["jax_nan_s"]),
                    fmt_ratio(r["ratio_nan_peer"]),
                    "—",
                ]
            )
            rows.append(
                [
                    "softmax: eager / compiled",
                    fmt_time(r["eager_s"]),
                    fmt_time(r["hlotrace_s"]),
                    fmt_ratio(r["eager_ratio"]),
                    "—",
                ]
            )
        elif r["bench"] == "train":
            rows.append(
                [
                    "train step, MLP 64-512-512-10 AdamW",
                    fmt_time(r["hlotrace_s"]),
                    fmt_time(r["jax_s"]),
                    fmt_ratio(r["ratio"]),
                    target,
                ]
            )
            rows.append(
                [
                    "train step: eager / compiled",
                    fmt_time(r["eager_s"]),
                    fmt_time(r["hlotrace_s"]),
                    fmt_ratio(r["eager_ratio"]),
                    ">= 3",
                ]
            )
        elif r["bench"] == "models":
            for name, label in (
                ("cnn", "train step, CNN (digits) AdamW"),
                ("transformer", "train step, transformer LM"),
            ):
                m = r[name]
                met = "met" if m["ratio"] <= r["target"] else "NOT met"
                rows.append(
                    [
                        label,
                        fmt_time(m["hlotrace_s"]),
                        fmt_time(m["jax_s"]),
                        fmt_ratio(m["ratio"]),
                        f"<= {r['target']:g}: {met}",
                    ]
                )
                rows.append(
                    [
                        f"{label}: eager / compiled",
                        fmt_time(m["eager_s"]),
                        fmt_time(m["hlotrace_s"]),
                        fmt_ratio(m["eager_s"] / m["hlotrace_s"]),
                        "—",
                    ]
                )
        elif r["bench"] == "passes":
            soft = r["sections"]["passes_reductions"]["softmax"]
            rows.append(
                [
                    "softmax, default passes (NaN-exact)",
                    fmt_time(soft["pipelines"][passes_reductions.SIMPLIFY]["best_s"]),
                    fmt_time(soft["jax_s"]),
                    fmt_ratio(soft["pipelines"][passes_reductions.SIMPLIFY]["ratio"]),
                    f"<= {soft['target']:g}: {'met' if soft['met'] else 'NOT met'}",
                ]
            )
            remat = r["sections"]["passes_remat"]
            budget = next(v for k, v in remat["rows"].items() if "budget" in k)
            rows.append(
                [
                    "remat budget 0.4x: step time / no remat",
                    fmt_time(budget["best_s"]),
                    fmt_time(remat["rows"]["hlotrace, no remat"]["best_s"]),
                    fmt_ratio(budget["time_ratio"]),
                    f"<= 1.3 and fits: {'met' if remat['met'] else 'NOT met'}",
                ]
            )
            comp = r["sections"]["passes_composites"]
            rows.append(
                [
                    "fuse-elementwise, worst / unfused",
                    "",
                    "",
                    fmt_ratio(comp["ratio"]),
                    f"<= 1.02: {'met' if comp['met'] else 'NOT met'}",
                ]
            )
        elif r["bench"] == "loader":
            for name, title in (("arrays", "arrays"), ("augmented", "per-sample augmenting")):
                m = r[name]
                met = "met" if m["ratio"] <= r["target"] else "NOT met"
                rows.append(
                    [
                        f"ResNet demo step fed by DataLoader (prefetch), {title}",
                        fmt_time(m["prefetch_s"]),
                        fmt_time(m["on_device_s"]),
                        fmt_ratio(m["ratio"]),
                        f"<= {r['target']:g}: {met}",
                    ]
                )
        elif r["bench"] == "compile":
            rows.append(
                [
                    f"first call, {r['n_ops']}-op chain",
                    fmt_time(r["hlotrace_s"]),
                    fmt_time(r["jax_s"]),
                    fmt_ratio(r["ratio"]),
                    target,
                ]
            )
    print_table(
        ["benchmark", "hlotrace (a)", "peer (b)", "a / b", "issue target"],
        rows,
        title="== summary (peer: jax.jit unless stated; the loader's: the step on a batch already on the device; best-of-repeat) ==",
    )
    print(f"total wall time {fmt_time(time.perf_counter() - start)}")
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
