"""Program A/B: bench_train's MLP step as hlotrace compiles it vs as jax.jit lowers it, every
program compiled by the same PJRT client and run the same way, no Python front end around it.

Separates "hlotrace's program is slower" from "hlotrace's per-call path is slower": each
candidate is a loaded executable run by ``execute_sharded`` on constant inputs, its donated
buffers fed back as the next call's inputs (as a training loop does), loops of 10 calls
interleaved. Candidates:

- hlotrace: the step's executable, outputs paired with donated buffers as jax.jit pairs them
  (each output in order takes the first unused donated input of its shape and dtype);
- hlotrace, own aliasing: the same step recorded with each updated state tensor aliased to
  its own new value (what hlotrace did before the seventh session);
- jax.jit: bench_train's jax step, lowered by jax and compiled by hlotrace's runtime.

Besides wall time per call it prints the process CPU time and voluntary context switches per
call (``getrusage``): the own-aliasing program's ~1.2x wall time came with ~2x the context
switches on 2 cores (BENCHMARKS.md, seventh session).

    .venv/bin/python -m benchmarks.program_ab [--repeat N]
"""

from __future__ import annotations

import re
import resource
import statistics
import sys
import time

import numpy as np

from benchmarks.common import fmt_ratio, int_option, main_args, print_header, print_table

REPEAT = 30
CALLS = 10
_SHAPE = re.compile(r"(f32|s32)\[([\d,]*)\]")


def _header(text: str) -> str:
    return text.split("\n", 1)[0]


def _input_arrays(hlo_text: str) -> list[np.ndarray]:
    """Constant inputs for every parameter of the compiled module: 0.01 (floats), 1 (ints)."""
    layout = _header(hlo_text).split("entry_computation_layout={(", 1)[1].split(")->", 1)[0]
    arrays = []
    for kind, dims in _SHAPE.findall(layout):
        shape = tuple(int(d) for d in dims.split(",") if d)
        arrays.append(np.full(shape, 0.01, np.float32) if kind == "f32" else np.ones(shape, np.int32))
    return arrays


def _aliases(hlo_text: str) -> dict[int, int]:
    """Output index -> the parameter whose buffer it reuses."""
    header = _header(hlo_text)
    return {int(o): int(p) for o, p in re.findall(r"\{(\d+)\}: \((\d+), \{\}", header)}


def _runner(loaded, device):
    """A call of ``loaded`` that feeds its aliased outputs back as the next call's inputs."""
    from hlotrace.runtime import jaxlib_compat

    text = jaxlib_compat.compiled_hlo_text(loaded)
    buffers = [jaxlib_compat.make_host_to_device(a.shape, a.dtype, device)(a) for a in _input_arrays(text)]
    aliases = _aliases(text)
    execute = loaded.execute_sharded

    def call():
        outs = [o[0] for o in execute(buffers).disassemble_into_single_device_arrays()]
        for o, p in aliases.items():
            buffers[p] = outs[o]
        outs[0].block_until_ready()

    return call


def _hlotrace_executable(own_aliasing: bool):
    import hlotrace as ht
    import hlotrace.traced as jit_module
    from benchmarks import bench_train
    from hlotrace.compiled import donation

    rng = np.random.default_rng(0)
    x = ht.tensor(rng.standard_normal((bench_train.BATCH, bench_train.SIZES[0])).astype(np.float32))
    y = ht.tensor(rng.integers(0, bench_train.SIZES[-1], bench_train.BATCH).astype(np.int32))
    net, opt, gm = bench_train._hlotrace_model()
    step = jit_module.xla_trace(bench_train.train_step)
    if own_aliasing:
        jit_module.donation = lambda *args, **kwargs: donation(*args, **{**kwargs, "pair_by_aval": False})
    try:
        for _ in range(2):
            step(x, y, net=net, opt=opt, gm=gm)
    finally:
        jit_module.donation = donation
    return step.executable, net


def _jax_executable(net, client, device):
    """bench_train's jax step, lowered by jax and compiled by ``client`` (hlotrace's)."""
    from benchmarks import bench_train
    from hlotrace.runtime import jaxlib_compat

    weights = [(layer.weight.numpy().copy(), layer.bias.numpy().copy()) for layer in (net.fc1, net.fc2, net.fc3)]
    state, hyper = bench_train._jax_state(weights, np.asarray)
    x = np.zeros((bench_train.BATCH, bench_train.SIZES[0]), np.float32)
    y = np.zeros(bench_train.BATCH, np.int32)
    text = bench_train._jax_step().lower(*state, hyper, x, y).as_text()
    return jaxlib_compat.compile_module(client, text, device)


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header("program A/B: bench_train's MLP step, executables alone", "benchmarks.program_ab", argv)
    ours, net = _hlotrace_executable(own_aliasing=False)
    own, _ = _hlotrace_executable(own_aliasing=True)
    device = ours.device  # hlotrace's client (its own CPU client when HLOTRACE_CPU_DEVICES asks for one)
    calls = {
        "hlotrace (jax.jit's pairing)": _runner(ours.loaded, device),
        "hlotrace (own aliasing)": _runner(own.loaded, device),
        "jax.jit's program": _runner(_jax_executable(net, ours.loaded.client, device), device),
    }
    for call in calls.values():
        for _ in range(5):
            call()
    wall = {name: [] for name in calls}
    cpu = {name: [] for name in calls}
    switches = {name: [] for name in calls}
    for r in range(repeat):
        names = list(calls) if r % 2 == 0 else list(reversed(calls))
        for name in names:
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(CALLS):
                calls[name]()
            wall[name].append((time.perf_counter() - start) / CALLS)
            after = resource.getrusage(resource.RUSAGE_SELF)
            used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            cpu[name].append(used / CALLS)
            switches[name].append((after.ru_nvcsw - before.ru_nvcsw) / CALLS)
    peer = min(wall["jax.jit's program"])
    rows = [
        [
            name,
            f"{min(wall[name]) * 1e3:.3f} ms",
            f"{statistics.median(wall[name]) * 1e3:.3f} ms",
            f"{statistics.median(cpu[name]) * 1e3:.3f} ms",
            f"{statistics.median(switches[name]):.1f}",
            fmt_ratio(min(wall[name]) / peer),
        ]
        for name in calls
    ]
    print_table(
        ["program", "best/call", "median/call", "process CPU/call", "vol. switches/call", "best / jax"],
        rows,
        title=f"{repeat} loops of {CALLS} calls per program, interleaved",
    )
    print()
    return {"bench": "program_ab", **{name: min(times) for name, times in wall.items()}}


if __name__ == "__main__":
    main()
    sys.exit(0)
