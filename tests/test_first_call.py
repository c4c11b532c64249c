"""``xla_trace(first_call="compiled")`` (issue 20, part 2): the first call records from shapes
and dtypes only, then runs the compiled program.

Generated from the registry: every op's samples recorded both ways give the same trace,
and the first call's result equals the eager-first function's compiled result bitwise
(hlotrace.testing.first_call). Plus training steps, random draws, state and errors."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import TraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.ops import OPS
from hlotrace.testing.check import property_test
from hlotrace.testing.first_call import check_first_call

EXAMPLES = 3  # per op: the trace comparison is what matters, and compiles dominate the time


@pytest.mark.parametrize("name", sorted(n for n in OPS if OPS[n].sample is not None))
def test_first_call_compiled_matches_eager_recording(name, hypothesis_base_seed):
    property_test(OPS[name], hypothesis_base_seed, None, checker=check_first_call, max_examples=EXAMPLES)()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn, self.fc1, self.drop, self.fc2 = nn.BatchNorm2d(4), nn.Linear(4, 8), nn.Dropout(0.25), nn.Linear(8, 3)

    def forward(self, x):
        # Batch norm first: a bias just before it would get a ~0 gradient, which Adam
        # normalizes into steps of pure rounding noise (NumPy and XLA round differently).
        x = F.reshape(self.bn(F.reshape(x, (*x.shape, 1, 1))), x.shape)
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def _train(first_call, steps=4, optimizer=optim.AdamW):
    nn.init.seed(0)
    ht.random.seed(7)
    net = Net()
    opt = optimizer(net.parameters(), lr=0.01)
    gm = GradManager().attach(net.parameters(), callbacks=[lambda p, g: g * 0.5])

    @xla_trace(first_call=first_call)
    def step(x, y, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = ht.tensor(rng.standard_normal((6, 4)).astype(np.float32))
        y = ht.tensor(rng.integers(0, 3, 6).astype(np.int32))
        losses.append(float(step(x, y, net, opt, gm).numpy()))
    state = {k: v for k, v in net.state_dict().items()}
    state.update({f"opt.{k}": v for k, v in enumerate(t.numpy() for t in opt._trace_state()[1])})
    return losses, state, ht.random.get_state().numpy(), step


@pytest.mark.parametrize("optimizer", [optim.AdamW, optim.SGD])
def test_a_training_step_trains_the_same_both_ways(optimizer):
    """Parameters, batch-norm statistics, optimizer state, the dropout key: equal within the
    tolerance of NumPy vs XLA for the first step (it ran in NumPy eagerly, compiled here)."""
    eager_losses, eager_state, eager_key, _ = _train("eager", optimizer=optimizer)
    losses, state, key, step = _train("compiled", optimizer=optimizer)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for name in eager_state:
        np.testing.assert_allclose(state[name], eager_state[name], rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_array_equal(key, eager_key)  # the key advances exactly as eagerly
    assert step.cache_size == 1


def test_reading_a_value_while_recording_is_a_clear_error():
    @xla_trace(first_call="compiled")
    def f(x):
        y = x * 2
        return y + float(y.numpy().sum())

    with pytest.raises(TraceError, match=r"no value while recording with first_call='compiled'.*first_call='eager'"):
        f(ht.tensor(np.ones(3, np.float32)))


def test_a_failed_recording_leaves_state_untouched():
    nn.init.seed(0)
    net = nn.Linear(3, 2)
    opt, gm = optim.SGD(net.parameters(), lr=0.1, momentum=0.9), GradManager().attach(net.parameters())
    before = [p.numpy().copy() for p in net.parameters()]

    @xla_trace(first_call="compiled")
    def step(x, net, opt, gm):
        with gm:
            gm.backward(F.sum(net(x)))
        opt.step()
        raise RuntimeError("after the update")

    with pytest.raises(RuntimeError):
        step(ht.tensor(np.ones((2, 3), np.float32)), net, opt, gm)
    for p, b in zip(net.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b)
        assert p.grad is None


def test_the_environment_variable_and_bad_values(monkeypatch):
    with pytest.raises(TraceError, match="first_call must be 'eager' or 'compiled'"):
        xla_trace(lambda x: x, first_call="lazy")
    monkeypatch.setenv("HLOTRACE_FIRST_CALL", "compiled")
    calls = []

    @xla_trace
    def f(x):
        calls.append(type(x._host).__name__)
        return x + 1

    np.testing.assert_array_equal(f(ht.tensor(np.zeros(2, np.float32))).numpy(), [1.0, 1.0])
    assert calls == ["ndarray"]  # inputs keep their values; the ops inside have none
    monkeypatch.setenv("HLOTRACE_FIRST_CALL", "sometimes")
    with pytest.raises(TraceError, match="HLOTRACE_FIRST_CALL"):
        f(ht.tensor(np.zeros(3, np.float32)))


def test_partial_trace_first_call_compiled():
    nn.init.seed(0)
    results = []
    for first_call in ("eager", "compiled"):
        nn.init.seed(0)
        net = nn.Linear(3, 2)
        gm = GradManager().attach(net.parameters())
        backbone = partial_trace(lambda net, x: F.tanh(net(x)), first_call=first_call)
        with gm:
            loss = F.sum(backbone(net, ht.tensor(np.ones((4, 3), np.float32))))
            gm.backward(loss)
        results.append([p.grad.numpy() for p in net.parameters()])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
