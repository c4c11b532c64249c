"""First-call cost of a 2,000-op trace: hlotrace (record + lower + compile) vs jax.jit.

The computation is a chain of N elementwise ops (default 2,000; ``--ops N``; ``--small``
or HLOTRACE_BENCH_SMALL=1: 500) on f32[16,16] inputs x and y, cycling
``x + y, tanh, x * y, sin, x - y, cos`` so that values stay bounded. hlotrace's first call
of a fresh ``xla_trace`` function runs the chain eagerly while recording it, lowers the
trace to StableHLO text and compiles it with PJRT; jax's first call of a fresh ``jax.jit``
traces, lowers and compiles. Both are measured ``--repeat`` times (default 3) with every
cache emptied first: ``jax.clear_caches()`` plus a new function object for jax, and
hlotrace's in-process executable cache (``hlotrace.runtime.compiler.EXECUTABLES``, keyed by the
module's fingerprint) for hlotrace. The jax first call blocks on its result; hlotrace's
first call returns the eager result, already on the host.

The split for hlotrace repeats the steps of ``hlotrace.build.build_entry`` one by
one: record (eager run inside a Recorder), lower (``lowering.lower_trace`` + ``.text()``)
and compile (``runtime.compile``); jax's split uses its AOT API (trace, lower, compile).

    .venv/bin/python -m benchmarks.bench_compile [--small] [--ops N] [--repeat N]
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

from benchmarks.common import (
    fmt_ratio,
    fmt_time,
    int_option,
    main_args,
    print_header,
    print_table,
    small_requested,
    time_once,
)

FULL_OPS = 2000
SMALL_OPS = 500
SHAPE = (16, 16)
REPEAT = 3


def _steps(m):
    """The op cycle, written against a module ``m`` (hlotrace.functional or jax.numpy)."""
    return (
        lambda x, y: x + y,
        lambda x, y: m.tanh(x),
        lambda x, y: x * y,
        lambda x, y: m.sin(x),
        lambda x, y: x - y,
        lambda x, y: m.cos(x),
    )


def make_chain(m, n_ops: int):
    """A fresh function object ``f(x, y)`` applying ``n_ops`` ops of the cycle to x."""
    steps = _steps(m)
    plan = [steps[i % len(steps)] for i in range(n_ops)]

    def chain(x, y):
        for step in plan:
            x = step(x, y)
        return x

    return chain


def _hlotrace_first_call(n_ops, x_np, y_np):
    import hlotrace as ht
    import hlotrace.functional as F
    from hlotrace import runtime
    from hlotrace.jit import xla_trace

    runtime.compiler.EXECUTABLES.clear()
    traced = xla_trace(make_chain(F, n_ops))
    x, y = ht.tensor(x_np), ht.tensor(y_np)
    seconds, _ = time_once(lambda: traced(x, y))
    return seconds, traced, x, y


def _hlotrace_split(n_ops, x_np, y_np) -> dict[str, float]:
    """Record, lower and compile timed separately (the steps of build_entry)."""
    import hlotrace as ht
    import hlotrace.functional as F
    from hlotrace import lowering, runtime
    from hlotrace.tensor import Tensor
    from hlotrace.trace import Recorder

    chain = make_chain(F, n_ops)
    leaves = [ht.tensor(x_np), ht.tensor(y_np)]

    def record():
        recorder = Recorder(name="chain")
        proxies = [Tensor._from_array(leaf.numpy(), checked=True) for leaf in leaves]
        with recorder:
            for proxy in proxies:
                recorder.trace.inputs.append(recorder.add_input(proxy))
            result = chain(*proxies)
            recorder.set_outputs([result])
        return recorder.trace

    record_s, trace = time_once(record)
    assert len(trace.records) == n_ops, f"expected {n_ops} records, got {len(trace.records)}"

    def lower():
        lowered = lowering.lower_trace(trace, name="chain")
        return lowered, lowered.text()

    lower_s, (lowered, text) = time_once(lower)
    runtime.compiler.EXECUTABLES.clear()
    compile_s, _ = time_once(lambda: runtime.compile(text, lowered.in_avals, lowered.out_avals))
    return {"record": record_s, "lower": lower_s, "compile": compile_s}


def _jax_first_call(n_ops, xa, ya):
    import jax
    import jax.numpy as jnp

    jax.clear_caches()
    jitted = jax.jit(make_chain(jnp, n_ops))
    seconds, out = time_once(lambda: jitted(xa, ya).block_until_ready())
    return seconds, out


def _jax_split(n_ops, xa, ya) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    jax.clear_caches()
    jitted = jax.jit(make_chain(jnp, n_ops))
    try:
        trace_s, traced = time_once(lambda: jitted.trace(xa, ya))
        lower_s, lowered = time_once(traced.lower)
    except AttributeError:  # older jax: no .trace(); lowering includes tracing
        trace_s = 0.0
        lower_s, lowered = time_once(lambda: jitted.lower(xa, ya))
    compile_s, _ = time_once(lowered.compile)
    return {"record": trace_s, "lower": lower_s, "compile": compile_s}


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    n_ops = int_option(argv, "--ops", SMALL_OPS if small_requested(argv) else FULL_OPS)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header(f"first call of a {n_ops}-op elementwise chain on f32[16,16]", "benchmarks.bench_compile", argv)

    import jax

    from hlotrace.runtime import cache

    cache.set_directory("off")  # every repeat must compile: no persistent cache hits

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(SHAPE, dtype=np.float32)
    y_np = rng.uniform(0.0, 1.0, SHAPE).astype(np.float32)
    device = jax.devices()[0]
    xa, ya = jax.device_put(x_np, device), jax.device_put(y_np, device)

    # Warm both sides (MLIR context, PJRT client, jax's own imports) on a small chain.
    _hlotrace_first_call(12, x_np, y_np)
    _jax_first_call(12, xa, ya)

    ht_total, jax_total = [], []
    ht_splits, jax_splits = [], []
    for _ in range(repeat):
        seconds, traced, x, y = _hlotrace_first_call(n_ops, x_np, y_np)
        ht_total.append(seconds)
        jseconds, jout = _jax_first_call(n_ops, xa, ya)
        jax_total.append(jseconds)
        ht_splits.append(_hlotrace_split(n_ops, x_np, y_np))
        jax_splits.append(_jax_split(n_ops, xa, ya))

    compiled_out = traced(x, y)  # second call: the compiled executable
    eager_out = make_chain(np, n_ops)(x_np, y_np)  # plain NumPy (np has tanh/sin/cos)
    for name, value in (("hlotrace compiled", compiled_out.numpy()), ("jax.jit", np.asarray(jout))):
        if not np.allclose(value, eager_out, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{name} disagrees with NumPy: max abs err {np.max(np.abs(value - eager_out)):.3g}")
    print(
        f"results agree (np.allclose, rtol=1e-4): hlotrace compiled, jax.jit, NumPy; "
        f"trace has {len(traced.trace.records)} records\n"
    )

    def best(splits, part):
        return min(s[part] for s in splits)

    rows = [
        ["hlotrace first call (record+lower+compile)", fmt_time(min(ht_total)), fmt_time(statistics.median(ht_total))],
        ["jax.jit first call (trace+lower+compile)", fmt_time(min(jax_total)), fmt_time(statistics.median(jax_total))],
    ]
    for part, jax_name in (("record", "trace"), ("lower", "lower"), ("compile", "compile")):
        rows.append(
            [
                f"  hlotrace {part}",
                fmt_time(best(ht_splits, part)),
                fmt_time(statistics.median(s[part] for s in ht_splits)),
            ]
        )
        rows.append(
            [
                f"  jax {jax_name}",
                fmt_time(best(jax_splits, part)),
                fmt_time(statistics.median(s[part] for s in jax_splits)),
            ]
        )
    print_table(
        ["step", f"best of {repeat}", "median"],
        rows,
        title="first-call time (split rows measured separately, in the same run)",
    )

    ratio = min(ht_total) / min(jax_total)
    ratio_median = statistics.median(ht_total) / statistics.median(jax_total)
    compile_ratio = best(ht_splits, "compile") / best(jax_splits, "compile")
    front_ratio = (best(ht_splits, "record") + best(ht_splits, "lower")) / (
        best(jax_splits, "record") + best(jax_splits, "lower")
    )
    print_table(
        ["ratio", "value"],
        [
            ["hlotrace / jax.jit first call, best", fmt_ratio(ratio)],
            ["hlotrace / jax.jit first call, median", fmt_ratio(ratio_median)],
            ["hlotrace / jax compile step only", fmt_ratio(compile_ratio)],
            ["hlotrace (record+lower) / jax (trace+lower)", fmt_ratio(front_ratio)],
        ],
    )
    print(f"compile ratio hlotrace/jax (first call, best) {fmt_ratio(ratio)}")
    print()
    return {
        "bench": "compile",
        "n_ops": n_ops,
        "hlotrace_s": min(ht_total),
        "jax_s": min(jax_total),
        "ratio": ratio,
        "ratio_median": ratio_median,
        "compile_ratio": compile_ratio,
        "front_ratio": front_ratio,
        "hlotrace_split": {part: best(ht_splits, part) for part in ("record", "lower", "compile")},
        "jax_split": {part: best(jax_splits, part) for part in ("record", "lower", "compile")},
        "target": None,
        "met": None,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
