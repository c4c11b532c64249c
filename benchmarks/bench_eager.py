"""Eager engines (issue 35): hlotrace's NumPy engine vs its device engine vs jax's own eager
(op-by-op) dispatch, measured in one run.

1. One op: ``a + b`` on f32[8] tensors (device engine: both already on the device) against
   ``jnp.add`` on committed device arrays.
2. A training step run eagerly, op by op: the CNN and the transformer of bench_models (AdamW,
   backward), hlotrace's example ``train_step`` under each engine, against the same step's
   jax math run without ``jax.jit`` (each primitive a cached device executable). The first
   step of each (every one-op executable compiled; a private, empty compile cache) and the
   steady steps are both reported.

Issue targets: one op <= 1.3x jax's eager op; an eager step >= 20x faster than the NumPy
engine and <= 1.3x jax op-by-op; the first eager step <= 1.0x jax op-by-op's first step.

    .venv/bin/python -m benchmarks.bench_eager [--repeat N] [--models]
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.common import compare, fmt_ratio, fmt_time, int_option, main_args, print_header, print_table, verdict

REPEAT = 5


def one_op(repeat: int) -> dict:
    import jax.numpy as jnp

    import hlotrace as ht

    x, y = ht.tensor(np.arange(8, dtype=np.float32)), ht.tensor(np.ones(8, np.float32))
    with ht.eager_engine("device"):
        dx, dy = x * 1.0, y * 1.0  # on the device
        dx + dy
    a, b = jnp.arange(8, dtype=jnp.float32), jnp.ones(8, jnp.float32)

    from hlotrace import dispatch

    with ht.eager_engine("device"):
        engine = dispatch.ENGINE[0]
    slot = dispatch.ENGINE

    def on_device():  # the engine switched in and out around the op (two list stores)
        slot[0] = engine
        out = dx + dy
        slot[0] = None
        return out

    candidates = {
        "hlotrace device engine": on_device,
        "hlotrace NumPy engine": lambda: x + y,
        "jnp.add (jax eager)": lambda: jnp.add(a, b),
    }
    timings = compare(candidates, repeat=repeat, warmup=200)
    print_table(
        ["candidate", "best/call", "median/call", "calls/loop"],
        [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
        title="a + b on f32[8], every call (device: both operands already on the device)",
    )
    device, numpy_, jax_ = (timings[k].best for k in candidates)
    ratio = device / jax_
    print(
        f"one op: device engine / jnp.add {fmt_ratio(ratio)} ({verdict(ratio, 1.3)}); NumPy engine / jnp.add "
        f"{fmt_ratio(numpy_ / jax_)}\n"
    )
    return {"device_s": device, "numpy_s": numpy_, "jax_s": jax_, "ratio": ratio}


def _jax_eager_step(loss_fn):
    """bench_models' jax step, not jitted: every primitive dispatched on its own."""
    import jax
    import jax.numpy as jnp

    from benchmarks.bench_models import _adamw

    def step(params, buffers, m, v, t, lr, *batch):
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, m, v, t = _adamw(jnp, params, grads, m, v, t, lr)
        return loss, params, {**buffers, **new_buffers}, m, v, t

    return step


def model_steps(repeat: int) -> dict:
    import jax

    import hlotrace as ht
    from benchmarks.bench_models import BETAS, EPS, LR, WD, example_net_copy, model_cases
    from hlotrace import optim
    from hlotrace.autodiff import GradManager

    results = {}
    for title, example, net, batch_np, loss_fn in model_cases():
        nets = {engine: example_net_copy(net) for engine in ("numpy", "device")}
        opts = {e: optim.AdamW(n.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD) for e, n in nets.items()}
        gms = {e: GradManager().attach(n.parameters()) for e, n in nets.items()}
        batch = [ht.tensor(a) for a in batch_np]
        device = jax.devices()[0]
        params = {k: jax.device_put(p.numpy(), device) for k, p in net.named_parameters()}
        buffers = {k: jax.device_put(b.numpy(), device) for k, b in net.named_buffers()}
        zeros = {k: jax.numpy.zeros_like(p) for k, p in params.items()}
        state = {"j": (params, buffers, zeros, dict(zeros), jax.device_put(np.float32(0.0), device))}
        jstep, jlr = _jax_eager_step(loss_fn), jax.device_put(np.float32(LR), device)
        jbatch = [jax.device_put(a, device) for a in batch_np]

        def jax_call():
            loss, *rest = jstep(*state["j"], jlr, *jbatch)
            state["j"] = tuple(rest)
            return loss.block_until_ready()

        def hlotrace_call(engine):
            with ht.eager_engine(engine):
                return example.train_step(*batch, net=nets[engine], opt=opts[engine], gm=gms[engine]).numpy()

        first = {}
        for name, call in (("device", lambda: hlotrace_call("device")), ("jax", jax_call)):
            start = time.perf_counter()
            call()
            first[name] = time.perf_counter() - start
        names = ("hlotrace device engine", "hlotrace NumPy engine", "jax op-by-op (no jit)")
        timings = compare(
            {names[0]: lambda: hlotrace_call("device"), names[1]: lambda: hlotrace_call("numpy"), names[2]: jax_call},
            repeat=repeat,
            warmup=1,
            min_loop_seconds=0.2,
        )
        print_table(
            ["candidate", "best/call", "median/call", "calls/loop"],
            [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
            title=f"{title}: one eager training step (AdamW), {repeat} interleaved loops per candidate",
        )
        device_s, numpy_s, jax_s = (timings[k].best for k in names)
        print(
            f"{title}: device engine {fmt_ratio(numpy_s / device_s)} faster than the NumPy engine (target >= 20x); "
            f"device / jax op-by-op {fmt_ratio(device_s / jax_s)} ({verdict(device_s / jax_s, 1.3)}); first step "
            f"{fmt_time(first['device'])} vs jax's {fmt_time(first['jax'])} "
            f"({verdict(first['device'] / first['jax'], 1.0)})\n"
        )
        results[title] = {"device_s": device_s, "numpy_s": numpy_s, "jax_s": jax_s, "first": first}
    return results


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header("eager engines: NumPy vs device vs jax op-by-op", "benchmarks.bench_eager", argv)
    results = {"one_op": one_op(repeat)}
    if "--models" in argv:
        results["models"] = model_steps(repeat)
    return results


if __name__ == "__main__":
    main()
