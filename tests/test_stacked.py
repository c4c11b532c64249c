"""nn.Stacked: n blocks with stacked [n, ...] parameters run by one F.scan equal n separate
blocks with the same parameters (forward, gradients, compiled training steps with SGD
momentum and AdamW, eager and compiled), its state_dict round-trips, n=1 works, and what a
scanned block cannot do is refused naming this file's line."""

import re

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError, OpError, TraceError
from hlotrace.jit import xla_trace

RNG = np.random.default_rng(22)
HERE = re.escape(__file__.rsplit("/", 1)[-1])


class Block(nn.Module):
    """A pre-norm residual MLP block (a transformer block without attention)."""

    def __init__(self, dim=6, hidden=10, bias=True):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim, bias=bias)

    def forward(self, x, scale=1.0):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x)))) * scale


def _x(*shape):
    return ht.tensor(RNG.standard_normal(shape).astype(np.float32))


def _randomize(module):
    for p in module.parameters():
        p._assign(ht.tensor(RNG.standard_normal(p.shape).astype(p.dtype) * 0.5))


def _pair(n, make=Block, unroll=1):
    """An nn.Stacked of n blocks and an nn.Sequential of n blocks with the same values."""
    stacked = nn.Stacked(make, n, unroll=unroll)
    _randomize(stacked)
    state = stacked.state_dict()
    blocks = [make() for _ in range(n)]
    for i, block in enumerate(blocks):
        block.load_state_dict({k: v[i] for k, v in state.items()})
    return stacked, nn.Sequential(*blocks)


def _grads(params):
    return [p.grad.numpy().copy() for p in params]


def _unstacked_grads(stacked, unrolled):
    """The unrolled blocks' gradients stacked like nn.Stacked's parameters."""
    per_block = [dict(b.named_parameters()) for b in unrolled]
    return [np.stack([blocks[name].grad.numpy() for blocks in per_block]) for name, _ in stacked.named_parameters()]


def test_parameters_are_stacked_under_the_blocks_names():
    stacked = nn.Stacked(Block, 3)
    names = [(name, p.shape) for name, p in stacked.named_parameters()]
    assert names == [
        ("ln.weight", (3, 6)),
        ("ln.bias", (3, 6)),
        ("fc1.weight", (3, 10, 6)),
        ("fc1.bias", (3, 10)),
        ("fc2.weight", (3, 6, 10)),
        ("fc2.bias", (3, 6)),
    ]
    assert all(isinstance(p, ht.Parameter) for p in stacked.parameters())
    model = nn.Sequential(nn.Linear(6, 6), nn.Stacked(lambda: Block(bias=False), 2))
    expected = ["0.weight", "0.bias", "1.ln.weight", "1.ln.bias", "1.fc1.weight", "1.fc1.bias", "1.fc2.weight"]
    assert list(model.state_dict()) == expected
    assert len(stacked) == 3 and "n=3, block=Block" in repr(stacked)
    # The blocks were initialized separately (not one block copied n times).
    w = stacked.fc1.weight.numpy()
    assert not np.array_equal(w[0], w[1])


