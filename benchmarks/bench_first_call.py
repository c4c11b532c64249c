"""The first call of a CNN training step: ``first_call="eager"`` vs ``"compiled"`` (issue 20).

The step: a 3-conv CNN (conv3x3 BN ReLU maxpool x3, linear) on a batch of 64 3x32x32
images, cross-entropy, backward, AdamW. ``"eager"`` runs the step in NumPy while it
records, then compiles; ``"compiled"`` records from shapes and dtypes only, compiles and
runs the executable; with ``tiered_compile=True`` (``hlotrace.runtime.tiered``) one compiled
quickly, while the optimized one compiles in the background for the second call. Each
candidate's second call is timed too (a tiered one waits for the optimized compile). Each
repeat is a fresh ``xla_trace`` function on a fresh model with the in-process compile cache
cleared and the persistent cache off, so every candidate compiles. The candidates
alternate; each call blocks on its loss.

Issue target: eager / compiled >= 3 on the CPU (met tiered; untiered, XLA's compile bounds it).

    .venv/bin/python -m benchmarks.bench_first_call [--repeat N]
    .venv/bin/python -m benchmarks.bench_first_call --cold-warm   # a second process, with the disk cache
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time

import numpy as np

from benchmarks.common import fmt_ratio, fmt_time, int_option, main_args, print_header, print_table

TARGET = 3.0
REPEAT = 3
BATCH, CHANNELS, SIZE, CLASSES = 64, 3, 32, 10
WIDTHS = (32, 64, 128)


def _model():
    import hlotrace.functional as F
    from hlotrace import nn

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            widths = (CHANNELS, *WIDTHS)
            self.convs = nn.Sequential(
                *[
                    nn.Sequential(
                        nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(), nn.MaxPool2d(2)
                    )
                    for a, b in itertools.pairwise(widths)
                ]
            )
            self.fc = nn.Linear(WIDTHS[-1] * (SIZE // 8) ** 2, CLASSES)

        def forward(self, x):
            x = self.convs(x)
            return self.fc(F.reshape(x, (x.shape[0], -1)))

    return CNN()


def _first_call(first_call: str, images, labels, tiered: bool = True) -> tuple[float, float, float, float]:
    """(seconds of the first call, of which XLA compile seconds (the quick compile of a
    tiered first call), seconds of the second call, seconds of the optimized compile a
    tiered first call ran in the background)."""
    import hlotrace.functional as F
    from hlotrace import metrics, nn, optim, reset_metrics, runtime
    from hlotrace.autodiff import GradManager
    from hlotrace.jit import xla_trace
    from hlotrace.runtime import tiered as tiered_compiles

    nn.init.seed(0)
    net = _model()
    opt = optim.AdamW(net.parameters(), lr=1e-3)
    gm = GradManager().attach(net.parameters())

    @xla_trace(first_call=first_call, tiered_compile=tiered)
    def step(x, y, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    runtime.compiler.EXECUTABLES.clear()
    assert not tiered_compiles.pending  # the previous candidate's compiles are all collected
    reset_metrics()
    start = time.perf_counter()
    step(images, labels, net, opt, gm).block_until_ready()
    first = time.perf_counter() - start
    counters = metrics()
    compile_s = counters["compile_seconds"] + counters["fast_compile_seconds"]
    start = time.perf_counter()
    step(images, labels, net, opt, gm).block_until_ready()  # a tiered step waits for its optimized compile
    second = time.perf_counter() - start
    background = metrics()["compile_seconds"] if counters["fast_compiles"] else 0.0
    return first, compile_s, second, background


def _data():
    import hlotrace as ht

    rng = np.random.default_rng(0)
    images = ht.tensor(rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32))
    labels = ht.tensor(rng.integers(0, CLASSES, BATCH).astype(np.int32))
    return images, labels


def cold_and_warm(warm_runs: int = 3) -> None:
    """A fresh process's first call (``first_call="compiled"``), cold then warm on one new
    cache directory, untiered and tiered: what the persistent cache saves a second process."""
    import os
    import subprocess
    import tempfile

    rows = []
    for tiered in (False, True):
        for startup in (True, False):
            directory = tempfile.mkdtemp(prefix="hlotrace-cache-")
            env = dict(os.environ, HLOTRACE_CACHE_DIR=directory)
            argv = [sys.executable, "-m", "benchmarks.bench_first_call", "--one", "tiered" if tiered else "untiered"]
            if not startup:
                argv.append("--after-startup")
            times = []
            for _ in range(1 + warm_runs):
                out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
                times.append(float(out.split()[-1]))
            cold, warm = times[0], times[1:]
            rows.append(
                [
                    "tiered" if tiered else "untiered (the default)",
                    "included" if startup else "before the timer",
                    fmt_time(cold),
                    " / ".join(fmt_time(t) for t in warm),
                    " / ".join(f"{t / cold:.2f}" for t in warm),
                ]
            )
    print_table(
        ["first_call='compiled'", "process start-up", "cold", "warm (each a new process)", "warm / cold"],
        rows,
        title=(
            "a fresh process's first call, cold then warm on one new cache directory (target warm/cold <= 0.3); "
            "start-up: importing jax and making the PJRT client, hlotrace's lowering and pass modules"
        ),
    )


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    if "--one" in argv:  # one first call in this process (cold_and_warm's subprocess)
        if "--after-startup" in argv:  # the PJRT client made and hlotrace's modules imported first
            import hlotrace.lowering.rules
            import hlotrace.passes  # noqa: F401
            from hlotrace import runtime

            runtime.client()
        images, labels = _data()
        first = _first_call("compiled", images, labels, argv[argv.index("--one") + 1] == "tiered")[0]
        print(f"first call {first}")
        return {}
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header(
        f"first call of a 3-conv CNN step (batch {BATCH} of {CHANNELS}x{SIZE}x{SIZE}, AdamW)",
        "benchmarks.bench_first_call",
        argv,
    )
    from hlotrace.runtime import cache

    if "--cold-warm" in argv:
        cold_and_warm()
        return {}
    cache.set_directory("off")
    images, labels = _data()
    candidates = {
        'first_call="eager"': ("eager", False),
        'first_call="compiled"': ("compiled", False),
        'first_call="compiled", tiered_compile=True': ("compiled", True),
    }
    times: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in candidates}
    for _ in range(repeat):
        for name, (mode, tiered_compile) in candidates.items():
            times[name].append(_first_call(mode, images, labels, tiered_compile))
    rows = []
    medians = {}
    for name, runs in times.items():
        first, compile_s, second, background = (statistics.median(r[i] for r in runs) for i in range(4))
        both = statistics.median(r[0] + r[2] for r in runs)
        medians[name] = (first, both)
        rows.append(
            [
                name,
                fmt_time(first),
                fmt_time(compile_s),
                fmt_time(first - compile_s),
                fmt_time(second),
                fmt_time(both),
                fmt_time(background) if background else "-",
            ]
        )
    print_table(
        ["candidate", "first call", "its XLA compile", "the rest", "second call", "first two", "background compile"],
        rows,
        title=f"{repeat} fresh functions each, medians (the second call of a tiered step waits for its optimized compile)",
    )
    eager, eager_both = medians['first_call="eager"']
    plain, plain_both = medians['first_call="compiled"']
    compiled, compiled_both = medians['first_call="compiled", tiered_compile=True']
    ratio = eager / compiled
    met = "met" if ratio >= TARGET else "NOT met"
    print(f"eager / compiled first call, tiered {fmt_ratio(ratio)}; target >= {TARGET:g}: {met}")
    print(f"eager / compiled first call, untiered (the default) {fmt_ratio(eager / plain)}")
    print(
        f"first two calls: eager / compiled tiered {fmt_ratio(eager_both / compiled_both)}, "
        f"eager / compiled untiered {fmt_ratio(eager_both / plain_both)}"
    )
    print()
    return {"bench": "first_call", "eager_s": eager, "compiled_s": compiled, "ratio": ratio, "target": TARGET}


if __name__ == "__main__":
    main()
    sys.exit(0)
