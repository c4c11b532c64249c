"""The four models of :mod:`benchmarks.bench_ahead`, each as a :class:`Case`: the user's step,
two models with the same initial weights (one per hlotrace pass pipeline) and the jax.jit peers
(the same program; for the convnets also the program written NHWC/HWIO).

>>> case = BUILDERS["resnet"](["--resnet-width", "16"], small=True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmarks.common import int_option


@dataclass
class Case:
    """One model: its step as the user wrote it, two models with the same initial weights (the
    default pipeline's and the layout pipeline's) and the jax peers."""

    key: str
    title: str
    step: Callable  # the user's train_step(*batch, **kwargs)
    kwargs: tuple[dict, dict]  # the step's keyword arguments for each model (model, opt, gm)
    model_state: Callable[[int], dict]  # host parameters and buffers of model 0 or 1, by name
    batch: list  # host arrays
    lr: float
    jax_call: Callable  # one step, returns its loss without waiting
    jax_state: Callable[[], dict]  # the peer's parameters and buffers now, as model_state's
    nhwc_call: Callable | None = None
    nhwc_state: Callable[[], dict] | None = None


def _state_of(model) -> dict:
    return {**{k: p.numpy() for k, p in model.named_parameters()}, **{k: b.numpy() for k, b in model.named_buffers()}}


def _host(tree) -> dict:
    return {k: np.asarray(a) for k, a in tree.items()}


def _hlotrace_kwargs(holder, models, opts) -> tuple[dict, dict]:
    from hlotrace.autodiff import GradManager

    return tuple(
        {holder: m, "opt": o, "gm": GradManager().attach(m.parameters())} for m, o in zip(models, opts, strict=True)
    )


# -- the four models --------------------------------------------------------------------------


def resnet(argv, small: bool) -> Case:
    """ResNet-18 CIFAR (width 64, batch 32; ``small``: 16 and 8), SGD; NHWC peer included."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from benchmarks.model_peers import from_channels_last, ported_peer, resnet_loss, sgd_update, to_channels_last
    from benchmarks.ported_steps import resnet_case

    batch = int_option(argv, "--resnet-batch", 8 if small else 32)
    width = int_option(argv, "--resnet-width", 16 if small else 64)
    case = resnet_case(batch, width)
    net = case.model
    params = {k: p.numpy().copy() for k, p in net.named_parameters()}
    buffers = {k: b.numpy().copy() for k, b in net.named_buffers()}
    last = to_channels_last(params)
    images, labels = case.batch
    nhwc_call, nhwc_box = ported_peer(
        jax,
        resnet_loss(jax, jnp, lax, net, channels_last=True),
        sgd_update,
        last,
        buffers,
        {k: np.zeros_like(a) for k, a in last.items()},
        case.lr,
        [np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels],
    )
    return _from_ported(
        "resnet",
        f"{case.title}, SGD",
        case,
        nhwc_call,
        lambda: {**from_channels_last(nhwc_box["j"][0]), **_host(nhwc_box["j"][1])},
    )


def _from_ported(name: str, title: str, case, *nhwc) -> Case:
    """The Case of a ported model's step (benchmarks.ported_steps' case) and its twin's;
    ``nhwc``: the NHWC peer's call and its state in the user's layout, for the convnets."""
    twin, make_opt = case.twin
    models = (case.model, twin)
    return Case(
        name,
        title,
        case.step,
        _hlotrace_kwargs(case.holder, models, (case.opt, make_opt(twin))),
        lambda i: _state_of(models[i]),
        case.batch,
        case.lr,
        case.jax_call,
        lambda: {**_host(case.jax_box["j"][0]), **_host(case.jax_box["j"][1])},
        *nhwc,
    )


