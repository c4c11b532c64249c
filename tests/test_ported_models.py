"""The ported PyTorch models (examples/resnet.py, gpt.py, unet.py) at small sizes: one compiled
training step equals the eager step (loss and every parameter and buffer after the step, within
the tolerance table's float32 entry widened for a whole training step), the loss falls over a
few compiled steps on one batch, and the state_dict keys are PyTorch's; the model code names
only PyTorch's ``torch``/``nn``/``F`` (hlotrace.torch behind the imports)."""

from __future__ import annotations

import importlib.util
import os
import re
import sys

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace
from hlotrace.testing.tolerances import TOLERANCES, Tolerance, assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One op's float32 tolerance is 1e-6; a training step chains a forward, a backward and an
# update whose sums XLA and NumPy order differently (tests/test_calling_conventions.py's
# STEP_TOLERANCE is the same widening for three steps of small models).
FLOAT32 = TOLERANCES[np.dtype(np.float32)]
STEP_TOLERANCE = Tolerance(20 * FLOAT32.rtol, 2 * FLOAT32.atol, "one training step: forward, backward and update")
# ResNet-50 (53 layers): the eager and the compiled gradients are each within 2.4e-5 of a float64
# reference (relative to the largest), and an SGD step at lr 0.05 moves weights by ~1e-2.
DEEP_STEP_TOLERANCE = STEP_TOLERANCE._replace(atol=1e-5, reason="one step of a 53-layer network")


