"""``remat``: temp memory and step time of a deep tanh MLP's training step, per policy.

The model of issue 8: 32 tanh layers of width 256, batch 4096, mean-square loss, SGD, one
compiled step (forward, backward, update; parameters updated in place). Candidates, all in
this run: hlotrace with no remat, ``remat{every=2}``, ``remat{every=4}``,
``remat{policy=sqrt}``, ``remat{budget=B}`` with B = 0.4x the un-rematerialized step's temp
memory; and the same step in jax: ``jax.jit`` plain, and with ``jax.checkpoint`` around each
layer. Temp memory is XLA's compiled memory plan (``memory_stats()["temp"]``, jax's
``memory_analysis().temp_size_in_bytes``); step times are interleaved loops (best and
median per call; ratios are medians of paired loops against the no-remat step). Every
remat policy's loss and parameters after two steps are checked bitwise against no remat.

Issue 8 targets: with the budget at 0.4x, the step fits it at <= 1.3x the step time; lower
temp memory than jax.checkpoint on the same model.

    .venv/bin/python -m benchmarks.passes_remat [--small] [--repeat N]
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

FULL = (32, 4096, 256)  # layers, batch, width
SMALL = (12, 512, 128)
BUDGET_SHARE = 0.4  # --small: 0.6 (12 layers cannot go below ~0.58x with one level of segments)
TIME_TARGET = 1.3
REPEAT = 5


def _hlotrace_step(layers: int, width: int, pipeline: str):
    """(compiled step, its model) for one pass pipeline; parameters seeded identically."""
    import hlotrace.functional as F
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager
    from hlotrace.jit import xla_trace

    class DeepMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

        def forward(self, x):
            for layer in self.layers:
                x = F.tanh(layer(x))
            return x

    def train_step(x, *, net, opt, gm):
        with gm:
            loss = F.mean(net(x) ** 2)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    nn.init.seed(0)
    net = DeepMLP()
    opt = optim.SGD(net.parameters(), lr=1e-3)
    gm = GradManager().attach(net.parameters())
    return xla_trace(train_step, passes=pipeline), net, opt, gm


def _jax_step(params, x, checkpointed: bool):
    import jax
    import jax.numpy as jnp

    def layer(h, wb):
        w, b = wb
        return jnp.tanh(jnp.dot(h, w.T, precision=jax.lax.Precision.HIGHEST) + b)

    body = jax.checkpoint(layer) if checkpointed else layer

    def loss(ps, x):
        h = x
        for wb in ps:
            h = body(h, wb)
        return jnp.mean(h**2)

    def step(ps, x):
        value, grads = jax.value_and_grad(loss)(ps, x)
        return value, [(w - 1e-3 * gw, b - 1e-3 * gb) for (w, b), (gw, gb) in zip(ps, grads, strict=True)]

    jitted = jax.jit(step, donate_argnums=0)
    temp = jitted.lower(params, x).compile().memory_analysis().temp_size_in_bytes
    return jitted, temp


def remat_rows(argv: list[str]) -> dict:
    """Run every candidate; return {name: {"temp": bytes, "timing": Timing}} plus the summary."""
    import jax

    import hlotrace as ht
    from hlotrace.testing.differential import assert_bitwise_equal

    layers, batch, width = SMALL if small_requested(argv) else FULL
    repeat = int_option(argv, "--repeat", REPEAT)
    x_np = np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32)
    x = ht.tensor(x_np)

    base, base_net, base_opt, base_gm = _hlotrace_step(layers, width, "")
    base(x, net=base_net, opt=base_opt, gm=base_gm)
    base_temp = base.memory_stats()["temp"]
    budget = int((0.6 if small_requested(argv) else BUDGET_SHARE) * base_temp)
    pipelines = {
        "hlotrace, no remat": "",
        "hlotrace, remat{every=2}": "remat{every=2}",
        "hlotrace, remat{every=4}": "remat{every=4}",
        "hlotrace, remat{policy=sqrt}": "remat{policy=sqrt}",
        f"hlotrace, remat{{budget={budget}}}": f"remat{{budget={budget}}}",
    }
    calls, temps, results = {}, {}, {}
    for name, pipeline in pipelines.items():
        step, net, opt, gm = _hlotrace_step(layers, width, pipeline)
        for _ in range(2):
            loss = step(x, net=net, opt=opt, gm=gm)
        results[name] = [loss.numpy(), *[p.numpy() for p in net.parameters()]]
        temps[name] = step.memory_stats()["temp"]
        calls[name] = lambda step=step, net=net, opt=opt, gm=gm: step(
            x, net=net, opt=opt, gm=gm
        )._device.block_until_ready()
    for name in pipelines:
        assert_bitwise_equal(results[name], results["hlotrace, no remat"], name)

    params = [
        (jax.numpy.asarray(p.numpy()), jax.numpy.asarray(q.numpy()))
        for p, q in zip(*[iter(base_net.parameters())] * 2, strict=True)
    ]
    x_jax = jax.device_put(x_np)
    for name, checkpointed in (("jax.jit", False), ("jax.jit + jax.checkpoint per layer", True)):
        jitted, temps[name] = _jax_step(params, x_jax, checkpointed)
        state = {"ps": jax.tree_util.tree_map(lambda a: a.copy(), params)}

        def run(jitted=jitted, state=state):
            value, state["ps"] = jitted(state["ps"], x_jax)
            value.block_until_ready()

        run()
        calls[name] = run
    timings = compare(calls, repeat=repeat, warmup=1, min_loop_seconds=0.0)
    plain = timings["hlotrace, no remat"]
    rows = {
        name: {
            "temp": temps[name],
            "temp_share": temps[name] / base_temp,
            "best_s": timings[name].best,
            "median_s": timings[name].median,
            "time_ratio": paired_ratio(timings[name], plain),
        }
        for name in calls
    }
    budget_name = next(n for n in pipelines if "budget" in n)
    fits = rows[budget_name]["temp"] <= budget
    return {
        "model": (layers, batch, width),
        "rows": rows,
        "budget": budget,
        "budget_fits": fits,
        "budget_time_ratio": rows[budget_name]["time_ratio"],
        "beats_jax_checkpoint": min(rows[n]["temp"] for n in pipelines if "remat" in n)
        < rows["jax.jit + jax.checkpoint per layer"]["temp"],
        "met": fits and rows[budget_name]["time_ratio"] <= TIME_TARGET,
    }


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    layers, batch, width = SMALL if small_requested(argv) else FULL
    print_header(
        f"remat: {layers}-layer tanh MLP train step, batch {batch}, width {width}", "benchmarks.passes_remat", argv
    )
    result = remat_rows(argv)
    print_table(
        ["candidate", "temp memory", "x no remat", "best/step", "median/step", "time / no remat"],
        [
            [
                name,
                f"{r['temp'] / 2**20:.1f} MiB",
                f"{r['temp_share']:.2f}x",
                fmt_time(r["best_s"]),
                fmt_time(r["median_s"]),
                fmt_ratio(r["time_ratio"]),
            ]
            for name, r in result["rows"].items()
        ],
        title="XLA's compiled temp memory; step times interleaved (time ratio: median of paired loops)",
    )
    print(
        f"budget {result['budget'] / 2**20:.1f} MiB: fits {result['budget_fits']}, step time "
        f"{fmt_ratio(result['budget_time_ratio'])} (target <= {TIME_TARGET}): {'met' if result['met'] else 'NOT met'}; "
        f"lower temp memory than jax.checkpoint: {result['beats_jax_checkpoint']}\n"
    )
    return {"bench": "passes_remat", **result}


if __name__ == "__main__":
    main()
    sys.exit(0)
