"""What the passes cost: milliseconds per 1,000 StableHLO ops, per pass and for pipelines.

The module is the transformer example's whole training step (embeddings, attention blocks,
cross-entropy, backward, AdamW), lowered with no passes; each pass (and the default and
full pipelines) is run over it ``repeat`` times and the median of the passes' own time
(verification included, the one module copy ``passes.run`` makes excluded: ~35 ms per
1,000 ops) is reported, next to the
lowering and XLA:CPU compile times of the same module for scale.

    .venv/bin/python -m benchmarks.passes_pipeline [--small] [--repeat N]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from benchmarks.common import fmt_time, int_option, main_args, print_header, print_table, small_requested

REPEAT = 5


def _transformer_step(small: bool):
    """The transformer example's step, recorded once; returns the xla_trace'd function."""
    import importlib.util
    import os

    import hlotrace as ht
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager
    from hlotrace.jit import xla_trace

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "train_transformer", os.path.join(root, "examples", "train_transformer.py")
    )
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    nn.init.seed(0)
    net = ex.CopyLM(dim=32, heads=2, layers=1 if small else 4)
    opt = optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    step = xla_trace(ex.train_step, passes="")
    step(ht.tensor(ex.sequences(np.random.default_rng(0), 8)), net=net, opt=opt, gm=gm)
    return step


def pipeline_rows(argv: list[str]) -> tuple[list[list[str]], dict]:
    """Rows ``[pipeline, ms per pass run, ms per 1,000 ops, ops before -> after]`` and a summary."""
    from hlotrace import passes
    from hlotrace.lowering import lower_trace
    from hlotrace.runtime import cache

    cache.set_directory("off")  # compile_seconds must time XLA, not a load from the disk cache

    repeat = int_option(argv, "--repeat", REPEAT)
    step = _transformer_step(small_requested(argv))
    lowered = step.lowered
    n_ops = passes.count_ops(lowered.module)
    start = time.perf_counter()
    lower_trace(step.trace)
    lower_s = time.perf_counter() - start
    compile_s = step.executable.compile_seconds
    passes.parse_pipeline("")
    own = sorted(n for n, p in passes.PASSES.items() if not p.builtin and p.module.startswith("hlotrace."))
    candidates = [*own, "cse", "canonicalize"]
    for pipeline in (passes.DEFAULT_PIPELINE, ",".join([*own, "cse"])):
        if pipeline and pipeline not in candidates:
            candidates.append(pipeline)
    rows, summary = [], {"ops": n_ops, "lower_s": lower_s, "compile_s": compile_s}
    for pipeline in candidates:
        times = []
        for _ in range(repeat):  # the passes' own time (PassTiming), not the module copy run() makes
            out = passes.run(lowered, pipeline)
            times.append(sum(t.seconds for t in out.pass_timings))
        seconds = statistics.median(times)
        after = passes.count_ops(out.module)
        rows.append([pipeline, fmt_time(seconds), f"{seconds / n_ops * 1e6:.1f} ms", f"{n_ops} -> {after}"])
        summary[pipeline] = seconds
    return rows, summary


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    print_header("pass pipeline cost on the transformer training step", "benchmarks.passes_pipeline", argv)
    rows, summary = pipeline_rows(argv)
    print(
        f"module: {summary['ops']} ops; lowering it took {fmt_time(summary['lower_s'])}, "
        f"XLA compiling it {fmt_time(summary['compile_s'])}\n"
    )
    print_table(["pipeline", "time (median)", "per 1,000 ops", "ops"], rows)
    return {"bench": "passes_pipeline", **summary}


if __name__ == "__main__":
    main()
    sys.exit(0)
