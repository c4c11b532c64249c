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
    .venv/bin/python -m benchmarks.bench_eager --resnet [--resnet-batch 32] [--resnet-width 64]
        [--numpy-steps 1] [--numpy-first-call]
    .venv/bin/python -m benchmarks.bench_eager --gpt [--gpt-layers 6] [--gpt-embd 384]
        [--gpt-tokens 128] [--gpt-batch 8] [--numpy-first-call]

3. ``--resnet``: examples/resnet.py's ResNet-18 (CIFAR stem, batch 32, SGD momentum), the
   issue's model: eager steps under the device and NumPy engines vs jax op by op (first and
   steady; with HLOTRACE_TIERED_COMPILE=1 the device engine's first step runs quick -O0
   executables and its second waits for their optimized versions; ``settle()`` then waits for
   what is left before the steady steps are timed), and the first call of its ``xla_trace`` step (eager on the device, or
   ``first_call="compiled"``; eager on NumPy with ``--numpy-first-call``) vs ``jax.jit``'s.
4. ``--gpt``: the same for examples/gpt.py's decoder at the issue's size (6 layers, d 384,
   128 tokens, batch 8; clip_grad_norm_ + AdamW with decay groups).
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

    from benchmarks.model_peers import adamw

    def step(params, buffers, m, v, t, lr, *batch):
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, m, v, t = adamw(jnp, params, grads, m, v, t, lr)
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


