"""BatchNorm's state as PyTorch has it (issue 36): the int64 ``num_batches_tracked`` buffer,
counted by training forwards eagerly and in compiled steps, ``momentum=None`` (the cumulative
average), and ``state_dict()`` keys in PyTorch's order."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace
from hlotrace.serialization import load_safetensors, save_safetensors

RNG = np.random.default_rng(36)


class ConvBNLinear(nn.Module):
    """A conv + BN + linear net with an own parameter and buffer assigned *after* the children:
    PyTorch lists a module's own entries before its children's, whatever the assignment order."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
        self.scale = ht.Parameter(np.ones((), np.float32))
        self.register_buffer("seen", ht.tensor(np.zeros((), np.int32)))
        self.register_buffer("cache", ht.tensor(np.zeros(2, np.float32)), persistent=False)

    def forward(self, x):
        return self.head(F.relu(self.bn(self.conv(x)))) * self.scale


# What torch.nn's state_dict() of the same model lists, written out by hand.
PYTORCH_KEYS = [
    "scale",
    "seen",
    "conv.weight",
    "conv.bias",
    "bn.weight",
    "bn.bias",
    "bn.running_mean",
    "bn.running_var",
    "bn.num_batches_tracked",
    "head.1.weight",
    "head.1.bias",
]


def _x(*shape):
    return ht.tensor(RNG.standard_normal(shape).astype(np.float32))


def test_state_dict_keys_are_pytorchs_in_pytorchs_order():
    net = ConvBNLinear()
    assert list(net.state_dict()) == PYTORCH_KEYS
    assert list(nn.torch_state_dict(net)) == PYTORCH_KEYS
    counter = net.state_dict()["bn.num_batches_tracked"]
    assert counter.dtype == np.int64 and counter.shape == () and int(counter) == 0
    # named_parameters keeps assignment order (documented); only state_dict reorders
    assert [n for n, _ in net.named_parameters()][-1] == "scale"
    # a round trip through load_state_dict, in place, values and dtypes kept
    state = {k: (v + 2 if v.dtype != np.float32 else v * 0.5) for k, v in net.state_dict().items()}
    other = ConvBNLinear()
    assert other.load_state_dict(state) == nn.IncompatibleKeys([], [])
    for key, value in other.state_dict().items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)
        assert value.dtype == state[key].dtype


def test_bn_buffers_and_modes():
    bn = nn.BatchNorm2d(3)
    assert [(n, b.dtype, b.shape) for n, b in bn.named_buffers()] == [
        ("running_mean", np.float32, (3,)),
        ("running_var", np.float32, (3,)),
        ("num_batches_tracked", np.int64, ()),
    ]
    x = _x(4, 3, 2, 2)
    bn(x)
    bn(x)
    assert int(bn.num_batches_tracked.numpy()) == 2
    bn.eval()
    bn(x)
    assert int(bn.num_batches_tracked.numpy()) == 2  # eval mode counts nothing
    untracked = nn.BatchNorm1d(3, track_running_stats=False)
    assert list(untracked.state_dict()) == ["weight", "bias"]
    untracked(_x(4, 3))
    assert "momentum=None" in repr(nn.BatchNorm1d(3, momentum=None))


def test_a_checkpoint_without_the_counter_loads_with_zero():
    """PyTorch fills ``num_batches_tracked`` with 0 for a checkpoint that predates it."""
    bn = nn.BatchNorm1d(3)
    bn(_x(5, 3))
    old = {k: v for k, v in nn.BatchNorm1d(3).state_dict().items() if k != "num_batches_tracked"}
    assert bn.load_state_dict(old) == nn.IncompatibleKeys([], [])
    assert int(bn.num_batches_tracked.numpy()) == 0
    assert nn.load_torch_state_dict(bn, old) == nn.IncompatibleKeys([], [])
    # a state dict that holds nothing of the BatchNorm fills nothing: its keys are missing
    net = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    result = net.load_state_dict({"0.weight": np.zeros((3, 3), np.float32)}, strict=False)
    assert "1.num_batches_tracked" in result.missing_keys


