"""bench_models' ported PyTorch models (issue 36; examples/resnet.py, examples/gpt.py): each
built from its example's factory as a user would, hlotrace's compiled step vs a jax.jit peer
written from the same formulas (:mod:`benchmarks.model_peers`), checked for three steps first.

>>> for case in ported_cases(resnet_batch=8, resnet_width=16, gpt_layers=2):
...     compare_ported(*case[:9], repeat=5, twin=case.twin)
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from benchmarks.common import compare, fmt_ratio, fmt_time, print_table, verdict
from benchmarks.model_peers import (
    GPT_BETAS,
    GPT_LR,
    GPT_WD,
    SGD_LR,
    gpt_loss,
    gpt_update,
    load_example,
    ported_peer,
    resnet_loss,
    sgd_update,
)
from benchmarks.model_steps import LOOP_SECONDS, TARGET, pipeline_candidate, report_pipeline


class PortedCase(NamedTuple):
    """One ported model's step, its state and its jax.jit peer (a tuple, in this order)."""

    title: str
    step: object  # the example's train_step
    holder: str  # the keyword train_step takes the model by
    model: object
    opt: object
    batch: list  # host arrays, the step's positional arguments
    jax_call: object  # one jax.jit step; returns its loss without waiting
    jax_box: dict  # box["j"]: the peer's (params, buffers, optimizer state)
    lr: float
    twin: tuple  # (a second model with the same initial weights, its optimizer factory)


def compare_ported(title, step, holder, net, opt, batch_np, jax_call, box, lr, repeat, twin=None, pipeline=None):
    """hlotrace's compiled step vs its jax.jit peer: three checked steps, then timed. ``twin``:
    (a model with ``net``'s initial weights, its optimizer factory) for the ``pipeline`` candidate."""
    import hlotrace as ht
    from hlotrace.autodiff import GradManager

    gm = GradManager().attach(net.parameters())
    batch = [ht.tensor(a) for a in batch_np]
    extra = pipeline_candidate(step, twin[0], twin[1], holder, batch, pipeline) if twin else None
    # first_call="compiled": the first call runs XLA's program too (recorded from shapes), so both
    # sides' first calls time record/trace + compile + one step, and all three checked steps
    # compare two XLA programs (the default eager first call runs NumPy's convolutions).
    traced = ht.xla_trace(step, first_call="compiled")

    def hlotrace_call():
        return traced(*batch, **{holder: net, "opt": opt, "gm": gm})

    start = time.perf_counter()
    first = float(hlotrace_call())
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    first_jax = float(jax_call())
    first_jax_s = time.perf_counter() - start
    losses = [(first, first_jax)]
    for _ in range(2):
        losses.append((float(hlotrace_call()), float(jax_call())))
    if extra is not None:
        start = time.perf_counter()
        theirs = [float(extra[1]()) for _ in range(3)]
        print(f"{title}: {extra[0]}: first call {time.perf_counter() - start:.1f} s (3 steps)")
        if not np.allclose(theirs, [lh for lh, _ in losses], rtol=1e-3, atol=1e-5):  # as vs jax, below
            raise AssertionError(f"{title}: {extra[0]} losses {theirs} vs the default pipeline's {losses}")
    for i, (lh, lj) in enumerate(losses):
        # rtol 1e-3: at width 16 and more, XLA:CPU's ResNet-18 gradients (jax.jit's and
        # hlotrace's compiled alike) differ from a float64 reference by up to 12% of the
        # largest element in layer4's conv weights (the eager NumPy step: 1e-6), so the losses
        # of two XLA programs stay close while a NumPy trajectory would drift away.
        if not np.isclose(lh, lj, rtol=1e-3, atol=1e-5):
            raise AssertionError(f"{title} step {i}: hlotrace loss {lh} vs jax {lj}")
    for name, p in net.named_parameters():
        a, b = p.numpy(), np.asarray(box["j"][0][name])
        if not np.allclose(a, b, rtol=1e-3, atol=0.2 * lr):
            raise AssertionError(
                f"{title}: parameter {name} differs after 3 steps: max abs {np.max(np.abs(a - b)):.3g}"
            )
    for name, buf in net.named_buffers():
        # Loose as for the parameters: full-size ResNet-18's running means after 3 SGD steps at
        # lr 0.05 were 1.6e-4 apart (two XLA programs summing in different orders; 1e-6 at width
        # 8). A wrong formula (momentum convention, biased variance) is off by 1e-2 or more.
        a, b = buf.numpy(), np.asarray(box["j"][1][name])
        if not np.allclose(a, b, rtol=1e-3, atol=1e-3):
            raise AssertionError(f"{title}: buffer {name} differs after 3 steps: max abs {np.max(np.abs(a - b)):.3g}")
    print(
        f"{title}: hlotrace compiled and the jax.jit peer agree for 3 steps (losses {losses[0][0]:.4f} -> "
        f"{losses[-1][0]:.4f}, parameters, buffers); first call (record + compile + step) {first_s:.1f} s, "
        f"jax.jit's (trace + compile + step) {first_jax_s:.1f} s"
    )
    names = ("hlotrace compiled (xla_trace)", "jax.jit (donated)")
    candidates = {
        names[0]: lambda: hlotrace_call().block_until_ready(),
        names[1]: lambda: jax_call().block_until_ready(),
    }
    if extra is not None:
        candidates[extra[0]] = lambda: extra[1]().block_until_ready()
    timings = compare(
        candidates,
        repeat=repeat,
        warmup=1,
        min_loop_seconds=LOOP_SECONDS,
    )
    compiled, peer = (timings[k] for k in names)
    print_table(
        ["candidate", "best/call", "median/call", "calls/loop"],
        [[t.name, fmt_time(t.best), fmt_time(t.median), t.number] for t in timings.values()],
        title=f"{title}: {repeat} loops per candidate (interleaved), every call blocks on its loss",
    )
    ratio = compiled.best / peer.best
    print(f"{title} step ratio hlotrace/jax (best) {fmt_ratio(ratio)}; {verdict(ratio, TARGET)}\n")
    report_pipeline(title, timings, extra, compiled, peer)
    return {"hlotrace_s": compiled.best, "jax_s": peer.best, "ratio": ratio, "first_call_s": first_s}


