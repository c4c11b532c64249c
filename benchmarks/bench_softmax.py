"""Steady-state softmax: hlotrace compiled vs jax.jit vs hlotrace's eager (NumPy) path.

The function is the one from the issue::

    offset = inp.max(axis=-1, keepdims=True).detach()
    cached = F.exp(inp - offset)
    down = F.sum(cached, axis=-1, keepdims=True)
    return cached / down

on f32[64,100,1000] (``--small`` or HLOTRACE_BENCH_SMALL=1: f32[8,100,1000]). The input
stays on the device for both compiled candidates (hlotrace caches the Tensor's device
buffer on the first compiled call; the jax Array is put on the device once). Every call
blocks on its result. The eager path is the same Python function, undecorated, on a host
Tensor. Results are checked against each other and a float64 NumPy reference first.

Two jax peers: ``jax.jit`` of the same math in jax.numpy (the issue's peer), and the same
with a NaN-propagating row max. XLA:CPU (jaxlib 0.10) runs large float max reductions
through YNNPACK, which skips NaN, so ``jnp.max`` can miss a NaN; hlotrace's max rule adds
an any-NaN reduction to match NumPy, and the second peer does that same extra work (the
benchmark prints whether each compiled max propagates NaN).

Issue target: hlotrace / jax <= 1.1 (against the first peer).

    .venv/bin/python -m benchmarks.bench_softmax [--small] [--repeat N]
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.common import (
    block_tensor,
    compare,
    fmt_ratio,
    fmt_time,
    int_option,
    main_args,
    paired_ratio,
    print_header,
    print_table,
    small_requested,
    time_once,
    verdict,
)

TARGET = 1.1
FULL_SHAPE = (64, 100, 1000)
SMALL_SHAPE = (8, 100, 1000)
REPEAT = 15
LOOP_SECONDS = 0.25


def softmax(inp):
    """The issue's softmax, written against hlotrace.functional."""
    import hlotrace.functional as F

    offset = inp.max(axis=-1, keepdims=True).detach()
    cached = F.exp(inp - offset)
    down = F.sum(cached, axis=-1, keepdims=True)
    return cached / down


def jax_softmax(inp):
    """The same math in jax.numpy."""
    import jax
    import jax.numpy as jnp

    offset = jax.lax.stop_gradient(jnp.max(inp, axis=-1, keepdims=True))
    cached = jnp.exp(inp - offset)
    down = jnp.sum(cached, axis=-1, keepdims=True)
    return cached / down


def jax_softmax_nan_max(inp):
    """jax with the max that hlotrace lowers: a NaN anywhere in a row makes that row's max NaN.

    XLA:CPU's YNNPACK reductions skip NaN in float max/min, so hlotrace's max rule adds an
    any-NaN reduction and a select; this peer does the same work, for a like-for-like
    comparison of the lowering.
    """
    import jax
    import jax.numpy as jnp

    row_max = jnp.max(inp, axis=-1, keepdims=True)
    has_nan = jnp.any(jnp.isnan(inp), axis=-1, keepdims=True)
    offset = jax.lax.stop_gradient(jnp.where(has_nan, jnp.nan, row_max))
    cached = jnp.exp(inp - offset)
    down = jnp.sum(cached, axis=-1, keepdims=True)
    return cached / down