@pytest.mark.parametrize("n", [1, 4])
def test_forward_and_gradients_equal_separate_blocks(n):
    stacked, unrolled = _pair(n)
    x = _x(3, 6)
    np.testing.assert_allclose(stacked(x, 0.5).numpy(), _run(unrolled, x, 0.5).numpy(), rtol=1e-5, atol=1e-6)
    for net in (stacked, unrolled):
        gm = GradManager().attach(net.parameters())
        with gm:
            gm.backward(F.sum(F.tanh(_run(net, x, 0.5))))
    for got, want in zip(_grads(stacked.parameters()), _unstacked_grads(stacked, unrolled), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class AttentionBlock(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, is_causal=False):
        h = self.ln(x)
        return x + self.attn(h, h, h, is_causal=is_causal, need_weights=False)[0]


def test_attention_blocks_with_keyword_arguments_eager_and_compiled():
    stacked, unrolled = _pair(3, AttentionBlock)
    x = _x(2, 5, 8)
    want = x
    for block in unrolled:
        want = block(want, is_causal=True)
    compiled = xla_trace(lambda x, *, net: net(x, is_causal=True))
    for got in (stacked(x, is_causal=True), compiled(x, net=stacked)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def _run(net, x, scale):
    if isinstance(net, nn.Stacked):
        return net(x, scale)
    for block in net:
        x = block(x, scale)
    return x


def _train_step(x, *, net, opt, gm):
    with gm:
        loss = F.mean(F.square(_run(net, x, 1.0)))
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


@pytest.mark.parametrize("make_optimizer", [lambda p: optim.SGD(p, lr=0.05, momentum=0.9), optim.AdamW])
def test_compiled_training_steps_equal_separate_blocks(make_optimizer):
    stacked, unrolled = _pair(3)
    eager_stacked, _ = _pair(3)
    eager_stacked.load_state_dict(stacked.state_dict())
    runs = {}
    for name, net, step in (
        ("stacked", stacked, xla_trace(_train_step)),
        ("eager stacked", eager_stacked, _train_step),
        ("unrolled", unrolled, xla_trace(_train_step)),
    ):
        opt, gm = make_optimizer(net.parameters()), GradManager().attach(net.parameters())
        ids = [id(p) for p in net.parameters()]
        rng = np.random.default_rng(0)
        losses = [float(step(ht.tensor(rng.standard_normal((4, 6)).astype(np.float32)), net=net, opt=opt, gm=gm))]
        losses += [
            float(step(ht.tensor(rng.standard_normal((4, 6)).astype(np.float32)), net=net, opt=opt, gm=gm))
            for _ in range(3)
        ]
        assert [id(p) for p in net.parameters()] == ids  # updated in place
        state = net.state_dict()
        if name == "unrolled":
            state = {
                k.split(".", 1)[1]: np.stack([state[f"{i}.{k.split('.', 1)[1]}"] for i in range(3)]) for k in state
            }
        runs[name] = (losses, state)
        if name != "eager stacked":
            assert step.cache_size == 1
    want_losses, want_state = runs["unrolled"]
    for name in ("stacked", "eager stacked"):
        losses, state = runs[name]
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
        assert list(state) == list(stacked.state_dict())
        for key in state:
            np.testing.assert_allclose(state[key], want_state[key], rtol=2e-5, atol=2e-6, err_msg=f"{name} {key}")


def test_compiled_step_size_does_not_depend_on_n():
    from hlotrace.passes.manager import count_ops

    sizes = []
    for n in (2, 5):
        stacked, _ = _pair(n)
        step = xla_trace(_train_step)
        opt, gm = optim.SGD(stacked.parameters(), lr=0.1), GradManager().attach(stacked.parameters())
        step(_x(4, 6), net=stacked, opt=opt, gm=gm)
        sizes.append((count_ops(step.lowered.module), step.stablehlo_text.count("stablehlo.while")))
    assert sizes[0] == sizes[1]
    assert sizes[0][1] == 2  # the forward scan and the backward one


def test_state_dict_round_trip():
    stacked = nn.Stacked(Block, 3)
    _randomize(stacked)
    other = nn.Stacked(Block, 3)
    result = other.load_state_dict(stacked.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = _x(2, 6)
    np.testing.assert_array_equal(other(x).numpy(), stacked(x).numpy())
    with pytest.raises(HlotraceError, match=r"'ln.weight' has shape \(2, 6\) in the state dict but \(3, 6\)"):
        other.load_state_dict(nn.Stacked(Block, 2).state_dict())


def test_buffers_are_stacked_and_read_in_eval_mode():
    def make():
        return nn.Sequential(nn.BatchNorm2d(2), nn.ReLU())

    stacked, unrolled = _pair(2, make)
    for net in (stacked, unrolled):
        for b in net.buffers():
            if b.dtype == np.float32:  # the statistics; num_batches_tracked is an int64 count
                b._assign(ht.tensor(RNG.uniform(0.5, 1.5, b.shape).astype(np.float32)))
    state = stacked.state_dict()
    for i, block in enumerate(unrolled):
        block.load_state_dict({k: v[i] for k, v in state.items()})
    assert [(n, b.shape, b.dtype) for n, b in stacked.named_buffers()] == [
        ("0.running_mean", (2, 2), np.float32),
        ("0.running_var", (2, 2), np.float32),
        ("0.num_batches_tracked", (2,), np.int64),
    ]
    stacked.eval()
    unrolled.eval()
    x = _x(3, 2, 4, 4)
    np.testing.assert_allclose(stacked(x).numpy(), unrolled(x).numpy(), rtol=1e-5, atol=1e-6)
    compiled = xla_trace(lambda x, *, net: net(x))
    np.testing.assert_allclose(compiled(x, net=stacked).numpy(), unrolled(x).numpy(), rtol=1e-5, atol=1e-6)


def test_unroll_gives_the_same_result():
    stacked, unrolled = _pair(5, unroll=2)
    assert "unroll=2" in repr(stacked)
    x = _x(2, 6)
    compiled = xla_trace(lambda x, *, net: net(x))
    np.testing.assert_allclose(compiled(x, net=stacked).numpy(), unrolled(x).numpy(), rtol=1e-5, atol=1e-6)


def test_clear_errors():
    with pytest.raises(HlotraceError, match=rf"nn.Stacked: n=0: expected a positive int \(at .*{HERE}:\d+"):
        nn.Stacked(Block, 0)
    with pytest.raises(HlotraceError, match=rf"make_block must be a function .* got Block at .*{HERE}:\d+"):
        nn.Stacked(Block(), 2)
    sizes = iter([6, 6, 7])
    with pytest.raises(HlotraceError, match=r"'ln.weight' is float32\[7\] in block 2 but float32\[6\] in block 0"):
        nn.Stacked(lambda: Block(dim=next(sizes)), 3)
    one = Block()
    with pytest.raises(HlotraceError, match="returned the same module twice"):
        nn.Stacked(lambda: one, 2)
    with pytest.raises(
        OpError, match=rf"nn.Stacked: each block must return what it takes.*changes the carry.*at .*{HERE}:\d+"
    ):
        nn.Stacked(lambda: nn.Linear(6, 5), 2)(_x(2, 6))
    with pytest.raises(TraceError, match=rf"refuses random draws.*dropout in training mode.*{HERE}:\d+"):
        nn.Stacked(lambda: nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)), 2)(_x(2, 6))
    with pytest.raises(TraceError, match=rf"updates its buffer 'running_mean' of BatchNorm2d in place.*{HERE}:\d+"):
        nn.Stacked(lambda: nn.BatchNorm2d(2), 2)(_x(3, 2, 4, 4))
    with pytest.raises(HlotraceError, match=r"call the nn\.Stacked module instead"):
        nn.Stacked(Block, 2).fc1(_x(2, 6))
    # Dropout in eval mode is the identity, so an evaluated stack with dropout runs.
    stacked = nn.Stacked(lambda: nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)), 2).eval()
    assert stacked(_x(2, 6)).shape == (2, 6)


def test_the_transformer_example_with_stacked_layers_starts_as_the_sequential_one():
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "train_transformer.py")
    spec = importlib.util.spec_from_file_location("example_train_transformer_stacked", path)
    lm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lm)
    nets = []
    for stacked in (False, True):
        nn.init.seed(0)
        nets.append(lm.CopyLM(dim=16, heads=2, layers=2, stacked=stacked))
    sequential, scanned = (net.state_dict() for net in nets)
    assert scanned["blocks.attn.in_proj_weight"].shape == (2, 48, 16)
    for key, value in scanned.items():  # the same draws, in the same order
        if key.startswith("blocks."):
            rest = key[len("blocks.") :]
            value = [value[i] for i in range(2)]
            np.testing.assert_array_equal(value, [sequential[f"blocks.{i}.{rest}"] for i in range(2)])
        else:
            np.testing.assert_array_equal(value, sequential[key])
    seq = ht.tensor(lm.sequences(np.random.default_rng(0), 3)[:, :-1])
    np.testing.assert_allclose(nets[1](seq).numpy(), nets[0](seq).numpy(), rtol=1e-5, atol=1e-6)
