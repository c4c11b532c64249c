"""Deep models: a 48-layer transformer training step with its blocks as one ``nn.Stacked``
(one ``F.scan``) vs unrolled (an ``nn.Sequential`` of 48 blocks), and vs the 4-layer
scanned step (issue 22).

The model is examples/train_transformer.py's causal LM (pre-norm blocks: causal multi-head
attention, GELU MLP) at a small width (``--dim``, default 32, 4 heads) so that the unrolled
48-layer compile stays near a minute on XLA:CPU; batch 32 sequences of 17 tokens,
cross-entropy over the copy half, backward, AdamW. Every variant starts from the same
weights (the unrolled model loads the stacked one's state dict) and the first losses are
checked to agree.

Measured for each variant, every cache emptied first (in-process executable cache, the
persistent cache off):

- first call: record + lower + passes + compile + one run of a fresh ``xla_trace`` with
  ``first_call="compiled"`` (recorded from shapes only, so no eager 48-layer run is timed),
  and within it the XLA compile seconds (``ht.metrics()["compile_seconds"]``) and the
  default pass pipeline's seconds (``pass_timings``);
- StableHLO op count of the lowered step (ops in nested regions counted), and how many
  ``stablehlo.while`` it holds;
- compiled temp memory (the executable's ``memory_stats()["temp"]``);
- steady-state step time, the variants' loops interleaved (benchmarks.common.compare).

Issue targets: 48-layer scanned first call <= 1/10 of unrolled and <= 1.5x the 4-layer
scanned; op count independent of depth; step time scanned <= 1.15x unrolled (``unroll=``
to close the gap); temp memory scanned <= unrolled.

    .venv/bin/python -m benchmarks.bench_depth [--layers 48] [--dim 32] [--repeat N] [--small] [--no-jax]

``--small`` (or HLOTRACE_BENCH_SMALL=1): 12 layers instead of 48. The jax.jit peer
(benchmarks/depth_jax.py: the same step with ``lax.scan`` or a Python loop) compiles the
scanned and unrolled steps too and prints its XLA compile seconds beside hlotrace's;
``--no-jax`` leaves it out.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks.bench_models import load_example
from benchmarks.common import (
    compare,
    fmt_ratio,
    fmt_time,
    int_option,
    main_args,
    paired_ratio,
    print_header,
    print_table,
    small_requested,
    verdict,
)

LAYERS, SMALL_LAYERS, SHALLOW = 48, 12, 4
DIM, HEADS = 32, 4
REPEAT = 5
LOOP_SECONDS = 0.5
FIRST_CALL_TARGET, SHALLOW_TARGET, STEP_TARGET = 0.1, 1.5, 1.15


def _train_step(seq, *, net, opt, gm, lm):
    import hlotrace.functional as F

    with gm:
        logits = net(seq[:, :-1])
        loss = F.cross_entropy(lm.copy_half(logits), lm.copy_half(seq[:, 1:]))
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _variant(lm, layers: int, dim: int, stacked: bool, unroll: int, state: dict | None):
    """A fresh model (weights from ``state`` when given), AdamW, GradManager and xla_trace."""
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager
    from hlotrace.jit import xla_trace

    nn.init.seed(0)
    net = lm.CopyLM(dim=dim, heads=HEADS, layers=layers, stacked=stacked, unroll=unroll)
    if state is not None:
        if not stacked:  # "blocks.fc1.weight" [L, ...] -> "blocks.3.fc1.weight"
            state = _unstacked(state, layers)
        net.load_state_dict(state)
    opt = optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    return net, opt, gm, xla_trace(_train_step, first_call="compiled")


def _unstacked(state: dict, layers: int) -> dict:
    out = {}
    for key, value in state.items():
        if key.startswith("blocks."):
            rest = key[len("blocks.") :]
            out.update({f"blocks.{i}.{rest}": value[i] for i in range(layers)})
        else:
            out[key] = value
    return out


def _measure(name: str, lm, seq, layers: int, dim: int, stacked: bool, unroll: int, state) -> dict:
    from hlotrace import metrics, reset_metrics, runtime
    from hlotrace.passes.manager import count_ops

    net, opt, gm, step = _variant(lm, layers, dim, stacked, unroll, state)
    runtime.compiler.EXECUTABLES.clear()
    reset_metrics()
    start = time.perf_counter()
    loss = float(step(seq, net=net, opt=opt, gm=gm, lm=lm))
    first_call = time.perf_counter() - start
    compile_s = metrics()["compile_seconds"]
    lowered = step.lowered
    result = {
        "name": name,
        "layers": layers,
        "first_call_s": first_call,
        "compile_s": compile_s,
        "passes_s": sum(t.seconds for t in step.optimized.pass_timings),
        "slowest_pass": max(step.optimized.pass_timings, key=lambda t: t.seconds, default=None),
        "ops": count_ops(lowered.module),
        "whiles": lowered.text(debug_info=False).count("stablehlo.while"),
        "temp_bytes": step.memory_stats()["temp"],
        "first_loss": loss,
        "call": lambda: step(seq, net=net, opt=opt, gm=gm, lm=lm).block_until_ready(),
    }
    print(
        f"  {name}: first call {fmt_time(first_call)} (XLA compile {fmt_time(compile_s)}, hlotrace passes "
        f"{fmt_time(result['passes_s'])}, slowest {result['slowest_pass'].name if result['slowest_pass'] else '-'}), "
        f"{result['ops']} ops, {result['whiles']} while loops",
        flush=True,
    )
    return result


def _jax_peer(lm, layers: int, dim: int, by_name: dict) -> dict:
    """jax.jit's trace + lower and XLA compile seconds for the same step (benchmarks/depth_jax.py),
    scanned and unrolled, beside hlotrace's XLA compile seconds."""
    from benchmarks import depth_jax

    rows, seconds = [], {}
    for name, n, scanned in (
        (f"scanned {layers}", layers, True),
        (f"unrolled {layers}", layers, False),
        (f"scanned {SHALLOW}", SHALLOW, True),
    ):
        lower_s, compile_s = depth_jax.compile_seconds(lm, n, dim, HEADS, scanned)
        ours = by_name[name]["compile_s"]
        seconds[name] = (ours, compile_s)
        rows.append([name, fmt_time(ours), fmt_time(lower_s), fmt_time(compile_s), fmt_ratio(ours / compile_s)])
    print_table(
        ["variant", "hlotrace XLA compile", "jax trace+lower", "jax XLA compile", "compile hlotrace / jax"],
        rows,
        title="XLA compile of the same step emitted by jax.jit (lax.scan / a Python loop), caches cleared",
    )
    scanned, unrolled = seconds[f"scanned {layers}"], seconds[f"unrolled {layers}"]
    return {
        "compile_s": seconds,
        "hlotrace_ratio": scanned[0] / unrolled[0],
        "jax_ratio": scanned[1] / unrolled[1],
    }


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    layers = int_option(argv, "--layers", SMALL_LAYERS if small_requested(argv) else LAYERS)
    dim = int_option(argv, "--dim", DIM)
    repeat = int_option(argv, "--repeat", REPEAT)
    if layers <= SHALLOW:
        raise SystemExit(f"--layers must be more than {SHALLOW} (the shallow step it is compared with)")
    print_header(
        f"a {layers}-layer transformer training step (d={dim}, {HEADS} heads, AdamW): nn.Stacked (one scan) "
        f"vs unrolled",
        "benchmarks.bench_depth",
        argv,
    )
    import hlotrace as ht
    from hlotrace.runtime import cache

    cache.set_directory("off")  # every variant must compile: no persistent cache hits
    lm = load_example("train_transformer")
    seq = ht.tensor(lm.sequences(np.random.default_rng(0), lm.BATCH))

    _measure("warm-up (scanned, 2 layers)", lm, seq, 2, dim, True, 1, None)
    state = _variant(lm, layers, dim, True, 1, None)[0].state_dict()  # every variant starts from it
    shallow_state = {k: v[:SHALLOW] if k.startswith("blocks.") else v for k, v in state.items()}
    results = [
        _measure(f"scanned {layers}", lm, seq, layers, dim, True, 1, state),
        _measure(f"scanned {layers}, unroll=2", lm, seq, layers, dim, True, 2, state),
        _measure(f"scanned {layers}, unroll=4", lm, seq, layers, dim, True, 4, state),
        _measure(f"unrolled {layers}", lm, seq, layers, dim, False, 1, state),
        _measure(f"scanned {SHALLOW}", lm, seq, SHALLOW, dim, True, 1, shallow_state),
        _measure(f"unrolled {SHALLOW}", lm, seq, SHALLOW, dim, False, 1, shallow_state),
    ]
    by_name = {r["name"]: r for r in results}
    scanned, unrolled = by_name[f"scanned {layers}"], by_name[f"unrolled {layers}"]
    shallow = by_name[f"scanned {SHALLOW}"]
    for r in results:
        want = scanned if r["layers"] == layers else shallow
        if not np.isclose(r["first_loss"], want["first_loss"], rtol=1e-4):
            raise AssertionError(f"{r['name']}: first loss {r['first_loss']} but {want['name']} {want['first_loss']}")
    print(
        f"first losses agree (rtol 1e-4): {layers} layers {scanned['first_loss']:.5f}, {SHALLOW} layers "
        f"{shallow['first_loss']:.5f}\n"
    )

    peer = None if "--no-jax" in argv else _jax_peer(lm, layers, dim, by_name)

    timings = compare(
        {r["name"]: r["call"] for r in results if r["layers"] == layers},
        repeat=repeat,
        warmup=2,
        min_loop_seconds=LOOP_SECONDS,
    )
    rows = []
    for r in results:
        t = timings.get(r["name"])
        rows.append(
            [
                r["name"],
                fmt_time(r["first_call_s"]),
                fmt_time(r["compile_s"]),
                fmt_time(r["passes_s"]),
                r["ops"],
                r["whiles"],
                f"{r['temp_bytes'] / 2**20:.2f} MiB",
                fmt_time(t.median) if t else "—",
                fmt_ratio(paired_ratio(t, timings[unrolled["name"]])) if t else "—",
            ]
        )
    print_table(
        ["variant", "first call", "XLA compile", "passes", "ops", "whiles", "temp", "step (median)", "step / unrolled"],
        rows,
        title=f"{repeat} interleaved loops per {layers}-layer variant; first calls with every cache emptied",
    )
    first_ratio = scanned["first_call_s"] / unrolled["first_call_s"]
    shallow_ratio = scanned["first_call_s"] / shallow["first_call_s"]
    step_ratios = {
        r["name"]: paired_ratio(timings[r["name"]], timings[unrolled["name"]])
        for r in results
        if r["name"] in timings and r["name"].startswith("scanned")
    }
    best_scanned = min(step_ratios, key=step_ratios.get)
    ops_change = abs(scanned["ops"] - shallow["ops"]) / shallow["ops"]
    print(
        f"first call, scanned {layers} / unrolled {layers}: {fmt_ratio(first_ratio)}; {verdict(first_ratio, FIRST_CALL_TARGET)}"
    )
    print(
        f"first call, scanned {layers} / scanned {SHALLOW}: {fmt_ratio(shallow_ratio)}; {verdict(shallow_ratio, SHALLOW_TARGET)}"
    )
    print(
        f"op count, scanned {layers} vs scanned {SHALLOW}: {scanned['ops']} vs {shallow['ops']} ({ops_change:.1%} apart)"
    )
    print(
        f"step time, scanned {layers} / unrolled {layers}: {fmt_ratio(step_ratios[scanned['name']])}; best scanned "
        f"({best_scanned}) {fmt_ratio(step_ratios[best_scanned])}; {verdict(step_ratios[best_scanned], STEP_TARGET)}"
    )
    temp_ok = scanned["temp_bytes"] <= unrolled["temp_bytes"]
    print(
        f"temp memory, scanned {layers} vs unrolled {layers}: {scanned['temp_bytes'] / 2**20:.2f} MiB vs "
        f"{unrolled['temp_bytes'] / 2**20:.2f} MiB; target <=: {'met' if temp_ok else 'NOT met'}"
    )
    if peer is not None:
        print(
            f"XLA compile, scanned {layers} / unrolled {layers}: hlotrace {fmt_ratio(peer['hlotrace_ratio'])}, "
            f"jax.jit {fmt_ratio(peer['jax_ratio'])} (the loop's compile is XLA's, whichever front end emits it)"
        )
    print()
    return {
        "bench": "depth",
        "jax_peer": peer,
        "first_call_ratio": first_ratio,
        "shallow_ratio": shallow_ratio,
        "step_ratio": step_ratios[scanned["name"]],
        "best_step_ratio": step_ratios[best_scanned],
        "ops": (scanned["ops"], shallow["ops"], unrolled["ops"]),
        "temp_bytes": (scanned["temp_bytes"], unrolled["temp_bytes"]),
        "ratio": first_ratio,
        "target": FIRST_CALL_TARGET,
        "met": first_ratio <= FIRST_CALL_TARGET,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
