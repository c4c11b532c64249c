"""``fuse-elementwise``: what its composites cost at run time (XLA inlines them: nothing).

Each program is compiled with the default pipeline, and with the default pipeline plus
``fuse-elementwise``; results must be bitwise equal and steady-state times are measured
interleaved in one run. Programs: the seed softmax on f32[64,100,1000], a GELU MLP forward
(3 layers of 1024, batch 512), and the transformer example's training step.
Issue 8 target: within 2% (ratio <= 1.02).

    .venv/bin/python -m benchmarks.passes_composites [--small] [--repeat N]
"""

from __future__ import annotations

import sys

import numpy as np

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
)

TARGET = 1.02
REPEAT = 9


def _pipelines():
    from hlotrace.passes import DEFAULT_PIPELINE

    base = DEFAULT_PIPELINE
    return base, f"{base},fuse-elementwise" if base else "fuse-elementwise"


def _softmax_case(small: bool):
    import hlotrace as ht
    from benchmarks.bench_softmax import softmax

    shape = (8, 100, 1000) if small else (64, 100, 1000)
    x = ht.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    return f"softmax f32{list(shape)}", softmax, lambda fn: fn(x)


def _gelu_mlp_case(small: bool):
    import hlotrace as ht
    import hlotrace.functional as F

    width, batch = (256, 128) if small else (1024, 512)
    rng = np.random.default_rng(1)
    ws = [ht.tensor((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)) for _ in range(3)]
    x = ht.tensor(rng.standard_normal((batch, width)).astype(np.float32))

    def gelu_mlp(x, w0, w1, w2):
        for w in (w0, w1, w2):
            x = F.gelu(x @ w) * 0.5 + x
        return x

    return f"GELU MLP 3x{width}, batch {batch}", gelu_mlp, lambda fn: fn(x, *ws)


def _transformer_case(small: bool):
    import importlib.util
    import os

    import hlotrace as ht
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "train_transformer", os.path.join(root, "examples", "train_transformer.py")
    )
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    nn.init.seed(0)
    net = ex.CopyLM(layers=1) if small else ex.CopyLM()
    opt = optim.SGD(net.parameters(), lr=0.0)  # lr 0: every call computes the same step
    gm = GradManager().attach(net.parameters())
    seq = ht.tensor(ex.sequences(np.random.default_rng(2), ex.BATCH))
    return "transformer train step (lr 0)", ex.train_step, lambda fn: fn(seq, net=net, opt=opt, gm=gm)


def composite_rows(argv: list[str]) -> list[dict]:
    from hlotrace.jit import xla_trace
    from hlotrace.testing.differential import assert_bitwise_equal

    small, repeat = small_requested(argv), int_option(argv, "--repeat", REPEAT)
    base, fused = _pipelines()
    rows = []
    for case in (_softmax_case, _gelu_mlp_case, _transformer_case):
        label, fn, call = case(small)
        plain, outlined = xla_trace(fn, passes=base), xla_trace(fn, passes=fused)
        for traced in (plain, outlined):
            call(traced)
        a, b = call(plain), call(outlined)
        assert_bitwise_equal([b.numpy()], [a.numpy()], f"{label} with fuse-elementwise")
        composites = outlined.optimized_text.count("stablehlo.composite")
        timings = compare(
            {
                "plain": lambda: call(plain)._device.block_until_ready(),
                "fused": lambda: call(outlined)._device.block_until_ready(),
            },
            repeat=repeat,
            warmup=2,
            min_loop_seconds=0.2,
        )
        rows.append(
            {
                "label": label,
                "composites": composites,
                "plain_s": timings["plain"].best,
                "fused_s": timings["fused"].best,
                "ratio": paired_ratio(timings["fused"], timings["plain"]),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    print_header("fuse-elementwise: run-time cost of composites", "benchmarks.passes_composites", argv)
    rows = composite_rows(argv)
    print_table(
        ["program", "composites", "default pipeline", "+ fuse-elementwise", "ratio"],
        [
            [r["label"], r["composites"], fmt_time(r["plain_s"]), fmt_time(r["fused_s"]), fmt_ratio(r["ratio"])]
            for r in rows
        ],
        title="best time per call; ratio: median of paired loops; results bitwise equal",
    )
    worst = max(r["ratio"] for r in rows)
    print(f"worst ratio {fmt_ratio(worst)} (target <= {TARGET}): {'met' if worst <= TARGET else 'NOT met'}\n")
    return {"bench": "passes_composites", "rows": rows, "ratio": worst, "target": TARGET, "met": worst <= TARGET}


if __name__ == "__main__":
    main()
    sys.exit(0)