def _row_max_propagates_nan(max_fn, jax_max_fn) -> tuple[bool, bool]:
    """Whether a compiled row max (hlotrace, jax.jit) gives NaN for a 5,000-wide row holding one."""
    row = np.zeros((2, 5000), np.float32)
    row[0, 1234] = np.nan
    return bool(np.isnan(max_fn(row)[0])), bool(np.isnan(jax_max_fn(row)[0]))


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    small = small_requested(argv)
    shape = SMALL_SHAPE if small else FULL_SHAPE
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header(f"softmax on f32[{','.join(map(str, shape))}], steady state", "benchmarks.bench_softmax", argv)

    import jax

    import hlotrace as ht
    from hlotrace.jit import xla_trace

    rng = np.random.default_rng(0)
    inp_np = (rng.standard_normal(shape, dtype=np.float32) * 4.0).astype(np.float32)

    traced = xla_trace(softmax)
    inp = ht.tensor(inp_np)
    first_seconds, _ = time_once(lambda: traced(inp))  # eager run + record + lower + compile
    out = traced(inp)  # compiled; caches inp's device buffer
    block_tensor(out)
    assert out._device is not None, "the second call did not run the compiled executable"

    jitted = jax.jit(jax_softmax)
    jitted_nan = jax.jit(jax_softmax_nan_max)
    inp_jax = jax.device_put(inp_np, jax.devices()[0])
    jout = jitted(inp_jax).block_until_ready()
    jout_nan = jitted_nan(inp_jax).block_until_ready()

    eager_inp = ht.tensor(inp_np)  # a separate host Tensor: the eager path never touches the device
    eager_out = softmax(eager_inp)

    x64 = inp_np.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    reference = e / e.sum(axis=-1, keepdims=True)
    results = {
        "hlotrace compiled": out.numpy(),
        "jax.jit": np.asarray(jout),
        "jax.jit (NaN-propagating max)": np.asarray(jout_nan),
        "hlotrace eager": eager_out.numpy(),
    }
    for name, value in results.items():
        if not np.allclose(value, reference, rtol=1e-5, atol=1e-6):
            raise AssertionError(
                f"{name} disagrees with the float64 reference: max abs err {np.max(np.abs(value - reference)):.3g}"
            )
    if not np.allclose(results["hlotrace compiled"], results["jax.jit"], rtol=1e-5, atol=1e-7):
        raise AssertionError("hlotrace compiled and jax.jit disagree")
    print(
        "results agree (np.allclose, rtol=1e-5): hlotrace compiled, both jax.jit peers, hlotrace eager, float64 NumPy"
    )

    import hlotrace.functional as F

    ht_nan, jax_nan = _row_max_propagates_nan(
        lambda a: xla_trace(lambda t: F.max(t, axis=-1))(ht.tensor(a)).numpy(),
        lambda a: np.asarray(jax.jit(lambda t: jax.numpy.max(t, axis=-1))(a)),
    )
    print(f"compiled row max of a 5000-wide row holding a NaN gives NaN: hlotrace {ht_nan}, jax.jit {jax_nan}\n")

    names = ("hlotrace compiled (xla_trace)", "jax.jit", "jax.jit, NaN-propagating max", "hlotrace eager (NumPy)")
    timings = compare(
        {
            names[0]: lambda: traced(inp)._device.block_until_ready(),
            names[1]: lambda: jitted(inp_jax).block_until_ready(),
            names[2]: lambda: jitted_nan(inp_jax).block_until_ready(),
            names[3]: lambda: softmax(eager_inp),
        },
        repeat=repeat,
        warmup=2,
        min_loop_seconds=LOOP_SECONDS,
    )
    compiled, peer, peer_nan, eager = (timings[k] for k in names)
    print_table(
        ["candidate", "best/call", "median/call", "calls/loop"],
        [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
        title=f"{repeat} loops per candidate (interleaved), every call blocks on its result",
    )
    print(f"hlotrace first call (eager run + record + lower + compile): {fmt_time(first_seconds)}\n")

    ratio = compiled.best / peer.best
    ratio_median = compiled.median / peer.median
    ratio_paired = paired_ratio(compiled, peer)
    ratio_nan = compiled.best / peer_nan.best
    eager_ratio = eager.best / compiled.best
    print_table(
        ["ratio", "value"],
        [
            ["hlotrace compiled / jax.jit, best", fmt_ratio(ratio)],
            ["hlotrace compiled / jax.jit, median", fmt_ratio(ratio_median)],
            ["hlotrace compiled / jax.jit, median of paired loops", fmt_ratio(ratio_paired)],
            ["hlotrace compiled / jax.jit NaN-propagating max, best", fmt_ratio(ratio_nan)],
            ["hlotrace eager / hlotrace compiled, best", fmt_ratio(eager_ratio)],
        ],
    )
    print(f"softmax ratio hlotrace/jax (best) {fmt_ratio(ratio)}; {verdict(ratio, TARGET)}")
    print(f"eager/compiled speed-up {fmt_ratio(eager_ratio)}")
    print()
    return {
        "bench": "softmax",
        "shape": shape,
        "hlotrace_s": compiled.best,
        "jax_s": peer.best,
        "eager_s": eager.best,
        "ratio": ratio,
        "ratio_median": ratio_median,
        "ratio_paired": ratio_paired,
        "ratio_nan_peer": ratio_nan,
        "jax_nan_s": peer_nan.best,
        "max_propagates_nan": {"hlotrace": ht_nan, "jax": jax_nan},
        "eager_ratio": eager_ratio,
        "target": TARGET,
        "met": ratio <= TARGET,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