def _jax_step(loss_fn, update):
    """bench_models' ported jax peer step (``update``: its SGD or clip + AdamW), not jitted."""
    import jax

    def step(params, buffers, state, lr, *batch):
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, state = update(jax.numpy, params, grads, state, lr)
        return loss, params, {**buffers, **new_buffers}, state

    return step


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _resnet_case(argv):
    """(title, example, holder, make(), batch arrays, jax peer(net) -> (step, state, lr))."""
    import jax

    import hlotrace as ht
    from benchmarks.model_peers import SGD_LR, load_example, resnet_loss, sgd_update

    batch_size = int_option(argv, "--resnet-batch", 32)
    width = int_option(argv, "--resnet-width", 64)
    example = load_example("resnet")
    rng = np.random.default_rng(0)
    batch = [rng.standard_normal((batch_size, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, batch_size)]
    batch[1] = batch[1].astype(np.int32)

    def make():
        ht.random.seed(0)
        net = example.resnet18(num_classes=10, cifar=True, width=width)
        return net, example.make_optimizer(net, lr=SGD_LR)

    def peer(net):
        state = {k: np.zeros(p.shape, np.float32) for k, p in net.named_parameters()}
        return _jax_step(resnet_loss(jax, jax.numpy, jax.lax, net), sgd_update), state, SGD_LR

    title = f"ResNet-18 (CIFAR stem, width {width}, batch {batch_size}, SGD momentum)"
    return title, example, "net", make, batch, peer


def _gpt_case(argv):
    """The issue's GPT-style decoder: examples/gpt.py, 6 layers, d 384, 6 heads, 128 tokens,
    batch 8, clip_grad_norm_ + AdamW with decay groups."""
    import jax

    import hlotrace as ht
    from benchmarks.model_peers import GPT_BETAS, GPT_LR, GPT_WD, gpt_loss, gpt_update, load_example

    layers = int_option(argv, "--gpt-layers", 6)
    embd = int_option(argv, "--gpt-embd", 384)
    tokens = int_option(argv, "--gpt-tokens", 128)
    batch_size = int_option(argv, "--gpt-batch", 8)
    example = load_example("gpt")
    k = tokens // 2
    batch = list(example.batch(np.random.default_rng(0), batch_size, k))

    def make():
        ht.random.seed(0)
        model = example.gpt(n_layer=layers, n_embd=embd, n_head=6, block_size=2 * k + 1, vocab_size=example.VOCAB)
        return model, model.configure_optimizers(
            weight_decay=GPT_WD, learning_rate=GPT_LR, betas=GPT_BETAS, device_type="cpu"
        )

    def peer(model):
        shapes = {name: p.shape for name, p in model.named_parameters()}
        decayed = {name for name, shape in shapes.items() if len(shape) >= 2}
        zeros = {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}
        state = (zeros, dict(zeros), {name: np.float32(0.0) for name in shapes})
        return _jax_step(gpt_loss(jax, jax.numpy, model.config), gpt_update(decayed)), state, GPT_LR

    title = f"GPT decoder ({layers} layers, d {embd}, 6 heads, {2 * k} tokens, batch {batch_size}, AdamW)"
    return title, example, "model", make, batch, peer


def ported_eager(case, argv: list[str], repeat: int) -> dict:
    """One ported model: eager steps under each engine vs jax op by op, and the first call of
    its xla_trace step vs jax.jit's. Every candidate compiles from nothing: the persistent
    cache off, in-process caches cleared, a new device engine, ``jax.clear_caches()``."""
    import jax

    import hlotrace as ht
    from hlotrace import engines, runtime
    from hlotrace.autodiff import GradManager
    from hlotrace.engines.device import DeviceEngine
    from hlotrace.jit import xla_trace
    from hlotrace.runtime import cache

    title, example, holder, make, batch_np, peer = case
    numpy_steps = int_option(argv, "--numpy-steps", 1)
    cache.set_directory("off")
    batch = [ht.tensor(a) for a in batch_np]

    def fresh_engine():  # a new device engine and empty in-process caches: every op compiles
        runtime.compiler.EXECUTABLES.clear()
        engines._device_engines[None] = DeviceEngine()

    def eager_steps(engine_name: str, count: int) -> list[float]:
        net, opt = make()
        gm = GradManager().attach(net.parameters())
        if engine_name == "device":
            fresh_engine()
        times = []
        with ht.eager_engine(engine_name):
            for i in range(count):
                times.append(_timed(lambda: example.train_step(*batch, **{holder: net}, opt=opt, gm=gm).numpy()))
                if engine_name == "device" and i == 1:  # the optimized executables, compiled meanwhile
                    times.append(_timed(engines.device_engine().settle))
        return times

    def jax_steps(count: int, jit: bool) -> list[float]:
        net, _ = make()
        device = jax.devices()[0]
        step, state, lr = peer(net)
        params = {k: p.numpy() for k, p in net.named_parameters()}
        buffers = {k: b.numpy() for k, b in net.named_buffers()}
        step = jax.jit(step, donate_argnums=(0, 1, 2)) if jit else step
        box = {"j": jax.device_put((params, buffers, state), device)}
        jlr = jax.device_put(np.float32(lr), device)
        jbatch = [jax.device_put(a, device) for a in batch_np]
        jax.clear_caches()

        def call():
            loss, *rest = step(*box["j"], jlr, *jbatch)
            box["j"] = tuple(rest)
            loss.block_until_ready()

        return [_timed(call) for _ in range(count)]

    def first_call(engine_name: str, mode: str) -> float:
        net, opt = make()
        gm = GradManager().attach(net.parameters())
        if engine_name == "device":
            fresh_engine()
        runtime.compiler.EXECUTABLES.clear()
        traced = xla_trace(example.train_step, first_call=mode)
        with ht.eager_engine(engine_name):
            return _timed(lambda: traced(*batch, **{holder: net}, opt=opt, gm=gm).numpy())

    steady = max(repeat, 3)
    device = eager_steps("device", 2 + steady)  # first, second, settle, steady
    jax_eager = jax_steps(1 + steady, jit=False)
    numpy_ = eager_steps("numpy", numpy_steps)
    e = {
        "device_first": device[0],
        "device_second": device[1],
        "device_settle": device[2],
        "device_step": min(device[3:]),
        "jax_first": jax_eager[0],
        "jax_step": min(jax_eager[1:]),
        "numpy_step": min(numpy_),
    }
    rows = [
        ["eager step: device engine", fmt_time(e["device_first"]), fmt_time(e["device_step"])],
        ["  its second step", fmt_time(e["device_second"]), "-"],
        ["  then settle() (tiered: optimized executables left)", fmt_time(e["device_settle"]), "-"],
        ["eager step: jax op by op (no jit)", fmt_time(e["jax_first"]), fmt_time(e["jax_step"])],
        ["eager step: NumPy engine", "-", fmt_time(e["numpy_step"])],
    ]
    firsts = {
        'xla_trace first call, first_call="eager", device engine': first_call("device", "eager"),
        'xla_trace first call, first_call="compiled"': first_call("device", "compiled"),
        "jax.jit first call (trace + compile + run)": jax_steps(1, jit=True)[0],
    }
    if "--numpy-first-call" in argv:
        firsts['xla_trace first call, first_call="eager", NumPy engine'] = first_call("numpy", "eager")
    rows += [[name, fmt_time(seconds), "-"] for name, seconds in firsts.items()]
    print_table(["candidate", "first", "steady (best)"], rows, title=f"{title}: eager steps and first calls")
    jit_first = firsts["jax.jit first call (trace + compile + run)"]
    print(
        f"{title.split(' (')[0]} eager: device engine {fmt_ratio(e['numpy_step'] / e['device_step'])} faster than the "
        f"NumPy engine (target >= 20x); device / jax op-by-op {fmt_ratio(e['device_step'] / e['jax_step'])} "
        f"({verdict(e['device_step'] / e['jax_step'], 1.3)}); first step / jax's "
        f"{fmt_ratio(e['device_first'] / e['jax_first'])} ({verdict(e['device_first'] / e['jax_first'], 1.0)})"
    )
    for name, seconds in firsts.items():
        if name.startswith("xla_trace"):
            print(f"{name} / jax.jit's: {fmt_ratio(seconds / jit_first)} ({verdict(seconds / jit_first, 1.5)})")
    print()
    return {"eager": e, "first_calls": firsts}


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header("eager engines: NumPy vs device vs jax op-by-op", "benchmarks.bench_eager", argv)
    results = {"one_op": one_op(repeat)}
    if "--models" in argv:
        results["models"] = model_steps(repeat)
    if "--resnet" in argv:
        results["resnet"] = ported_eager(_resnet_case(argv), argv, repeat)
    if "--gpt" in argv:
        results["gpt"] = ported_eager(_gpt_case(argv), argv, repeat)
    return results


if __name__ == "__main__":
    main()