def cnn(argv, small: bool) -> Case:
    """examples/train_cnn.py's ConvNet (one size), AdamW; NHWC peer included."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from benchmarks.model_peers import BETAS, EPS, LR, WD, cnn_loss, from_channels_last, to_channels_last
    from benchmarks.model_steps import cnn_case, example_net_copy, jax_peer
    from hlotrace import optim

    title, example, net, batch, loss = cnn_case()
    twin = example_net_copy(net)
    params = {k: p.numpy().copy() for k, p in net.named_parameters()}
    buffers = {k: b.numpy().copy() for k, b in net.named_buffers()}
    # fc reads the last pooled map flattened; written NHWC it reads (H, W, C) order.
    channels = params["conv2.weight"].shape[0]
    side = round((params["fc.weight"].shape[1] // channels) ** 0.5)
    flattened = {"fc.weight": (channels, side, side)}
    images, labels = batch
    call, state = jax_peer(jax, loss, params, buffers, batch, per_parameter=True)
    nhwc_call, nhwc_state = jax_peer(
        jax,
        cnn_loss(jax, jnp, lax, channels_last=True),
        to_channels_last(params, flattened),
        buffers,
        [np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels],
        per_parameter=True,
    )
    models = (net, twin)
    opts = [optim.AdamW(m.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD) for m in models]
    return Case(
        "cnn",
        f"{title} (examples/train_cnn.py, batch {len(labels)} of 1x8x8, AdamW)",
        example.train_step,
        _hlotrace_kwargs("net", models, opts),
        lambda i: _state_of(models[i]),
        batch,
        LR,
        call,
        lambda: {**_host(state["j"][0]), **_host(state["j"][1])},
        nhwc_call,
        lambda: {**from_channels_last(nhwc_state["j"][0], flattened), **_host(nhwc_state["j"][1])},
    )


def gpt(argv, small: bool) -> Case:
    """examples/gpt.py's decoder (4 layers; ``small``: 2), clip + AdamW with decay groups."""
    from benchmarks.ported_steps import gpt_case

    case = gpt_case(int_option(argv, "--gpt-layers", 2 if small else 4))
    return _from_ported("gpt", f"{case.title}, AdamW", case)


def mlp(argv, small: bool) -> Case:
    """bench_train's MLP and its jax peer (one size)."""
    import jax

    from benchmarks import bench_train

    rng = np.random.default_rng(0)
    x = rng.standard_normal((bench_train.BATCH, bench_train.SIZES[0])).astype(np.float32)
    y = rng.integers(0, bench_train.SIZES[-1], bench_train.BATCH).astype(np.int32)
    built = [bench_train._hlotrace_model() for _ in range(2)]  # seeded: the same weights twice
    layers = ("fc1", "fc2", "fc3")
    weights = [
        (getattr(built[0][0], n).weight.numpy().copy(), getattr(built[0][0], n).bias.numpy().copy()) for n in layers
    ]
    device = jax.devices()[0]
    jstep = bench_train._jax_step()
    jstate, jhyper = bench_train._jax_state(weights, lambda a: jax.device_put(a, device))
    jx, jy = jax.device_put(x, device), jax.device_put(y, device)
    box = {"j": jstate}

    def call():
        loss, *rest = jstep(*box["j"], jhyper, jx, jy)
        box["j"] = tuple(rest)
        return loss

    def jax_state():
        return {
            f"{n}.{k}": np.asarray(a)
            for n, layer in zip(layers, box["j"][0], strict=True)
            for k, a in zip(("weight", "bias"), layer, strict=True)
        }

    return Case(
        "mlp",
        f"MLP {'-'.join(map(str, bench_train.SIZES))} (benchmarks/bench_train.py, batch {bench_train.BATCH}, AdamW)",
        bench_train.train_step,
        tuple({"net": net, "opt": opt, "gm": gm} for net, opt, gm in built),
        lambda i: _state_of(built[i][0]),
        [x, y],
        bench_train.LR,
        call,
        jax_state,
    )


BUILDERS = {"resnet": resnet, "cnn": cnn, "gpt": gpt, "mlp": mlp}
