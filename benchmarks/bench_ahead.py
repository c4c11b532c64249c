"""Ahead of jax.jit (issue 38 item 4): hlotrace's compiled training steps, with the default pass
pipeline and with the layout pass added, against jax.jit of the same program and against the
program a jax user would write for XLA:CPU's convolutions (NHWC/HWIO).

The models, each from its example (or benchmark) as a user writes it, in this order:

- ResNet-18 CIFAR (:func:`benchmarks.ported_steps.resnet_case`: width 64, batch 32, SGD);
- the examples' CNN (:func:`benchmarks.model_steps.cnn_case`: batch 64 of 1x8x8, AdamW);
- the GPT decoder (:func:`benchmarks.ported_steps.gpt_case`: 4 layers, n_embd 128, AdamW);
- bench_train's MLP (64-512-512-10, batch 128, AdamW).

Candidates, all from the same initial weights:

- ``hlotrace <default>``: the example's step in ``xla_trace(passes=P)``, P the default
  pipeline (``hlotrace.passes.DEFAULT_PIPELINE`` with ``layout`` taken out should it hold it:
  the header prints P), ``first_call="compiled"``, ``tiered_compile=False``;
- ``hlotrace <default>,layout``: the same with ``P,layout``, on a twin model;
- ``jax.jit (user's layout)``: the same program in jax (:mod:`benchmarks.model_peers`, bench_train's
  MLP peer), NCHW/OIHW for the convnets, the optimizer's bookkeeping as the user's (PyTorch's
  AdamW keeps a step count per parameter), state donated;
- ``jax.jit NHWC`` (the convnets): the same math written NHWC/HWIO, its images, weights (and the
  CNN's classifier columns) converted once (:func:`benchmarks.model_peers.to_channels_last`).

Every candidate runs three steps first: each one's losses are checked against the default
pipeline's (rtol 1e-3: XLA programs summing in other orders), and after them every jax peer's
parameters and buffers (the NHWC peer's converted back), and the layout model's, against the
default pipeline's model (rtol 1e-3, atol 0.2 * lr, at least 1e-3). Then their loops are timed
interleaved (:func:`benchmarks.common.compare`), every call blocking on its loss; ratios are best
per-call time over best per-call time. A ratio below 1.0 is printed "ahead". In brackets, for
a machine shared with other work: the median over ``--cpu-rounds N`` (default 6, ``--small`` 0)
alternating loop pairs of the two candidates' process CPU times (every thread of this process,
XLA's workers included; bench_train's measure), blind to other processes' load.

Compile time: each hlotrace candidate's first call (record from shapes, passes, lowering, XLA
compile, one step) with the disk compile cache off and the in-process executable cache emptied,
its wall seconds and XLA's compile seconds (``ht.metrics()["compile_seconds"]``), after the jax
peers' first calls (so XLA is warm in the process), the order alternating between models and
rounds; ``--compile-rounds N`` (default 2, ``--small`` 1) compiles each pipeline N times (the
rounds after the first on fresh ``xla_trace`` functions, after the timing) and keeps the best.
The layout pipeline's over the default's, against the issue's target of at most 1.1x.

Targets (issue 38): ResNet-18 with layout <= 0.85x jax.jit of the NCHW program and <= 1.0x of the
NHWC one; GPT and MLP <= 1.0x; compile time <= 1.1x the default pipeline's.

``--small`` (or HLOTRACE_BENCH_SMALL=1): ResNet-18 width 16 on 8 images, a 2-layer GPT;
``--resnet-batch N``, ``--resnet-width N``, ``--gpt-layers N`` set them; ``--only resnet,cnn``
runs a subset (keys resnet, cnn, gpt, mlp); ``--repeat N`` timed loops per candidate (default 5).
The models are built in :mod:`benchmarks.ahead_cases`.

    .venv/bin/python -m benchmarks.bench_models --ahead [--small] [--repeat N] [--only KEYS]
        [--compile-rounds N] [--cpu-rounds N]
    .venv/bin/python -m benchmarks.bench_ahead [same options]
"""

from __future__ import annotations

import gc
import sys
import time
from dataclasses import dataclass

import numpy as np

from benchmarks.ahead_cases import BUILDERS, Case
from benchmarks.common import compare, fmt_time, int_option, main_args, paired_ratio, print_header, print_table
from benchmarks.common import small_requested as small_mode

REPEAT = 5
LOOP_SECONDS = 0.25
RESNET_TARGETS = (0.85, 1.0)  # layout / jax.jit NCHW, layout / jax.jit NHWC
STEP_TARGET = 1.0  # GPT and MLP: no regression against jax.jit
COMPILE_TARGET = 1.1
CPU_ROUNDS = 6  # paired loops for the process-CPU-time ratios; --small: none
COMPILE_ROUNDS = 2  # first calls per pipeline (the first of each model's before timing); --small: 1
DEFAULT, LAYOUT, JAX, JAX_NHWC = (
    "hlotrace <default>",
    "hlotrace <default>,layout",
    "jax.jit (user's layout)",
    "jax.jit NHWC",
)


