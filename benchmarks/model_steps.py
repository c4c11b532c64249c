"""bench_models' first two cases: the examples' CNN and transformer training steps (AdamW),
hlotrace compiled vs two jax.jit peers (one AdamW step count for all parameters, one per
parameter) vs hlotrace eager, and the shared ``--passes`` candidate.

>>> for case in model_cases():
...     compare_steps(*case, repeat=7)
"""

from __future__ import annotations

import numpy as np

from benchmarks.common import compare, fmt_ratio, fmt_time, print_table, verdict
from benchmarks.model_peers import BETAS, EPS, LR, WD, cnn_loss, jax_step, load_example, transformer_loss

TARGET = 1.1
LOOP_SECONDS = 0.25


def setup_pair(title, example, net, batch_np, loss_fn):
    """hlotrace's compiled step and two jax.jit peers on the same weights (one AdamW step count
    for all parameters, and one per parameter), checked against each other for three steps.
    Returns (hlotrace call, jax call, hlotrace's batch, per-parameter jax call); each call
    returns its loss without waiting for it."""
    import jax

    import hlotrace as ht
    from hlotrace import optim
    from hlotrace.autodiff import GradManager

    params = {name: p.numpy().copy() for name, p in net.named_parameters()}
    buffers = {name: b.numpy().copy() for name, b in net.named_buffers()}
    opt = optim.AdamW(net.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    gm = GradManager().attach(net.parameters())
    step = ht.xla_trace(example.train_step)
    batch = [ht.tensor(a) for a in batch_np]

    def hlotrace_call():
        return step(*batch, net=net, opt=opt, gm=gm)

    peers = [jax_peer(jax, loss_fn, params, buffers, batch_np, per_parameter) for per_parameter in (False, True)]
    for i in range(3):
        lh = float(hlotrace_call())
        for call, _ in peers:
            lj = float(call())
            if not np.isclose(lh, lj, rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{title} step {i}: hlotrace loss {lh} vs jax {lj}")
    for _, state in peers:
        for name, p in net.named_parameters():
            a, b = p.numpy(), np.asarray(state["j"][0][name])
            # atol 0.2 * lr: Adam turns gradients that are zero up to rounding (the attention
            # key bias: softmax ignores a per-query constant) into lr-sized steps of either sign.
            if not np.allclose(a, b, rtol=1e-3, atol=0.2 * LR):
                raise AssertionError(
                    f"{title}: parameter {name} differs after 3 steps: max abs {np.max(np.abs(a - b)):.3g}"
                )
        for name, buf in net.named_buffers():
            if not np.allclose(buf.numpy(), np.asarray(state["j"][1][name]), rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{title}: buffer {name} differs after 3 steps")
    print(f"{title}: hlotrace compiled and both jax.jit peers agree for 3 steps (losses, parameters, buffers)")
    return hlotrace_call, peers[0][0], batch, peers[1][0]


def jax_peer(jax, loss_fn, params, buffers, batch_np, per_parameter: bool):
    """(call, state) of a jitted jax step from ``params``; ``per_parameter``: one AdamW step
    count per parameter, as hlotrace (and PyTorch) keep, instead of one for all. ``call()``
    runs one step and returns its loss without waiting; ``state["j"]`` is then
    (params, buffers, m, v, t)."""
    device = jax.devices()[0]
    jstep = jax_step(loss_fn)
    put = lambda tree: {k: jax.device_put(a, device) for k, a in tree.items()}  # noqa: E731
    zeros = lambda tree: {k: jax.numpy.zeros_like(a) for k, a in tree.items()}  # noqa: E731
    jparams = put(params)
    t = put({k: np.float32(0.0) for k in params}) if per_parameter else jax.device_put(np.float32(0.0), device)
    state = {"j": (jparams, put(buffers), zeros(jparams), zeros(jparams), t)}
    jlr = jax.device_put(np.float32(LR), device)
    jbatch = [jax.device_put(a, device) for a in batch_np]

    def call():
        loss, *rest = jstep(*state["j"][:5], jlr, *jbatch)
        state["j"] = tuple(rest)
        return loss

    return call, state


def pipeline_candidate(step, net, make_opt, holder, batch, pipeline):
    """(name, call) of ``step`` compiled with the passes ``pipeline`` on ``net`` (a twin with
    the initial weights), or None without a pipeline."""
    if pipeline is None:
        return None
    import hlotrace as ht
    from hlotrace.autodiff import GradManager

    opt, gm = make_opt(net), GradManager().attach(net.parameters())
    traced = ht.xla_trace(step, passes=pipeline, first_call="compiled")
    return f"hlotrace compiled, passes={pipeline}", lambda: traced(*batch, **{holder: net, "opt": opt, "gm": gm})


def report_pipeline(title, timings, extra, compiled, peer) -> None:
    """The ``--passes`` candidate's ratios to the default pipeline and to jax.jit."""
    if extra is not None:
        best = timings[extra[0]].best
        print(
            f"{title}: {extra[0]} / default pipeline (best) {fmt_ratio(best / compiled.best)}; "
            f"/ jax.jit {fmt_ratio(best / peer.best)}\n"
        )


def compare_steps(title, example, net, batch_np, loss_fn, repeat, pipeline=None):
    """One model's table: hlotrace compiled, both jax.jit peers, hlotrace eager (and the
    ``pipeline`` candidate), timed interleaved after :func:`setup_pair`'s checks."""
    import hlotrace as ht
    from hlotrace import optim
    from hlotrace.autodiff import GradManager

    make_opt = lambda n: optim.AdamW(n.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)  # noqa: E731
    batch_tensors = [ht.tensor(a) for a in batch_np]
    extra = pipeline_candidate(example.train_step, example_net_copy(net), make_opt, "net", batch_tensors, pipeline)
    hlotrace_call, jax_call, batch, per_parameter_call = setup_pair(title, example, net, batch_np, loss_fn)
    if extra is not None:
        print(f"{title}: {extra[0]}: losses {[round(float(extra[1]()), 4) for _ in range(3)]} (first 3 steps)")
    eager_net = example_net_copy(net)
    eager_opt = make_opt(eager_net)
    eager_gm = GradManager().attach(eager_net.parameters())
    names = (
        "hlotrace compiled (xla_trace)",
        "jax.jit (donated)",
        "hlotrace eager",
        "jax.jit, a step count per parameter",
    )
    candidates = {
        names[0]: lambda: hlotrace_call().block_until_ready(),
        names[1]: lambda: jax_call().block_until_ready(),
        names[2]: lambda: example.train_step(*batch, net=eager_net, opt=eager_opt, gm=eager_gm).numpy(),
        names[3]: lambda: per_parameter_call().block_until_ready(),
    }
    if extra is not None:
        candidates[extra[0]] = lambda: extra[1]().block_until_ready()
    timings = compare(candidates, repeat=repeat, warmup=2, min_loop_seconds=LOOP_SECONDS)
    compiled, peer, eager, per_parameter = (timings[k] for k in names)
    print_table(
        ["candidate", "best/call", "median/call", "calls/loop"],
        [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
        title=f"{title}: {repeat} loops per candidate (interleaved), every call blocks on its loss",
    )
    ratio, eager_ratio = compiled.best / peer.best, eager.best / compiled.best
    same_math = compiled.best / per_parameter.best
    print(
        f"{title} step ratio hlotrace/jax (best) {fmt_ratio(ratio)}; {verdict(ratio, TARGET)}; "
        f"eager/compiled {fmt_ratio(eager_ratio)}; hlotrace / jax with a step count per parameter "
        f"{fmt_ratio(same_math)}\n"
    )
    report_pipeline(title, timings, extra, compiled, peer)
    return {
        "hlotrace_s": compiled.best,
        "jax_s": peer.best,
        "eager_s": eager.best,
        "jax_per_parameter_s": per_parameter.best,
        "ratio": ratio,
    }


def example_net_copy(net):
    """A second model with the same weights (the eager candidate must not share state)."""
    twin = type(net)()
    twin.load_state_dict(net.state_dict())
    return twin


def cnn_case(rng=None) -> tuple:
    """(title, example module, model, batch arrays, jax loss) of examples/train_cnn.py's step
    on a batch of 64 1x8x8 images drawn from ``rng`` (default: seed 0)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from hlotrace import nn

    rng = np.random.default_rng(0) if rng is None else rng
    cnn = load_example("train_cnn")
    nn.init.seed(0)
    images = rng.random((cnn.BATCH, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, cnn.BATCH).astype(np.int32)
    return ("CNN", cnn, cnn.ConvNet(), [images, labels], cnn_loss(jax, jnp, lax))


def transformer_case(rng) -> tuple:
    """(title, example module, model, batch arrays, jax loss) of examples/train_transformer.py,
    its sequences drawn from ``rng``."""
    import jax
    import jax.numpy as jnp

    from hlotrace import nn

    lm = load_example("train_transformer")
    nn.init.seed(0)
    net = lm.CopyLM()
    return ("transformer", lm, net, [lm.sequences(rng, lm.BATCH)], transformer_loss(jax, jnp, lm, heads=4))


def model_cases() -> list[tuple]:
    """(title, example module, model, batch arrays, jax loss) of the CNN and the transformer,
    their batches drawn in turn from one generator (seed 0)."""
    rng = np.random.default_rng(0)
    cnn = cnn_case(rng)
    return [cnn, transformer_case(rng)]