def resnet_case(batch: int = 32, width: int = 64, rng=None) -> PortedCase:
    """torchvision's ResNet-18, CIFAR-shaped (3x32x32, 3x3 stem, no max pool), ``width``
    channels in the first stage, ``batch`` images from ``rng`` (default: seed 0), SGD."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    import hlotrace as ht

    resnet = load_example("resnet")
    rng = np.random.default_rng(0) if rng is None else rng
    ht.random.seed(0)
    net = resnet.resnet18(num_classes=10, cifar=True, width=width)
    opt = resnet.make_optimizer(net, SGD_LR)
    twin = resnet.resnet18(num_classes=10, cifar=True, width=width)
    twin.load_state_dict(net.state_dict())
    images = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, batch).astype(np.int32)
    params = {k: p.numpy().copy() for k, p in net.named_parameters()}
    buffers = {k: b.numpy().copy() for k, b in net.named_buffers()}
    zeros = {k: np.zeros_like(a) for k, a in params.items()}
    call, box = ported_peer(
        jax, resnet_loss(jax, jnp, lax, net), sgd_update, params, buffers, zeros, SGD_LR, [images, labels]
    )
    title = f"ResNet-18 (width {width}, 3x32x32, batch {batch})"
    twin_case = (twin, lambda model: resnet.make_optimizer(model, SGD_LR))
    return PortedCase(title, resnet.train_step, "net", net, opt, [images, labels], call, box, SGD_LR, twin_case)


def gpt_case(layers: int = 4, rng=None) -> PortedCase:
    """nanoGPT's decoder, ``layers`` layers, n_embd 128, 4 heads, on 16 copy-task sequences of
    32 tokens from ``rng`` (default: seed 0); clip_grad_norm_ + AdamW with decay groups."""
    import jax
    import jax.numpy as jnp

    import hlotrace as ht

    gpt = load_example("gpt")
    rng = np.random.default_rng(0) if rng is None else rng
    k = 16

    def build():
        return gpt.gpt(n_layer=layers, n_embd=128, n_head=4, block_size=2 * k + 1, vocab_size=gpt.VOCAB)

    def make_opt(model):
        return model.configure_optimizers(weight_decay=GPT_WD, learning_rate=GPT_LR, betas=GPT_BETAS, device_type="cpu")

    ht.random.seed(0)
    model = build()
    twin = build()
    twin.load_state_dict(model.state_dict())
    x, y = gpt.batch(rng, 16, k)
    params = {name: p.numpy().copy() for name, p in model.named_parameters()}
    buffers = {name: b.numpy().copy() for name, b in model.named_buffers()}
    decayed = {name for name, a in params.items() if a.ndim >= 2}
    zeros = {name: np.zeros_like(a) for name, a in params.items()}
    state = (zeros, dict(zeros), {name: np.float32(0.0) for name in params})
    call, box = ported_peer(
        jax, gpt_loss(jax, jnp, model.config), gpt_update(decayed), params, buffers, state, GPT_LR, [x, y]
    )
    title = f"GPT ({layers} layers, n_embd 128, 4 heads, batch 16 x {2 * k} tokens)"
    return PortedCase(
        title, gpt.train_step, "model", model, make_opt(model), [x, y], call, box, GPT_LR, (twin, make_opt)
    )


def ported_cases(resnet_batch: int = 32, resnet_width: int = 64, gpt_layers: int = 4) -> list[PortedCase]:
    """ResNet-18 and the GPT (:func:`resnet_case`, :func:`gpt_case`), their batches drawn in
    turn from one generator (seed 0)."""
    rng = np.random.default_rng(0)
    resnet = resnet_case(resnet_batch, resnet_width, rng)
    return [resnet, gpt_case(gpt_layers, rng)]