# -- one model ------------------------------------------------------------------------------


def pipelines() -> tuple[str, str, str]:
    """(the default pipeline, that plus layout, a note) with ``layout`` taken out of the
    default should the default hold it (so the pair always differs by the layout pass)."""
    from hlotrace import passes

    names = [name for name in passes.DEFAULT_PIPELINE.split(",") if name.strip()]
    without = [name for name in names if name.strip().split("{")[0] != "layout"]
    note = "" if len(without) == len(names) else " (layout taken out of DEFAULT_PIPELINE for the baseline)"
    base = ",".join(without)
    return base, f"{base},layout" if base else "layout", note


def _first_calls(calls: dict, order: list[str]) -> dict:
    """{name: (first call's wall seconds, XLA compile seconds, loss)} of the hlotrace candidates
    named in ``order``, run in that order, each compiled with the disk cache off and the
    in-process executable cache emptied."""
    import hlotrace as ht
    from hlotrace.runtime import cache, compiler

    out = {}
    cache.set_directory("off")
    try:
        for name in order:
            compiler.EXECUTABLES.clear()
            gc.collect()
            before = ht.metrics()["compile_seconds"]
            start = time.perf_counter()
            loss = float(calls[name]())
            out[name] = (time.perf_counter() - start, ht.metrics()["compile_seconds"] - before, loss)
    finally:
        cache.set_directory(None)
    return out


def _check(case: Case, losses: dict) -> None:
    """Losses of every candidate against the default pipeline's, then every other state against
    the default pipeline's model after the three steps."""
    reference = losses[DEFAULT]
    for name, values in losses.items():
        if not np.allclose(values, reference, rtol=1e-3, atol=1e-5):
            raise AssertionError(f"{case.title}: {name} losses {values} vs {DEFAULT}'s {reference}")
    expected = case.model_state(0)
    atol = max(0.2 * case.lr, 1e-3)  # Adam moves zero-up-to-rounding gradients by ~lr (model_steps)
    others = {LAYOUT: lambda: case.model_state(1), JAX: case.jax_state}
    if case.nhwc_state is not None:
        others[JAX_NHWC] = case.nhwc_state
    for name, state in others.items():
        got = state()
        for key, want in expected.items():
            have = np.asarray(got[key])
            if have.shape != want.shape or not np.allclose(have, want, rtol=1e-3, atol=atol):
                worst = np.max(np.abs(have - want)) if have.shape == want.shape else f"shape {have.shape}"
                raise AssertionError(f"{case.title}: {name}: {key} differs after 3 steps: max abs {worst}")


def _traced(case: Case, pipeline_pair: tuple[str, str], batch) -> tuple[dict, list]:
    """({name: call} of the case's step compiled afresh with each pipeline (a first call
    compiles), the two traced functions)."""
    import hlotrace as ht

    traced = [ht.xla_trace(case.step, passes=p, first_call="compiled", tiered_compile=False) for p in pipeline_pair]
    calls = {
        DEFAULT: lambda: traced[0](*batch, **case.kwargs[0]),
        LAYOUT: lambda: traced[1](*batch, **case.kwargs[1]),
    }
    return calls, traced


def _layout_effect(traced: list) -> dict:
    """What the layout pass did to the module the second function compiled: its seconds, the op
    counts before and after it, and whether both pipelines compiled the same module."""
    timings = [t for t in traced[1].optimized.pass_timings if t.name == "layout"]
    return {
        # Without locations: they number each call of a layer (attention#2 vs #11) per recording.
        "same_module": traced[0].optimized.text(debug_info=False) == traced[1].optimized.text(debug_info=False),
        "layout_pass_s": sum(t.seconds for t in timings),
        "layout_ops": (timings[0].ops_before, timings[-1].ops_after) if timings else None,
    }


def _cpu_ratios(calls: dict, timings: dict, rounds: int) -> dict:
    """{(hlotrace candidate, jax peer): median over ``rounds`` alternating loop pairs of their
    process CPU times} (bench_train's measure: blind to the other processes on the cores)."""
    from benchmarks.bench_train import _process_cpu_paired_ratio

    out = {}
    for mine in (DEFAULT, LAYOUT):
        for peer in (JAX, JAX_NHWC):
            if peer in calls and rounds > 0:
                number = max(1, min(timings[mine].number, timings[peer].number))
                ours, theirs = calls[mine], calls[peer]
                out[mine, peer] = _process_cpu_paired_ratio(
                    lambda c=ours: c().block_until_ready(), lambda c=theirs: c().block_until_ready(), rounds, number
                )
    return out