def _load(name):
    spec = importlib.util.spec_from_file_location(f"ported_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


resnet, gpt, unet = _load("resnet"), _load("gpt"), _load("unet")


def _twins(make):
    """Two models with the same initial weights."""
    ht.random.seed(0)
    first = make()
    second = make()
    second.load_state_dict(first.state_dict())
    return first, second


def _compiled_equals_eager(
    make, make_opt, step, batch, holder="net", more_steps=4, schedule=None, adam_lr=None, tolerance=STEP_TOLERANCE
):
    """One step eagerly and one compiled (the first call compiled too, not the eager first call)
    from the same weights: the loss, the optimizer state and every parameter and buffer agree.

    ``adam_lr``: Adam divides each gradient by its own root mean square, so an element whose
    gradient is rounding noise (an exactly cancelling sum) moves by up to ``lr`` in either
    program; there the parameters get atol ``0.2 * lr`` (as benchmarks/bench_models.py's
    check) while the moments, linear and quadratic in the gradients, keep the step tolerance.
    """
    eager, compiled = _twins(make)
    eager_opt, compiled_opt = make_opt(eager), make_opt(compiled)
    eager_gm, compiled_gm = (GradManager().attach(m.parameters()) for m in (eager, compiled))
    traced = xla_trace(step, first_call="compiled")  # the default first call runs eagerly
    batch = [ht.tensor(a) for a in batch]
    expected = step(*batch, **{holder: eager, "opt": eager_opt, "gm": eager_gm}).numpy()
    actual = traced(*batch, **{holder: compiled, "opt": compiled_opt, "gm": compiled_gm}).numpy()
    assert_close(actual, expected, tolerance, what="loss")
    compiled_state = compiled.state_dict()
    params = dict(eager.named_parameters())
    loose = tolerance._replace(atol=0.2 * adam_lr, reason="Adam normalizes noise") if adam_lr else None
    for name, value in eager.state_dict().items():
        within = loose if loose and name in params else tolerance
        assert_close(compiled_state[name], value, within, what=f"{name} after one step")
    opt_states = (eager_opt.state_dict()["state"], compiled_opt.state_dict()["state"])
    for index, state in opt_states[0].items():
        for key, value in state.items():
            # Gradient-valued state (SGD's momentum buffer): its errors scale with the largest
            # gradient of the tensor, not with each element.
            scaled = tolerance._replace(atol=max(tolerance.atol, tolerance.atol * 10 * float(np.abs(value).max())))
            assert_close(opt_states[1][index][key], value, scaled, what=f"optimizer state {index}.{key}")
    losses = [float(actual)]
    sched = schedule(compiled_opt) if schedule else None
    for _ in range(more_steps):
        if sched is not None:
            sched.step()
        losses.append(float(traced(*batch, **{holder: compiled, "opt": compiled_opt, "gm": compiled_gm})))
    assert losses[-1] < losses[0], losses
    assert traced.cache_size == 1
    return compiled


def _digits(n, size, seed=0):
    """Random-normal 3 x size x size images and labels. Not the upsampled digits: their blocks of
    equal pixels make the batch norms' backward ill-conditioned (near-constant channels divided
    by their tiny standard deviations), where float32 roundings, NumPy's and XLA's apart, moved
    ResNet-50's layer4 updates by 10% of themselves (1.6e-4 with these images)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 3, size, size)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


# At 8 pixels the last stage is 1x1 and its batch norms normalize 8 values: 16 and 32 pixels.
@pytest.mark.parametrize(("arch", "size"), [("resnet18", 16), ("resnet50", 32)])
def test_resnet_step_compiled_equals_eager(arch, size):
    make = lambda: resnet.ARCHS[arch](num_classes=10, cifar=True, width=4)  # noqa: E731
    tolerance = DEEP_STEP_TOLERANCE if arch == "resnet50" else STEP_TOLERANCE
    net = _compiled_equals_eager(
        make, lambda m: resnet.make_optimizer(m, 0.05), resnet.train_step, _digits(8, size), tolerance=tolerance
    )
    keys = list(net.state_dict())
    assert keys[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"]
    assert "layer2.0.downsample.0.weight" in keys and "layer2.0.downsample.1.running_var" in keys
    assert [k for k in keys if "running_" not in k][-2:] == ["fc.weight", "fc.bias"]  # parameters, then buffers
    assert net.fc.weight.shape == (10, 4 * 8 * net.layer1[0].expansion)


def test_resnet_layout_is_torchvisions():
    net = resnet.resnet50(num_classes=10, cifar=False, width=2)
    assert [type(b).__name__ for b in net.layer1] == ["Bottleneck"] * 3
    assert [len(layer) for layer in (net.layer1, net.layer2, net.layer3, net.layer4)] == [3, 4, 6, 3]
    assert net.fc.weight.shape == (10, 2 * 8 * 4)
    assert tuple(net(ht.tensor(np.zeros((2, 3, 32, 32), np.float32))).shape) == (2, 10)


def test_gpt_step_compiled_equals_eager():
    k = 4
    x, y = gpt.batch(np.random.default_rng(0), 8, k)

    def make():
        return gpt.gpt(n_layer=2, n_embd=16, n_head=2, block_size=2 * k + 1, vocab_size=gpt.VOCAB, bias=False)

    def make_opt(model):
        return model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95), device_type="cpu")

    model = _compiled_equals_eager(
        make, make_opt, gpt.train_step, [x, y], holder="model", schedule=lambda o: gpt.schedule(o, 2, 10), adam_lr=3e-3
    )
    keys = list(model.state_dict())
    assert keys[:2] == ["transformer.wte.weight", "transformer.wpe.weight"]
    assert "transformer.h.1.attn.c_attn.weight" in keys
    assert model.transformer.h[0].attn.flash  # nanoGPT's flash branch: no causal-mask buffer
    assert not any(key.endswith("attn.bias") for key in keys)
    assert model.lm_head.weight is model.transformer.wte.weight  # tied: one parameter


@pytest.mark.parametrize("bilinear", [False, True], ids=["transposed-conv", "bilinear"])
def test_unet_step_compiled_equals_eager(bilinear):
    rng = np.random.default_rng(0)
    images, masks = unet.segmentation_data(rng.random((4, 64)).astype(np.float32), rng)
    net = _compiled_equals_eager(
        lambda: unet.unet(base=4, bilinear=bilinear),
        lambda m: ht.optim.Adam(m.parameters(), lr=1e-2),
        unet.train_step,
        [images, masks],
        adam_lr=1e-2,
    )
    assert isinstance(net.up1.up, ht.nn.Upsample if bilinear else ht.nn.ConvTranspose2d)


def _model_code(module) -> str:
    """The model part of an example: from its "# -- the model" line to the task and training."""
    text = open(module.__file__).read()
    start = text.index("# -- the model")
    return text[start : text.index("and training ---", start)]


@pytest.mark.parametrize("example", [resnet, gpt, unet], ids=["resnet", "gpt", "unet"])
def test_the_model_code_is_pytorchs_spelling_only(example):
    """Issue 36's target: the model code names only ``torch``, ``nn`` and ``F`` (hlotrace.torch
    behind the imports), never hlotrace itself."""
    code = _model_code(example)
    assert "hlotrace" not in code and not re.search(r"\bht\.", code) and "GradManager" not in code
    assert example.torch is ht.torch and example.nn is ht.torch.nn


def test_nanogpts_flash_branch_equals_its_explicit_attention(monkeypatch, capsys):
    """examples/gpt.py keeps nanoGPT's two attention branches: ``self.flash`` (PyTorch 2's
    ``torch.nn.functional.scaled_dot_product_attention`` exists, as in hlotrace.torch) and the
    explicit one with the ``bias`` mask buffer, taken where that function is missing (here:
    deleted while the model is built). Both give the same outputs, eagerly and compiled, and
    the same loss for a whole GPT with the same weights."""
    torch, nn = gpt.torch, gpt.nn
    config = gpt.GPTConfig(block_size=8, vocab_size=gpt.VOCAB, n_layer=2, n_head=2, n_embd=16)

    def build(make, flash):
        with monkeypatch.context() as patch:
            if not flash:  # as PyTorch < 2.0
                patch.delattr(torch.nn.functional, "scaled_dot_product_attention")
            model = make(config)
        attentions = [model] if isinstance(model, gpt.CausalSelfAttention) else [b.attn for b in model.transformer.h]
        assert [a.flash for a in attentions] == [flash] * len(attentions)
        return model

    torch.manual_seed(0)
    flash = build(gpt.CausalSelfAttention, flash=True)
    explicit = build(gpt.CausalSelfAttention, flash=False)
    assert "WARNING: using slow attention" in capsys.readouterr().out  # nanoGPT's
    assert flash.flash and not explicit.flash and isinstance(explicit, nn.Module)
    assert "bias" not in flash.state_dict() and explicit.bias.shape == (1, 1, 8, 8)
    assert explicit.load_state_dict(flash.state_dict(), strict=False).missing_keys == ["bias"]
    x = torch.randn(3, 7, 16)
    np.testing.assert_allclose(flash(x).numpy(), explicit(x).numpy(), rtol=1e-5, atol=1e-6)
    compiled = xla_trace(lambda x, *, m: m(x))
    for m in (flash, explicit):
        np.testing.assert_allclose(compiled(x, m=m).numpy(), explicit(x).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(compiled(x, m=m).numpy(), explicit(x).numpy(), rtol=1e-5, atol=1e-6)

    models = [build(gpt.GPT, flash=True), build(gpt.GPT, flash=False)]
    missing = models[1].load_state_dict(models[0].state_dict(), strict=False).missing_keys
    assert missing == [f"transformer.h.{i}.attn.bias" for i in range(2)]
    idx, targets = (torch.from_numpy(a) for a in gpt.batch(np.random.default_rng(0), 4, 3))
    (logits_a, loss_a), (logits_b, loss_b) = (m(idx, targets) for m in models)
    np.testing.assert_allclose(logits_a.numpy(), logits_b.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(loss_a), float(loss_b), rtol=1e-5)


def test_a_resnet18_checkpoint_with_pytorchs_keys_loads_and_gives_the_same_outputs(tmp_path):
    """Issue 36, item 6: a safetensors file holding a ResNet-18 state dict under PyTorch's keys
    (with BatchNorm's num_batches_tracked, written with the safetensors package's NumPy API as
    ``safetensors.torch.save_file`` would) loads into a fresh hlotrace ResNet-18: same outputs."""
    import safetensors.numpy

    ht.random.seed(1)
    source = resnet.resnet18(num_classes=10, cifar=True, width=4)
    for name, buf in source.named_buffers():  # non-trivial running statistics and batch counts
        rng = np.random.default_rng(len(name))
        value = rng.integers(1, 9, buf.shape) if buf.dtype == np.int64 else rng.uniform(0.5, 1.5, buf.shape)
        buf._assign(ht.tensor(value.astype(buf.dtype)))
    checkpoint = nn_torch_keys(source)
    assert "bn1.num_batches_tracked" in checkpoint and "layer1.0.bn2.num_batches_tracked" in checkpoint
    path = tmp_path / "resnet18.safetensors"
    safetensors.numpy.save_file(checkpoint, str(path))

    ht.random.seed(2)
    target = resnet.resnet18(num_classes=10, cifar=True, width=4)
    assert ht.nn.load_torch_state_dict(target, str(path)) == ht.nn.IncompatibleKeys([], [])
    x = ht.tensor(_digits(4, 8)[0])
    for net in (source, target):
        net.eval()
    np.testing.assert_array_equal(target(x).numpy(), source(x).numpy())
    for (name, a), (_, b) in zip(source.named_buffers(), target.named_buffers(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)  # the counters too


def nn_torch_keys(module) -> dict[str, np.ndarray]:
    """PyTorch's state dict of the same model: hlotrace's own, keys and order (no tied weights
    in a ResNet), BatchNorm's int64 counters included."""
    state = ht.nn.torch_state_dict(module)
    assert list(state) == list(module.state_dict())
    return state


@pytest.mark.parametrize(
    ("example", "argv"),
    [
        (resnet, ["--width", "4", "--size", "8", "--steps", "12", "--batch", "16"]),
        (gpt, ["--layers", "1", "--embd", "32", "--k", "4", "--steps", "60"]),
        (unet, ["--base", "4", "--steps", "12", "--batch", "8"]),
    ],
    ids=["resnet", "gpt", "unet"],
)
def test_the_demos_train(example, argv, capsys):
    losses = example.main(argv)
    out = capsys.readouterr().out
    assert np.mean(losses[-3:]) < losses[0], out
    assert "compiled executables for the step: 1" in out
