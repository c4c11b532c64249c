"""The jax.jit peer of bench_depth: the same causal-LM training step (pre-norm blocks of
causal attention and a GELU MLP, cross-entropy over the copy half, backward, AdamW) at the
same sizes, its blocks as one ``lax.scan`` over stacked parameters or as a Python loop.

Only the time to trace, lower and compile is measured (``jax.jit(...).lower(...).compile()``,
jax's caches cleared first): it tells how much of a scanned step's compile time is XLA's
own, whichever front end emits the loop.
"""

from __future__ import annotations

import time

import numpy as np


def _step(jax, jnp, lm, layers: int, dim: int, heads: int, scanned: bool):
    head_dim, length = dim // heads, lm.LENGTH - 1

    def layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * w + b

    def block(x, p):
        n = x.shape[0]
        qkv = layer_norm(x, p["ln1.weight"], p["ln1.bias"]) @ p["attn.in_proj_weight"].T + p["attn.in_proj_bias"]
        q, k, v = (
            qkv[..., i * dim : (i + 1) * dim].reshape(n, length, heads, head_dim).transpose(0, 2, 1, 3)
            for i in range(3)
        )
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        scores = jnp.where(jnp.tril(jnp.ones((length, length), bool)), scores, -jnp.inf)
        out = (jax.nn.softmax(scores, -1) @ v).transpose(0, 2, 1, 3).reshape(n, length, dim)
        x = x + out @ p["attn.out_proj.weight"].T + p["attn.out_proj.bias"]
        h = layer_norm(x, p["ln2.weight"], p["ln2.bias"]) @ p["fc1.weight"].T + p["fc1.bias"]
        return x + jax.nn.gelu(h, approximate=False) @ p["fc2.weight"].T + p["fc2.bias"]

    def loss(params, seq):
        x = params["tokens.weight"][seq[:, :-1]] + params["positions"]
        if scanned:
            x, _ = jax.lax.scan(lambda c, p: (block(c, p), None), x, params["blocks"])
        else:
            for i in range(layers):
                x = block(x, jax.tree.map(lambda a, i=i: a[i], params["blocks"]))
        logits = layer_norm(x, params["ln.weight"], params["ln.bias"]) @ params["head.weight"].T + params["head.bias"]
        logp = jax.nn.log_softmax(lm.copy_half(logits), -1)
        targets = lm.copy_half(seq[:, 1:])
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()

    def step(params, m, v, t, seq):
        value, grads = jax.value_and_grad(loss)(params, seq)
        t = t + 1
        m = jax.tree.map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
        v = jax.tree.map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)

        def update(p, m, v):
            m_hat, v_hat = m / (1 - 0.9**t), v / (1 - 0.999**t)
            return p - 1e-3 * (m_hat / (jnp.sqrt(v_hat) + 1e-8) + 1e-2 * p)

        return value, jax.tree.map(update, params, m, v), m, v, t

    return step


def _params(jnp, lm, layers: int, dim: int) -> dict:
    rng = np.random.default_rng(0)

    def w(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * 0.05)

    blocks = {
        "ln1.weight": w(layers, dim),
        "ln1.bias": w(layers, dim),
        "attn.in_proj_weight": w(layers, 3 * dim, dim),
        "attn.in_proj_bias": w(layers, 3 * dim),
        "attn.out_proj.weight": w(layers, dim, dim),
        "attn.out_proj.bias": w(layers, dim),
        "ln2.weight": w(layers, dim),
        "ln2.bias": w(layers, dim),
        "fc1.weight": w(layers, 4 * dim, dim),
        "fc1.bias": w(layers, 4 * dim),
        "fc2.weight": w(layers, dim, 4 * dim),
        "fc2.bias": w(layers, dim),
    }
    return {
        "blocks": blocks,
        "tokens.weight": w(lm.VOCAB, dim),
        "positions": w(lm.LENGTH - 1, dim),
        "ln.weight": w(dim),
        "ln.bias": w(dim),
        "head.weight": w(lm.VOCAB, dim),
        "head.bias": w(lm.VOCAB),
    }


def compile_seconds(lm, layers: int, dim: int, heads: int, scanned: bool) -> tuple[float, float]:
    """(trace + lower seconds, XLA compile seconds) of the jax step, caches cleared first."""
    import jax
    import jax.numpy as jnp

    jax.clear_caches()
    params = _params(jnp, lm, layers, dim)
    zeros = jax.tree.map(jnp.zeros_like, params)
    seq = jnp.asarray(lm.sequences(np.random.default_rng(0), lm.BATCH))
    step = jax.jit(_step(jax, jnp, lm, layers, dim, heads, scanned), donate_argnums=(0, 1, 2))
    with jax.default_matmul_precision("highest"):
        start = time.perf_counter()
        lowered = step.lower(params, zeros, zeros, jnp.float32(0), seq)
        lowered_at = time.perf_counter()
        lowered.compile()
    return lowered_at - start, time.perf_counter() - lowered_at