def _train(compiled: bool, steps: int, momentum):
    ht.random.seed(0)
    net = ConvBNLinear()
    net.bn.momentum = momentum
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gm = GradManager().attach(net.parameters())

    def step(x, y, *, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    run = xla_trace(step, first_call="compiled") if compiled else step
    data = np.random.default_rng(1)
    for _ in range(steps):
        x = ht.tensor(data.standard_normal((6, 3, 4, 4)).astype(np.float32))
        y = ht.tensor(data.integers(0, 5, 6).astype(np.int32))
        run(x, y, net=net, opt=opt, gm=gm)
    return net


@pytest.mark.parametrize("momentum", [0.9, None], ids=["momentum", "cumulative"])
def test_the_counter_is_a_compiled_steps_state_like_the_statistics(momentum):
    eager, compiled = _train(False, 3, momentum), _train(True, 3, momentum)
    assert int(eager.bn.num_batches_tracked.numpy()) == int(compiled.bn.num_batches_tracked.numpy()) == 3
    assert compiled.bn.num_batches_tracked.dtype == np.int64
    for key, value in eager.state_dict().items():
        np.testing.assert_allclose(compiled.state_dict()[key], value, rtol=2e-5, atol=2e-6, err_msg=key)


def test_momentum_none_is_the_cumulative_average():
    """PyTorch's ``momentum=None``: after n batches the running statistics are the plain mean
    of the n batch means and unbiased batch variances (from the initial 0 / 1, the first batch
    replaces them), eagerly and in a compiled step whose factor 1/n changes without recompiling."""
    batches = [RNG.standard_normal((5, 3, 2)).astype(np.float32) * (i + 1) + i for i in range(4)]
    means = [b.mean(axis=(0, 2)) for b in batches]
    variances = [b.var(axis=(0, 2), ddof=1) for b in batches]
    eager, compiled = nn.BatchNorm1d(3, momentum=None), nn.BatchNorm1d(3, momentum=None)
    forward = xla_trace(lambda x, *, net: net(x))
    for n, batch in enumerate(batches, start=1):
        y = eager(ht.tensor(batch))
        forward(ht.tensor(batch), net=compiled)
        expected_mean = np.mean(means[:n], axis=0)
        expected_var = np.mean(variances[:n], axis=0)
        for bn in (eager, compiled):
            np.testing.assert_allclose(bn.running_mean.numpy(), expected_mean, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(bn.running_var.numpy(), expected_var, rtol=1e-5, atol=1e-6)
            assert int(bn.num_batches_tracked.numpy()) == n
        # normalized with the batch statistics (biased variance), as with a number momentum
        mean, var = batch.mean(axis=(0, 2), keepdims=True), batch.var(axis=(0, 2), keepdims=True)
        np.testing.assert_allclose(y.numpy(), (batch - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    assert forward.cache_size == 1
    eager.eval()
    x = batches[0]
    expected = (x - expected_mean[:, None]) / np.sqrt(expected_var[:, None] + 1e-5)
    np.testing.assert_allclose(eager(ht.tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_bad_momentum_is_refused():
    with pytest.raises(ht.errors.HlotraceError, match="momentum"):
        nn.BatchNorm2d(3, momentum=1.5)


def test_the_counter_round_trips_through_hlotraces_own_safetensors_writer(tmp_path):
    net = ConvBNLinear()
    net.bn(_x(4, 4, 4, 4))
    save_safetensors(nn.torch_state_dict(net), tmp_path / "net.safetensors")
    other = ConvBNLinear()
    assert nn.load_torch_state_dict(other, tmp_path / "net.safetensors") == nn.IncompatibleKeys([], [])
    assert int(other.bn.num_batches_tracked.numpy()) == 1
    assert load_safetensors(tmp_path / "net.safetensors")["bn.num_batches_tracked"].shape == ()
