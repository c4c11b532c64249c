"""SPMD on N CPU devices: data-parallel training steps vs jax.jit with the same shardings,
and FSDP's per-device memory.

- Data-parallel: bench_train's MLP step (64-512-512-10, batch 128, AdamW) and
  bench_models' transformer step (examples/train_transformer.py, batch 32), on meshes of
  1, 2, 4 and 8 devices: parameters and optimizer state replicated, the batch split over
  "data". hlotrace's step is ``xla_trace`` on placed tensors; the peer is the same math in
  jax (bench_train/bench_models' jax steps), ``jax.jit`` with donated state, called on
  arrays put with the same ``NamedSharding``s on the same devices (hlotrace's CPU client).
  Both are checked against each other for three steps before timing. Reported: wall-time
  ratios (best loops, median of paired loops) and the process-CPU-time ratio (median of
  paired loops: the work a step costs this process, XLA's threads included, which the
  other processes on a shared machine move far less than wall time).
- FSDP: the MLP's parameters (and so the AdamW moments) split over "data" (fc3's 10 output
  rows do not divide: its weight is split along its inputs, its bias replicated). Reported:
  the bytes of parameters + optimizer state each device holds, against total/N, and XLA's
  argument bytes per device (``memory_stats()``) against the whole step's arguments / N.

Issue targets: data-parallel ratio <= 1.1 at every device count; FSDP per-device bytes
within 1.15x of total/N.

    HLOTRACE_CPU_DEVICES=8 .venv/bin/python -m benchmarks.bench_spmd [--repeat N]
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HLOTRACE_CPU_DEVICES", "8")  # before hlotrace makes its CPU client

import numpy as np

from benchmarks import bench_train, model_peers
from benchmarks.common import (
    compare,
    fmt_ratio,
    fmt_time,
    int_option,
    main_args,
    paired_ratio,
    print_header,
    print_table,
)

TARGET, FSDP_TARGET = 1.1, 1.15
COUNTS = (1, 2, 4, 8)
REPEAT = 5
LOOP_SECONDS = 0.2
CPU_ROUNDS = 16


def _devices(n: int) -> list:
    import hlotrace.distributed as dist
    from hlotrace import runtime

    own = dist.devices("cpu")
    return own[:n] if len(own) >= n else list(runtime.cpu_client(max(COUNTS)).local_devices())[:n]


def _place(dist, ht, array, mesh, spec):
    """``array`` as a Tensor on ``mesh`` (None: one device, no mesh)."""
    return ht.tensor(array) if mesh is None else dist.shard(ht.tensor(array), mesh, spec)


def _block(loss):
    """Wait for a loss (the first, recording call gives a host value)."""
    return loss.numpy() if loss._device is None else loss._device.block_until_ready()


def _mesh(dist, devices):
    # One device runs without a mesh: xla_trace's one-device path (jaxlib 0.10.2 gives no
    # parameter shardings for a 1-partition SPMD executable, which runtime.spmd reads).
    return None if len(devices) == 1 else dist.Mesh((len(devices),), ("data",), devices=devices)


def _jax_shardings(devices):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    mesh = Mesh(grid, ("data",))
    return jax, NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("data"))


def _mlp_pair(devices):
    """(hlotrace call, jax call) of the data-parallel MLP step on ``devices``."""
    import hlotrace as ht
    import hlotrace.distributed as dist

    mesh = _mesh(dist, devices)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((bench_train.BATCH, bench_train.SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, bench_train.SIZES[-1], bench_train.BATCH).astype(np.int32)
    net, opt, gm = bench_train._hlotrace_model()
    weights = [(layer.weight.numpy().copy(), layer.bias.numpy().copy()) for layer in (net.fc1, net.fc2, net.fc3)]
    if mesh is not None:
        dist.shard_module(net, mesh, {})  # replicated
    step = ht.xla_trace(bench_train.train_step)
    x, y = _place(dist, ht, x_np, mesh, dist.P("data")), _place(dist, ht, y_np, mesh, dist.P("data"))

    jax, replicated, split = _jax_shardings(devices)
    jstep = bench_train._jax_step()
    jstate, jhyper = bench_train._jax_state(weights, lambda a: jax.device_put(a, replicated))
    state = {"j": jstate}
    jx, jy = jax.device_put(x_np, split), jax.device_put(y_np, split)

    def jax_call():
        loss, *rest = jstep(*state["j"], jhyper, jx, jy)
        state["j"] = tuple(rest)
        return loss.block_until_ready()

    def hlotrace_call():
        return _block(step(x, y, net=net, opt=opt, gm=gm))

    return hlotrace_call, jax_call


def _transformer_pair(devices):
    import jax.numpy as jnp

    import hlotrace as ht
    import hlotrace.distributed as dist
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager

    example = model_peers.load_example("train_transformer")
    mesh = _mesh(dist, devices)
    nn.init.seed(0)
    net = example.CopyLM()
    params_np = {name: p.numpy().copy() for name, p in net.named_parameters()}
    opt = optim.AdamW(
        net.parameters(),
        lr=model_peers.LR,
        betas=model_peers.BETAS,
        eps=model_peers.EPS,
        weight_decay=model_peers.WD,
    )
    gm = GradManager().attach(net.parameters())
    if mesh is not None:
        dist.shard_module(net, mesh, {})
    step = ht.xla_trace(example.train_step)
    seq_np = example.sequences(np.random.default_rng(0), example.BATCH)
    seq = _place(dist, ht, seq_np, mesh, dist.P("data"))

    jax, replicated, split = _jax_shardings(devices)
    jstep = model_peers.jax_step(model_peers.transformer_loss(jax, jnp, example, heads=4))
    put = lambda tree: {k: jax.device_put(a, replicated) for k, a in tree.items()}  # noqa: E731
    zeros = {k: np.zeros_like(a) for k, a in params_np.items()}
    state = {"j": (put(params_np), {}, put(zeros), put(zeros), jax.device_put(np.float32(0.0), replicated))}
    jlr, jseq = jax.device_put(np.float32(model_peers.LR), replicated), jax.device_put(seq_np, split)

    def jax_call():
        loss, *rest = jstep(*state["j"][:5], jlr, jseq)
        state["j"] = tuple(rest)
        return loss.block_until_ready()

    def hlotrace_call():
        return _block(step(seq, net=net, opt=opt, gm=gm))

    return hlotrace_call, jax_call


def _check(title, hlotrace_call, jax_call) -> None:
    for i in range(3):  # the first hlotrace call records (eagerly) and compiles
        lh, lj = float(np.asarray(hlotrace_call())), float(np.asarray(jax_call()))
        if not np.isclose(lh, lj, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{title} step {i}: hlotrace loss {lh} vs jax {lj}")


def data_parallel(repeat: int) -> list[dict]:
    rows = []
    for title, make in (("MLP", _mlp_pair), ("transformer", _transformer_pair)):
        for n in COUNTS:
            hlotrace_call, jax_call = make(_devices(n))
            _check(f"{title} on {n} devices", hlotrace_call, jax_call)
            timings = compare(
                {"hlotrace": hlotrace_call, "jax": jax_call}, repeat=repeat, warmup=2, min_loop_seconds=LOOP_SECONDS
            )
            h, j = timings["hlotrace"], timings["jax"]
            rows.append(
                {
                    "model": title,
                    "devices": n,
                    "hlotrace_s": h.best,
                    "jax_s": j.best,
                    "ratio": h.best / j.best,
                    "paired": paired_ratio(h, j),
                    # What a step costs this process (XLA's threads included), blind to the
                    # other processes sharing the cores (see bench_train).
                    "cpu": bench_train._process_cpu_paired_ratio(hlotrace_call, jax_call, CPU_ROUNDS, number=4),
                }
            )
    return rows


def fsdp() -> list[dict]:
    import hlotrace as ht
    import hlotrace.distributed as dist
    from hlotrace.distributed.inspect import bytes_per_device

    plan = {"fc1.*": dist.P("data"), "fc2.*": dist.P("data"), "fc3.weight": dist.P(None, "data"), "fc3.bias": dist.P()}
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((bench_train.BATCH, bench_train.SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, bench_train.SIZES[-1], bench_train.BATCH).astype(np.int32)
    rows = []
    for n in COUNTS:
        mesh = _mesh(dist, _devices(n))
        net, opt, gm = bench_train._hlotrace_model()
        if mesh is not None:
            dist.shard_module(net, mesh, plan)
        step = ht.xla_trace(bench_train.train_step)
        x, y = _place(dist, ht, x_np, mesh, dist.P("data")), _place(dist, ht, y_np, mesh, dist.P("data"))
        step(x, y, net=net, opt=opt, gm=gm)
        step(x, y, net=net, opt=opt, gm=gm)
        tensors = opt._trace_state()[1]  # parameters, AdamW moments, step counts, hyper-parameters
        total = sum(t.numpy().nbytes for t in tensors)
        held = max(bytes_per_device(tensors).values())
        argument = step.memory_stats()["argument"]
        whole = total + x_np.nbytes + y_np.nbytes
        rows.append(
            {
                "devices": n,
                "total": total,
                "per_device": held,
                "ratio": held / (total / n),
                "argument": argument,
                "argument_ratio": argument / (whole / n),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header(
        f"SPMD on {', '.join(map(str, COUNTS))} CPU devices: data-parallel steps vs jax.jit, FSDP memory",
        "benchmarks.bench_spmd",
        argv,
    )
    rows = data_parallel(repeat)
    print_table(
        ["step", "devices", "hlotrace best", "jax.jit best", "ratio (best)", "ratio (paired median)", "process CPU"],
        [
            [
                r["model"],
                r["devices"],
                fmt_time(r["hlotrace_s"]),
                fmt_time(r["jax_s"]),
                fmt_ratio(r["ratio"]),
                fmt_ratio(r["paired"]),
                fmt_ratio(r["cpu"]),
            ]
            for r in rows
        ],
        title=f"data-parallel: {repeat} interleaved loops per candidate, same NamedShardings, same devices",
    )
    worst = max(r["ratio"] for r in rows)
    print(
        f"worst data-parallel ratio hlotrace/jax.jit (best) {fmt_ratio(worst)}; target <= {TARGET:g}: "
        f"{'met' if worst <= TARGET else 'NOT met'}\n"
    )
    memory = fsdp()
    print_table(
        ["devices", "params+opt total", "per device", "/ (total/N)", "XLA argument bytes per device", "/ (args/N)"],
        [
            [
                r["devices"],
                r["total"],
                r["per_device"],
                f"{r['ratio']:.3f}",
                r["argument"],
                f"{r['argument_ratio']:.3f}",
            ]
            for r in memory
        ],
        title="FSDP (MLP 64-512-512-10, AdamW): bytes each device holds",
    )
    worst_memory = max(r["ratio"] for r in memory)
    print(
        f"worst FSDP per-device / (total/N) {worst_memory:.3f}; target <= {FSDP_TARGET:g}: "
        f"{'met' if worst_memory <= FSDP_TARGET else 'NOT met'}"
    )
    return {
        "bench": "spmd",
        "data_parallel": rows,
        "fsdp": memory,
        "ratio": worst,
        "target": TARGET,
        "met": worst <= TARGET and worst_memory <= FSDP_TARGET,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
