"""``fuse-reductions``: the seed softmax and layer norm with and without it, against jax.jit.

Candidates, measured interleaved in one run (steady state, every call blocks):
- softmax (benchmarks/bench_softmax.py's function, NaN-exact max) compiled with no passes,
  with ``cse,fuse-reductions`` (the max and its any-NaN test become one variadic reduce)
  and with ``simplify,elide-guards,cse,fuse-reductions`` (elide-guards drops the NaN guard
  a softmax cannot need and the -0.0 guard of its sum: the module jax.jit gets);
- ``jax.jit`` of the same math (its max skips NaN on XLA:CPU: the issue's peer).
- layer norm (``F.layer_norm`` over the last axis, with weight and bias), the same
  pipelines, against ``jax.jit`` of the same formula.

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
SIMPLIFY = "simplify,elide-guards,cse,fuse-reductions"
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


PIPELINES = ("", PIPELINE, SIMPLIFY)


def _candidates(fn, jax_fn, arrays, rtol):
    """{pipeline: callable} for each of PIPELINES, jax.jit's callable, and each pipeline's
    reduce count; inputs stay on the device and results are cross-checked first."""
    import jax

    import hlotrace as ht
    from hlotrace.jit import xla_trace
    from hlotrace.testing.differential import assert_equal_up_to_zero_sign

    tensors = [ht.tensor(a) for a in arrays]
    traced = {p: xla_trace(fn, passes=p) for p in PIPELINES}
    results = {}
    for p, t in traced.items():
        t(*tensors)
        results[p] = t(*tensors).numpy()
    assert_equal_up_to_zero_sign([results[PIPELINE]], [results[""]], f"{fn.__name__} with {PIPELINE!r}")
    if not np.allclose(results[SIMPLIFY], results[""], rtol=1e-6, atol=0, equal_nan=True):
        raise AssertionError(f"{fn.__name__} with {SIMPLIFY!r} differs by more than an ulp or two")
    jitted = jax.jit(jax_fn)
    device_arrays = [jax.device_put(x, jax.devices()[0]) for x in arrays]
    if not np.allclose(results[""], np.asarray(jitted(*device_arrays)), rtol=rtol, atol=1e-5):
        raise AssertionError(f"{fn.__name__}: hlotrace and jax.jit disagree")
    calls = {p: (lambda t=t: t(*tensors)._device.block_until_ready()) for p, t in traced.items()}
    reduces = {p: t.optimized.text().count("stablehlo.reduce(") for p, t in traced.items()}
    return calls, (lambda: jitted(*device_arrays).block_until_ready()), reduces


def _name(label: str, pipeline: str) -> str:
    return f"{label}: hlotrace, {pipeline or 'no passes'}"


def _measure(label, fn, jax_fn, arrays, repeat, rtol):
    calls, peer, reduces = _candidates(fn, jax_fn, arrays, rtol)
    candidates = {_name(label, p): c for p, c in calls.items()}
    candidates[f"{label}: jax.jit"] = peer
    timings = compare(candidates, repeat=repeat, warmup=2, min_loop_seconds=LOOP_SECONDS)
    t_jax = timings[f"{label}: jax.jit"]
    return {
        "label": label,
        "jax_s": t_jax.best,
        "pipelines": {
            p: {
                "reduces": reduces[p],
                "best_s": timings[_name(label, p)].best,
                "ratio": paired_ratio(timings[_name(label, p)], t_jax),
            }
            for p in PIPELINES
        },
    }


def softmax_rows(argv: list[str]) -> dict:
    """The seed softmax with each pipeline, against jax.jit (ratios: medians of paired loops)."""
    shape = SMALL_SHAPE if small_requested(argv) else FULL_SHAPE
    x = (np.random.default_rng(0).standard_normal(shape, dtype=np.float32) * 4.0).astype(np.float32)
    result = _measure(
        f"softmax f32{list(shape)}", softmax, jax_softmax, [x], int_option(argv, "--repeat", REPEAT), 1e-5
    )
    result["ratio"] = min(result["pipelines"][p]["ratio"] for p in (PIPELINE, SIMPLIFY))
    result["target"], result["met"] = TARGET, result["pipelines"][SIMPLIFY]["ratio"] <= TARGET
    return result


def layer_norm_rows(argv: list[str]) -> dict:
    """Layer norm over the last axis (weight and bias) with each pipeline, against jax.jit."""
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
    rows = []
    for r in results:
        for p, v in r["pipelines"].items():
            rows.append([r["label"], p or "(none)", v["reduces"], fmt_time(v["best_s"]), fmt_ratio(v["ratio"])])
        rows.append([r["label"], "jax.jit", "", fmt_time(r["jax_s"]), "1.00x"])
    print_table(
        ["program", "pipeline", "reduces", "best/call", "/ jax.jit"],
        rows,
        title="best time per call; ratios are medians of paired (interleaved) loops",
    )


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    print_header(
        "fuse-reductions and simplify: softmax and layer norm vs jax.jit", "benchmarks.passes_reductions", argv
    )
    soft, ln = softmax_rows(argv), layer_norm_rows(argv)
    print_rows([soft, ln])
    ratio = soft["pipelines"][SIMPLIFY]["ratio"]
    print(f"NaN-exact softmax with {SIMPLIFY!r} / jax.jit: {fmt_ratio(ratio)}; {verdict(ratio, TARGET)}\n")
    return {
        "bench": "passes_reductions",
        "softmax": soft,
        "layer_norm": ln,
        "ratio": ratio,
        "target": TARGET,
        "met": ratio <= TARGET,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