def run_case(
    case: Case, pipeline_pair: tuple[str, str], repeat: int, compile_rounds: int, cpu_rounds: int, index: int
) -> dict:
    """Check, time and compare one model's candidates; returns its figures (seconds, ratios)."""
    import hlotrace as ht

    batch = [ht.tensor(a) for a in case.batch]
    peers = {JAX: case.jax_call}
    if case.nhwc_call is not None:
        peers[JAX_NHWC] = case.nhwc_call
    losses, jax_first = {}, {}
    for name, call in peers.items():  # first: XLA warmed up in this process before hlotrace's compiles
        start = time.perf_counter()
        losses[name] = [float(call())]
        jax_first[name] = time.perf_counter() - start
    order = [DEFAULT, LAYOUT] if index % 2 == 0 else [LAYOUT, DEFAULT]
    hlotrace_calls, traced = _traced(case, pipeline_pair, batch)
    calls = {**hlotrace_calls, **peers}
    first = _first_calls(calls, order)
    effect = _layout_effect(traced)
    losses.update({name: [first[name][2]] for name in first})
    for _ in range(2):
        for name, call in calls.items():
            losses[name].append(float(call()))
    _check(case, losses)
    print(
        f"{case.title}: every candidate agrees for 3 steps (losses {losses[DEFAULT][0]:.4f} -> "
        f"{losses[DEFAULT][-1]:.4f}, parameters, buffers); first calls "
        + ", ".join(f"{n} {s:.1f} s" for n, s in {**jax_first, **{n: f[0] for n, f in first.items()}}.items())
    )
    timings = compare(
        {name: (lambda c=call: c().block_until_ready()) for name, call in calls.items()},
        repeat=repeat,
        warmup=1,
        min_loop_seconds=LOOP_SECONDS,
    )
    print_table(
        ["candidate", "best/call", "median/call", "calls/loop"],
        [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
        title=f"{case.title}: {repeat} loops per candidate (interleaved), every call blocks on its loss",
    )
    cpu = _cpu_ratios(calls, timings, cpu_rounds)
    compiles = {name: [f] for name, f in first.items()}
    for round_index in range(1, compile_rounds):  # fresh functions on the trained models: state no longer matters
        again = _first_calls(_traced(case, pipeline_pair, batch)[0], order if round_index % 2 == 0 else order[::-1])
        for name, f in again.items():
            compiles[name].append(f)
    result = {"title": case.title, "best_s": {n: t.best for n, t in timings.items()}, **effect}
    for name in (DEFAULT, LAYOUT):
        mine = timings[name]
        result[name] = {
            "vs_jax": mine.best / timings[JAX].best,
            "vs_jax_paired": paired_ratio(mine, timings[JAX]),
            "vs_nhwc": mine.best / timings[JAX_NHWC].best if JAX_NHWC in timings else None,
            "cpu_vs_jax": cpu.get((name, JAX)),
            "cpu_vs_nhwc": cpu.get((name, JAX_NHWC)),
            "first_call_s": min(f[0] for f in compiles[name]),
            "compile_s": min(f[1] for f in compiles[name]),
        }
    for what in ("first_call", "compile"):
        layout, default = result[LAYOUT][f"{what}_s"], result[DEFAULT][f"{what}_s"]
        result[f"{what}_ratio"] = layout / default if default > 0 else None
    print(
        f"{case.title}: first call (XLA compile), best of {compile_rounds}: "
        + "; ".join(
            f"{n} {result[n]['first_call_s']:.2f} s ({result[n]['compile_s']:.2f} s)" for n in (DEFAULT, LAYOUT)
        )
        + f"; layout / default {result['first_call_ratio']:.2f}x ({result['compile_ratio']:.2f}x); the layout pass "
        f"{effect['layout_pass_s']:.2f} s, ops {effect['layout_ops']}"
        + ("; both pipelines compiled the same module" if effect["same_module"] else "")
        + "\n"
    )
    return result


# -- the report -----------------------------------------------------------------------------


def _ratio_cell(value: float | None, ahead: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}x ahead" if ahead and value < 1.0 else f"{value:.2f}x"


def _with_cpu(wall: float | None, cpu: float | None) -> str:
    return _ratio_cell(wall) + ("" if cpu is None else f" [cpu {cpu:.2f}x]")


def _summary_rows(results: dict) -> list[list[str]]:
    rows = []
    for key, r in results.items():
        for name in (DEFAULT, LAYOUT, JAX, JAX_NHWC):
            if name not in r["best_s"]:
                continue
            mine = r.get(name, {})
            first = f"{mine['first_call_s']:.2f} s ({mine['compile_s']:.2f} s)" if mine else ""
            vs_jax = _with_cpu(mine["vs_jax"], mine["cpu_vs_jax"]) if mine else ""
            vs_nhwc = _with_cpu(mine["vs_nhwc"], mine["cpu_vs_nhwc"]) if mine else ""
            rows.append([key if name == DEFAULT else "", name, fmt_time(r["best_s"][name]), vs_jax, vs_nhwc, first])
    return rows


@dataclass(frozen=True)
class Target:
    """One of the issue's targets as measured: ``step`` (a step-time ratio, "ahead" below 1) or a
    compile-time one; ``judged``: False where the layout pass left the module unchanged (XLA did
    the same work twice: the ratio is the machine's noise, no verdict)."""

    what: str
    value: float | None
    limit: float
    step: bool = True
    judged: bool = True

    def verdict(self) -> str:
        if self.value is None:
            return "—"
        if not self.judged:
            return "n/a"
        return "met" if self.value <= self.limit else "NOT met"


def _targets(results: dict) -> list[Target]:
    """The issue's targets: steps on both hlotrace rows (the layout row is the one the issue's
    pass is for), compile times layout over default."""
    rows = []
    if "resnet" in results:
        for name in (DEFAULT, LAYOUT):
            r = results["resnet"][name]
            rows.append(Target(f"ResNet-18, {name} / jax.jit NCHW", r["vs_jax"], RESNET_TARGETS[0]))
            rows.append(Target(f"ResNet-18, {name} / jax.jit NHWC", r["vs_nhwc"], RESNET_TARGETS[1]))
    for key, what in (("gpt", "GPT"), ("mlp", "MLP")):
        for name in (DEFAULT, LAYOUT) if key in results else ():
            rows.append(Target(f"{what}, {name} / jax.jit", results[key][name]["vs_jax"], STEP_TARGET))
    for key, r in results.items():
        same, judged = (" (same module)", False) if r["same_module"] else ("", True)
        for label, ratio in (("first call", r["first_call_ratio"]), ("XLA compile", r["compile_ratio"])):
            rows.append(Target(f"{key}: {label}, layout / default{same}", ratio, COMPILE_TARGET, False, judged))
    return rows


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        return {}
    repeat = int_option(argv, "--repeat", REPEAT)
    small = small_mode(argv)
    compile_rounds = int_option(argv, "--compile-rounds", 1 if small else COMPILE_ROUNDS)
    cpu_rounds = int_option(argv, "--cpu-rounds", 0 if small else CPU_ROUNDS)
    keys = argv[argv.index("--only") + 1].split(",") if "--only" in argv else list(BUILDERS)
    unknown = sorted(set(keys) - set(BUILDERS))
    if unknown:
        raise SystemExit(f"--only: unknown model(s) {unknown}; choose from {','.join(BUILDERS)}")
    print_header("ahead of jax.jit: hlotrace's passes vs jax.jit (same program, NHWC)", "benchmarks.bench_ahead", argv)
    from hlotrace import passes, runtime

    base, with_layout, note = pipelines()
    print(f"hlotrace.passes.DEFAULT_PIPELINE = {passes.DEFAULT_PIPELINE!r}")
    platform_default = getattr(passes, "default_pipeline", None)  # a default per platform, where hlotrace has one
    if platform_default is not None:
        platform = runtime.platform_name()
        print(
            f"what xla_trace runs on {platform} with no passes= and no $HLOTRACE_PASSES: {platform_default(platform)!r}"
        )
    print(f"rows '{DEFAULT}': passes={base!r}{note}; rows '{LAYOUT}': passes={with_layout!r}\n")
    start = time.perf_counter()
    results = {}
    for index, key in enumerate(k for k in BUILDERS if k in keys):
        case = BUILDERS[key](argv, small)
        results[key] = run_case(case, (base, with_layout), repeat, compile_rounds, cpu_rounds, index)
        del case
        gc.collect()

    print_table(
        ["model", "candidate", "step (best)", "/ jax.jit same program", "/ jax.jit NHWC", "first call (XLA compile)"],
        _summary_rows(results),
        title=f"step: best per-call time of {repeat} interleaved loops; ratios best over best [process CPU time, "
        f"median of {cpu_rounds} paired loops]; first call: record + passes + lowering + compile + one step, "
        f"disk cache off, best of {compile_rounds}",
    )
    targets = _targets(results)
    print_table(
        ["issue 38 target", "measured", "limit", "verdict"],
        [[t.what, _ratio_cell(t.value, ahead=t.step), f"<= {t.limit:g}", t.verdict()] for t in targets],
    )
    print(f"(wall {time.perf_counter() - start:.0f} s)\n")
    return {
        "bench": "ahead",
        "models": results,
        "pipelines": (base, with_layout),
        "ratio": max((r[LAYOUT]["vs_jax"] for r in results.values()), default=None),
        "target": STEP_TARGET,
        "met": all(t.verdict() == "met" for t in targets if t.judged),
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
