"""The jax peers of bench_models' training steps: each model's loss and optimizer update
written in jax.numpy/lax from the same formulas as the hlotrace model it is compared with.

- :func:`cnn_loss`, :func:`transformer_loss` + :func:`adamw` (:func:`jax_step`): the
  examples' ConvNet and causal LM (examples/train_cnn.py, examples/train_transformer.py);
- :func:`resnet_loss` + :func:`sgd_update`, :func:`gpt_loss` + :func:`gpt_update`
  (:func:`ported_peer`): the ported PyTorch models (examples/resnet.py, examples/gpt.py).

The convnets' losses take ``channels_last``: ``False`` is the program a PyTorch/MegEngine user
writes (NCHW activations, OIHW weights, as hlotrace's ``conv2d`` records), ``True`` the same
math written NHWC/HWIO (the layout XLA:CPU runs convolutions in), its parameters converted by
:func:`to_channels_last`. Formulas: PyTorch's AdamW and SGD, biased batch variance for
normalization and the unbiased one for the running statistics with MegEngine's momentum 0.9,
exact GELU.

>>> loss = resnet_loss(jax, jnp, lax, net, channels_last=True)
>>> call, box = ported_peer(jax, loss, sgd_update, to_channels_last(params), buffers, state, SGD_LR, batch)
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np

LR, BETAS, EPS, WD = 3e-3, (0.9, 0.999), 1e-8, 1e-2
BN_EPS, BN_MOMENTUM = 1e-5, 0.9
SGD_LR, SGD_MOMENTUM, SGD_WD = 0.05, 0.9, 5e-4  # examples/resnet.py's make_optimizer
GPT_LR, GPT_BETAS, GPT_WD, GPT_CLIP = 3e-3, (0.9, 0.95), 0.1, 1.0  # examples/gpt.py's main
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lax.conv_general_dilated's dimension numbers and the spatial axes of an activation.
NCHW = ("NCHW", "OIHW", "NCHW")
NHWC = ("NHWC", "HWIO", "NHWC")
OIHW_TO_HWIO, HWIO_TO_OIHW = (2, 3, 1, 0), (3, 2, 0, 1)


def load_example(name: str):
    """The module ``examples/<name>.py``, loaded as a user's script would be."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses (examples/gpt.py) look their module up
    spec.loader.exec_module(module)
    return module


# -- layouts --------------------------------------------------------------------------------


def to_channels_last(params: dict, flattened: dict | None = None) -> dict:
    """``params`` for the NHWC-written program: every 4-D (OIHW) weight as HWIO; ``flattened``:
    ``{name: (C, H, W)}`` of linear weights that read a flattened NCHW feature map, their
    columns reordered to read the same map flattened NHWC.

    >>> to_channels_last({"conv.weight": np.zeros((8, 3, 3, 3))})["conv.weight"].shape
    (3, 3, 3, 8)
    """
    flattened = flattened or {}
    out = {}
    for name, a in params.items():
        if name in flattened:
            c, h, w = flattened[name]
            a = np.asarray(a).reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(a.shape)
        elif np.ndim(a) == 4:
            a = np.asarray(a).transpose(OIHW_TO_HWIO)
        out[name] = a
    return out


def from_channels_last(params: dict, flattened: dict | None = None) -> dict:
    """The inverse of :func:`to_channels_last` (host arrays in the user's NCHW/OIHW layout)."""
    flattened = flattened or {}
    out = {}
    for name, a in params.items():
        a = np.asarray(a)
        if name in flattened:
            c, h, w = flattened[name]
            a = a.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(a.shape)
        elif a.ndim == 4:
            a = a.transpose(HWIO_TO_OIHW)
        out[name] = a
    return out


# -- shared pieces ----------------------------------------------------------------------------


def adamw(jnp, params, grads, m, v, t, lr):
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


def cross_entropy(jax, jnp, logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def batch_norm(jnp, x, p, buffers, name, channels_last: bool = False):
    """Training-mode batch norm with MegEngine's momentum 0.9 (PyTorch's 0.1), the unbiased
    variance for running_var and PyTorch's step counter: (y, updated buffers)."""
    axes = (0, 1, 2) if channels_last else (0, 2, 3)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    n = x.size // mean.size
    per_channel = (lambda a: a) if channels_last else (lambda a: a[None, :, None, None])
    y = (x - per_channel(mean)) / jnp.sqrt(per_channel(var) + BN_EPS)
    y = y * per_channel(p[f"{name}.weight"]) + per_channel(p[f"{name}.bias"])
    rm, rv = buffers[f"{name}.running_mean"], buffers[f"{name}.running_var"]
    return y, {
        f"{name}.running_mean": BN_MOMENTUM * rm + (1 - BN_MOMENTUM) * mean,
        f"{name}.running_var": BN_MOMENTUM * rv + (1 - BN_MOMENTUM) * var * n / (n - 1),
        f"{name}.num_batches_tracked": buffers[f"{name}.num_batches_tracked"] + 1,
    }


def _conv(lax, channels_last: bool):
    numbers = NHWC if channels_last else NCHW

    def conv(x, w, stride=1, pad=1):
        return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)], dimension_numbers=numbers)

    return conv


