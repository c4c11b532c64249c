"""Model training steps: the examples' CNN and transformer steps, hlotrace compiled vs the
same math in jax.jit vs hlotrace eager.

- CNN: examples/train_cnn.py's ConvNet (conv3x3 BN ReLU maxpool ×2, linear) on a batch of
  64 1×8×8 images, cross-entropy, backward, AdamW, batch-norm running statistics updated.
- transformer: examples/train_transformer.py's 2-layer causal LM (d=64, 4 heads, GELU MLP)
  on a batch of 32 sequences of 17 tokens, cross-entropy over the copy half, AdamW.

The jax peers are written in jax.numpy/lax from the same formulas (PyTorch's AdamW, biased
batch variance for normalization and the unbiased one for the running statistics with
MegEngine's momentum 0.9, exact GELU), jitted with parameters, optimizer state and buffers
donated and the learning rate as an argument. Both start from the hlotrace model's initial
weights and are checked against each other for three steps before timing.

Issue target: compiled / jax.jit <= 1.1 for both steps.

    .venv/bin/python -m benchmarks.bench_models [--repeat N]
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

from benchmarks.common import compare, fmt_ratio, fmt_time, int_option, main_args, print_header, print_table, verdict

TARGET = 1.1
REPEAT = 7
LOOP_SECONDS = 0.25
LR, BETAS, EPS, WD = 3e-3, (0.9, 0.999), 1e-8, 1e-2
BN_EPS, BN_MOMENTUM = 1e-5, 0.9
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- jax peers ----------------------------------------------------------------------------


def _adamw(jnp, params, grads, m, v, t, lr):
    """PyTorch's AdamW on dicts of arrays (the formula hlotrace.optim.AdamW documents). ``t``:
    one step count for all parameters, or a dict of one per parameter (PyTorch's and
    hlotrace's bookkeeping: each a scalar state tensor the step reads and writes)."""
    b1, b2 = BETAS
    t = {k: s + 1.0 for k, s in t.items()} if isinstance(t, dict) else t + 1.0
    new_p, new_m, new_v = {}, {}, {}
    for k, p in params.items():
        g, tk = grads[k], t[k] if isinstance(t, dict) else t
        p = p * (1 - lr * WD)
        new_m[k] = b1 * m[k] + (1 - b1) * g
        new_v[k] = b2 * v[k] + (1 - b2) * g * g
        new_p[k] = p - lr * (new_m[k] / (1 - b1**tk)) / (jnp.sqrt(new_v[k] / (1 - b2**tk)) + EPS)
    return new_p, new_m, new_v, t


def _cross_entropy(jax, jnp, logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def _cnn_loss(jax, jnp, lax):
    def conv(x, p, name):
        y = lax.conv_general_dilated(
            x, p[f"{name}.weight"], (1, 1), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return y  # no bias: batch norm follows

    def bn(x, p, buffers, name):
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        n = x.size // x.shape[1]
        y = (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + BN_EPS)
        y = y * p[f"{name}.weight"][None, :, None, None] + p[f"{name}.bias"][None, :, None, None]
        rm, rv = buffers[f"{name}.running_mean"], buffers[f"{name}.running_var"]
        updated = {
            f"{name}.running_mean": BN_MOMENTUM * rm + (1 - BN_MOMENTUM) * mean,
            f"{name}.running_var": BN_MOMENTUM * rv + (1 - BN_MOMENTUM) * var * n / (n - 1),
        }
        return y, updated

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss(p, buffers, x, y):
        h, b1 = bn(conv(x, p, "conv1"), p, buffers, "bn1")
        h = pool(jnp.maximum(h, 0.0))
        h, b2 = bn(conv(h, p, "conv2"), p, buffers, "bn2")
        h = pool(jnp.maximum(h, 0.0)).reshape(x.shape[0], -1)
        logits = h @ p["fc.weight"].T + p["fc.bias"]
        return _cross_entropy(jax, jnp, logits, y), {**b1, **b2}

    return loss


def _transformer_loss(jax, jnp, example, heads):
    k = example.K

    def layer_norm(x, p, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[f"{name}.weight"] + p[f"{name}.bias"]

    def linear(x, p, name):
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def attention(x, p, name):
        n, length, dim = x.shape
        qkv = x @ p[f"{name}.in_proj_weight"].T + p[f"{name}.in_proj_bias"]
        q, kk, v = (
            qkv[..., i * dim : (i + 1) * dim].reshape(n, length, heads, dim // heads).transpose(0, 2, 1, 3)
            for i in range(3)
        )
        scores = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(dim // heads)
        scores = jnp.where(jnp.tril(jnp.ones((length, length), bool)), scores, -jnp.inf)
        out = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(n, length, dim)
        return linear(out, p, f"{name}.out_proj")

    def loss(p, buffers, seq):
        tokens, targets = seq[:, :-1], seq[:, 1:]
        x = p["tokens.weight"][tokens] + p["positions"]
        for i in range(2):
            b = f"blocks.{i}"
            x = x + attention(layer_norm(x, p, f"{b}.ln1"), p, f"{b}.attn")
            h = jax.nn.gelu(linear(layer_norm(x, p, f"{b}.ln2"), p, f"{b}.fc1"), approximate=False)
            x = x + linear(h, p, f"{b}.fc2")
        logits = linear(layer_norm(x, p, "ln"), p, "head")
        return _cross_entropy(jax, jnp, logits[:, k + 1 :], targets[:, k + 1 :]), {}

    return loss


def _jax_step(loss_fn):
    import jax
    import jax.numpy as jnp

    def step(params, buffers, m, v, t, lr, *batch):
        # Full float32 convolutions and matmuls, as hlotrace asks for (jax's GPU default is TF32).
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, m, v, t = _adamw(jnp, params, grads, m, v, t, lr)
        return loss, params, {**buffers, **new_buffers}, m, v, t

    return jax.jit(step, donate_argnums=(0, 1, 2, 3, 4))


# -- one model's comparison ---------------------------------------------------------------


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

    peers = [_jax_peer(jax, loss_fn, params, buffers, batch_np, per_parameter) for per_parameter in (False, True)]
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


def _jax_peer(jax, loss_fn, params, buffers, batch_np, per_parameter: bool):
    """(call, state) of a jitted jax step from ``params``; ``per_parameter``: one AdamW step
    count per parameter, as hlotrace (and PyTorch) keep, instead of one for all."""
    device = jax.devices()[0]
    jstep = _jax_step(loss_fn)
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


def _compare(title, example, net, batch_np, loss_fn, repeat):
    from hlotrace import optim
    from hlotrace.autodiff import GradManager

    hlotrace_call, jax_call, batch, per_parameter_call = setup_pair(title, example, net, batch_np, loss_fn)
    eager_net = example_net_copy(net)
    eager_opt = optim.AdamW(eager_net.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    eager_gm = GradManager().attach(eager_net.parameters())
    names = (
        "hlotrace compiled (xla_trace)",
        "jax.jit (donated)",
        "hlotrace eager",
        "jax.jit, a step count per parameter",
    )
    timings = compare(
        {
            names[0]: lambda: hlotrace_call().block_until_ready(),
            names[1]: lambda: jax_call().block_until_ready(),
            names[2]: lambda: example.train_step(*batch, net=eager_net, opt=eager_opt, gm=eager_gm).numpy(),
            names[3]: lambda: per_parameter_call().block_until_ready(),
        },
        repeat=repeat,
        warmup=2,
        min_loop_seconds=LOOP_SECONDS,
    )
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


def model_cases() -> list[tuple]:
    """(title, example module, model, batch arrays, jax loss) of the CNN and the transformer."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from hlotrace import nn

    rng = np.random.default_rng(0)
    cnn = load_example("train_cnn")
    nn.init.seed(0)
    images = rng.random((cnn.BATCH, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, cnn.BATCH).astype(np.int32)
    cases = [("CNN", cnn, cnn.ConvNet(), [images, labels], _cnn_loss(jax, jnp, lax))]
    lm = load_example("train_transformer")
    nn.init.seed(0)
    net = lm.CopyLM()
    cases.append(("transformer", lm, net, [lm.sequences(rng, lm.BATCH)], _transformer_loss(jax, jnp, lm, heads=4)))
    return cases


def main(argv: list[str] | None = None) -> dict:
    argv = main_args(argv)
    repeat = int_option(argv, "--repeat", REPEAT)
    print_header(
        "model training steps: CNN (digits) and causal transformer (copy task), AdamW", "benchmarks.bench_models", argv
    )
    (cnn, lm) = model_cases()
    r_cnn = _compare(*cnn, repeat)
    r_lm = _compare(*lm, repeat)
    worst = max(r_cnn["ratio"], r_lm["ratio"])
    return {
        "bench": "models",
        "cnn": r_cnn,
        "transformer": r_lm,
        "hlotrace_s": r_cnn["hlotrace_s"],
        "jax_s": r_cnn["jax_s"],
        "ratio": worst,
        "target": TARGET,
        "met": worst <= TARGET,
    }


if __name__ == "__main__":
    main()
    sys.exit(0)
