"""``fuse-reductions``: the seed softmax and layer norm with and without it, against jax.jit.

Candidates, measured interleaved in one run (steady state, every call blocks):
- softmax (benchmarks/bench_softmax.py's function, NaN-exact max) compiled with no passes,
  and with ``cse,fuse-reductions`` (the max and its any-NaN test become one reduce);
- ``jax.jit`` of the same math (its max skips NaN on XLA:CPU: the issue's peer).
- layer norm (``F.layer_norm`` over the last axis, with weight and bias) with no passes and
  with ``cse,fuse-reductions``, against ``jax.jit`` of the same formula.

Issue 8 target: softmax with fuse-reductions <= 1.05x jax.jit's softmax.

    .venv/bin/python -m benchmarks.passes_reductions [--small] [--repeat N]
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.bench_softmax import jax_softmax, softmax
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

TARGET = 1.05
PIPELINE = "cse,fuse-reductions"
FULL_SHAPE, SMALL_SHAPE = (64, 100, 1000), (8, 100, 1000)
LN_FULL, LN_SMALL = (8192, 1024), (1024, 1024)
REPEAT = 15
LOOP_SECONDS = 0.25


def _layer_norm(x, w, b):
    import hlotrace.functional as F

    return F.layer_norm(x, (x.shape[-1],), w, b)


def _jax_layer_norm(x, w, b):
    import jax.numpy as jnp

    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * w + b


def _candidates(fn, jax_fn, arrays, rtol):
    """(unfused, fused, jax) callables on device-resident inputs, results cross-checked."""
    import jax

    import hlotrace as ht
    from hlotrace.jit import xla_trace

    tensors = [ht.tensor(a) for a in arrays]
    plain, fused = xla_trace(fn, passes=""), xla_trace(fn, passes=PIPELINE)
    for traced in (plain, fused):
        traced(*tensors)
    a, b = plain(*tensors).numpy(), fused(*tensors).numpy()
    if a.tobytes() != b.tobytes():
        raise AssertionError(f"{fn.__name__}: results with {PIPELINE!r} differ bitwise from the unfused module")
    jitted = jax.jit(jax_fn)
    device_arrays = [jax.device_put(x, jax.devices()[0]) for x in arrays]
    reference = np.asarray(jitted(*device_arrays))
    if not np.allclose(a, reference, rtol=rtol, atol=1e-5):
        raise AssertionError(f"{fn.__name__}: hlotrace and jax.jit disagree")
    reduces = (plain.optimized.text().count("stablehlo.reduce("), fused.optimized.text().count("stablehlo.reduce("))
    return (
        lambda: plain(*tensors)._device.block_until_ready(),
        lambda: fused(*tensors)._device.block_until_ready(),
        lambda: jitted(*device_arrays).block_until_ready(),
        reduces,
    )


def _measure(label, fn, jax_fn, arrays, repeat, rtol):
    plain, fused, peer, reduces = _candidates(fn, jax_fn, arrays, rtol)
    names = (f"{label}: hlotrace, no passes", f"{label}: hlotrace, {PIPELINE}", f"{label}: jax.jit")
    timings = compare(
        dict(zip(names, (plain, fused, peer), strict=True)), repeat=repeat, warmup=2, min_loop_seconds=LOOP_SECONDS
    )
    t_plain, t_fused, t_jax = (timings[n] for n in names)
    return {
        "label": label,
        "reduces": reduces,
        "plain_s": t_plain.best,
        "fused_s": t_fused.best,
        "jax_s": t_jax.best,
        "plain_ratio": paired_ratio(t_plain, t_jax),
        "fused_ratio": paired_ratio(t_fused, t_jax),
        "speedup": paired_ratio(t_plain, t_fused),
    }


def softmax_rows(argv: list[str]) -> dict:
    """The seed softmax, unfused / fused / jax.jit (ratios are medians of paired loops)."""
    shape = SMALL_SHAPE if small_requested(argv) else FULL_SHAPE
    x = (np.random.default_rng(0).standard_normal(shape, dtype=np.float32) * 4.0).astype(np.float32)
    result = _measure(
        f"softmax f32{list(shape)}", softmax, jax_softmax, [x], int_option(argv, "--repeat", REPEAT), 1e-5
    )
    result["target"], result["met"] = TARGET, result["fused_ratio"] <= TARGET
    return result


def layer_norm_rows(argv: list[str]) -> dict:
    """Layer norm over the last axis (weight and bias), unfused / fused / jax.jit."""
    shape = LN_SMALL if small_requested(argv) else LN_FULL
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape, dtype=np.float32)
    w, b = rng.standard_normal(shape[-1:], dtype=np.float32), rng.standard_normal(shape[-1:], dtype=np.float32)
    return _measure(
        f"layer_norm f32{list(shape)}",
        _layer_norm,
        _jax_layer_norm,
        [x, w, b],
        int_option(argv, "--repeat", REPEAT),
        1e-4,
    )


def print_rows(results: list[dict]) -> None:
    print_table(
        [
            "program",
            "reduces (before -> after)",
            "no passes",
            PIPELINE,
            "jax.jit",
            "/jax no passes",
            "/jax fused",
            "fused speed-up",
        ],
        [
            [
                r["label"],
                f"{r['reduces'][0]} -> {r['reduces'][1]}",
                fmt_time(r["plain_s"]),
                fmt_time(r["fused_s"]),
                fmt_time(r["jax_s"]),
                fmt_ratio(r["plain_ratio"]),
                fmt_ratio(r["fused_ratio"]),
                fmt_ratio(r["speedup"]),
            ]
            for r in results
        ],
        title="best time per call; ratios are medians of paired (interleaved) loops",
    )


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    print_header("fuse-reductions: softmax and layer norm vs jax.jit", "benchmarks.passes_reductions", argv)
    soft, ln = softmax_rows(argv), layer_norm_rows(argv)
    print_rows([soft, ln])
    print(
        f"softmax with {PIPELINE} / jax.jit: {fmt_ratio(soft['fused_ratio'])}; {verdict(soft['fused_ratio'], TARGET)}\n"
    )
    return {
        "bench": "passes_reductions",
        "softmax": soft,
        "layer_norm": ln,
        "ratio": soft["fused_ratio"],
        "target": TARGET,
        "met": soft["met"],
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