# -- the examples' CNN and transformer --------------------------------------------------------


def cnn_loss(jax, jnp, lax, channels_last: bool = False):
    """examples/train_cnn.py's ConvNet: (conv3x3 BN ReLU maxpool2) x 2, linear; its batch-norm
    running statistics as the auxiliary output. ``channels_last``: images NHWC, convolution
    weights HWIO, ``fc.weight`` reading the NHWC-flattened map (:func:`to_channels_last`)."""
    conv = _conv(lax, channels_last)
    window = (1, 2, 2, 1) if channels_last else (1, 1, 2, 2)

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, window, window, "VALID")

    def loss(p, buffers, x, y):
        # no convolution bias: batch norm follows
        h, b1 = batch_norm(jnp, conv(x, p["conv1.weight"]), p, buffers, "bn1", channels_last)
        h = pool(jnp.maximum(h, 0.0))
        h, b2 = batch_norm(jnp, conv(h, p["conv2.weight"]), p, buffers, "bn2", channels_last)
        h = pool(jnp.maximum(h, 0.0)).reshape(x.shape[0], -1)
        logits = h @ p["fc.weight"].T + p["fc.bias"]
        return cross_entropy(jax, jnp, logits, y), {**b1, **b2}

    return loss


def _transformer_pieces(jnp):
    """(layer_norm, linear) on dicts of arrays keyed by PyTorch's parameter names (biased
    variance, eps 1e-5; ``x @ W.T + b``)."""

    def layer_norm(x, p, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[f"{name}.weight"] + p[f"{name}.bias"]

    def linear(x, p, name):
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    return layer_norm, linear


def transformer_loss(jax, jnp, example, heads):
    """examples/train_transformer.py's 2-layer causal LM, cross-entropy over the copy half."""
    k = example.K

    layer_norm, linear = _transformer_pieces(jnp)

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
        return cross_entropy(jax, jnp, logits[:, k + 1 :], targets[:, k + 1 :]), {}

    return loss


def jax_step(loss_fn):
    """``loss_fn``'s training step with :func:`adamw`, jitted with parameters, buffers and the
    optimizer state donated and the learning rate an argument:
    ``step(params, buffers, m, v, t, lr, *batch) -> (loss, params, buffers, m, v, t)``."""
    import jax
    import jax.numpy as jnp

    def step(params, buffers, m, v, t, lr, *batch):
        # Full float32 convolutions and matmuls, as hlotrace asks for (jax's GPU default is TF32).
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, m, v, t = adamw(jnp, params, grads, m, v, t, lr)
        return loss, params, {**buffers, **new_buffers}, m, v, t

    return jax.jit(step, donate_argnums=(0, 1, 2, 3, 4))


# -- the ported PyTorch models (examples/resnet.py, examples/gpt.py) ----------------------------


def resnet_loss(jax, jnp, lax, net, channels_last: bool = False):
    """torchvision's BasicBlock ResNet with the CIFAR stem, from the hlotrace model's plan.
    ``channels_last``: images NHWC and convolution weights HWIO (:func:`to_channels_last`)."""
    plan = [
        (f"layer{i}.{j}", block.stride, block.downsample is not None)
        for i in range(1, 5)
        for j, block in enumerate(getattr(net, f"layer{i}"))
    ]
    conv = _conv(lax, channels_last)
    spatial = (1, 2) if channels_last else (2, 3)

    def loss(p, buffers, x, y):
        updated = {}

        def bn(h, name):
            h, u = batch_norm(jnp, h, p, buffers, name, channels_last)
            updated.update(u)
            return h

        relu = jax.nn.relu  # gradient 0 at 0, as PyTorch (jnp.maximum splits ties: 0.5)
        h = relu(bn(conv(x, p["conv1.weight"], 1, 1), "bn1"))
        for name, stride, down in plan:
            out = relu(bn(conv(h, p[f"{name}.conv1.weight"], stride, 1), f"{name}.bn1"))
            out = bn(conv(out, p[f"{name}.conv2.weight"], 1, 1), f"{name}.bn2")
            identity = bn(conv(h, p[f"{name}.downsample.0.weight"], stride, 0), f"{name}.downsample.1") if down else h
            h = relu(out + identity)
        logits = h.mean(axis=spatial) @ p["fc.weight"].T + p["fc.bias"]
        return cross_entropy(jax, jnp, logits, y), updated

    return loss


def gpt_loss(jax, jnp, config):
    """nanoGPT's decoder (tied head, exact GELU, causal attention), ``ignore_index=-1``."""
    n_head, n_layer = config.n_head, config.n_layer

    layer_norm, linear = _transformer_pieces(jnp)

    def loss(p, buffers, idx, targets):
        b, t = idx.shape
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))  # the peer's own: nanoGPT's flash path keeps no mask
        x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][jnp.arange(t)]
        for i in range(n_layer):
            blk = f"transformer.h.{i}"
            h = layer_norm(x, p, f"{blk}.ln_1")
            c = h.shape[-1]
            qkv = linear(h, p, f"{blk}.attn.c_attn")
            q, k, v = (
                qkv[..., j * c : (j + 1) * c].reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3) for j in range(3)
            )
            att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(c // n_head))
            att = jnp.where(causal, att, -jnp.inf)
            y = (jax.nn.softmax(att, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
            x = x + linear(y, p, f"{blk}.attn.c_proj")
            h = jax.nn.gelu(linear(layer_norm(x, p, f"{blk}.ln_2"), p, f"{blk}.mlp.c_fc"), approximate=False)
            x = x + linear(h, p, f"{blk}.mlp.c_proj")
        logits = layer_norm(x, p, "transformer.ln_f") @ p["transformer.wte.weight"].T
        logp = jax.nn.log_softmax(logits.reshape(b * t, -1), axis=-1)
        flat = targets.reshape(-1)
        valid = flat != -1
        picked = jnp.take_along_axis(logp, jnp.where(valid, flat, 0)[:, None], axis=-1)[:, 0]
        return -jnp.sum(jnp.where(valid, picked, 0.0)) / jnp.sum(valid), {}

    return loss


def sgd_update(jnp, params, grads, state, lr):
    """PyTorch's SGD (dampening 0, no Nesterov): g += wd * p; buf = momentum * buf + g (buf = g
    at the first step: buf starts at zero); p -= lr * buf."""
    new_p, new_buf = {}, {}
    for k, p in params.items():
        g = grads[k] + SGD_WD * p
        new_buf[k] = SGD_MOMENTUM * state[k] + g
        new_p[k] = p - lr * new_buf[k]
    return new_p, new_buf


def gpt_update(decayed):
    """clip_grad_norm_(GPT_CLIP) then PyTorch's AdamW with weight decay on ``decayed`` names only
    and a step count per parameter."""

    def update(jnp, params, grads, state, lr):
        total = jnp.sqrt(sum(jnp.sum(g * g) for g in grads.values()))
        scale = jnp.minimum(GPT_CLIP / (total + 1e-6), 1.0)
        m, v, t = state
        b1, b2 = GPT_BETAS
        new_p, new_m, new_v, new_t = {}, {}, {}, {}
        for k, p in params.items():
            g = grads[k] * scale
            new_t[k] = t[k] + 1.0
            if k in decayed:
                p = p * (1 - lr * GPT_WD)
            new_m[k] = b1 * m[k] + (1 - b1) * g
            new_v[k] = b2 * v[k] + (1 - b2) * g * g
            new_p[k] = p - lr * (new_m[k] / (1 - b1 ** new_t[k])) / (jnp.sqrt(new_v[k] / (1 - b2 ** new_t[k])) + EPS)
        return new_p, (new_m, new_v, new_t)

    return update


def ported_peer(jax, loss_fn, update, params, buffers, state, lr, batch_np):
    """A jitted jax step (parameters, buffers and optimizer state donated, lr an argument)
    from ``params``; returns ``(call, box)``: ``call()`` runs one step, returns its loss
    without waiting, and leaves (params, buffers, state) in ``box["j"]``."""
    jnp = jax.numpy

    def step(params, buffers, state, lr, *batch):
        with jax.default_matmul_precision("highest"):
            (loss, new_buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, *batch)
        params, state = update(jnp, params, grads, state, lr)
        return loss, params, {**buffers, **new_buffers}, state

    jstep = jax.jit(step, donate_argnums=(0, 1, 2))
    device = jax.devices()[0]
    box = {"j": jax.device_put((params, buffers, state), device)}
    jlr, jbatch = jax.device_put(np.float32(lr), device), [jax.device_put(a, device) for a in batch_np]

    def call():
        loss, *rest = jstep(*box["j"], jlr, *jbatch)
        box["j"] = tuple(rest)
        return loss

    return call, box
