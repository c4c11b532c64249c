"""The per-call path of a compiled step (issue 20, part 1): the holders' state is re-derived
only when something structural changed (hlotrace.versions), and a call returns as soon as
the executable is enqueued (no host synchronisation)."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(self.drop(F.tanh(self.fc1(x))))


def _world(opt_class=optim.SGD, subset=False, **kwargs):
    nn.init.seed(1)
    ht.random.seed(2)  # dropout: eager and compiled runs draw the same masks
    net = Net()
    params = [net.fc1.weight, net.fc1.bias, net.fc2.weight] if subset else list(net.parameters())
    opt = opt_class(params, **({"lr": 0.1} | kwargs))
    return net, opt, GradManager().attach(net.parameters())


def _step(x, net, opt, gm):
    with gm:
        loss = F.mean(F.square(net(x)))
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


X = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)


def _eager_reference(mutate, calls=4, **kwargs):
    """Parameters after ``calls`` eager steps with ``mutate(i, net, opt, gm)`` before each."""
    net, opt, gm = _world(**kwargs)
    for i in range(calls):
        mutate(i, net, opt, gm)
        _step(ht.tensor(X), net, opt, gm)
    return [p.numpy().copy() for p in net.parameters()]


def _compiled(mutate, calls=4, **kwargs):
    net, opt, gm = _world(**kwargs)
    step = xla_trace(_step)
    for i in range(calls):
        mutate(i, net, opt, gm)
        step(ht.tensor(X), net, opt, gm)
    return [p.numpy().copy() for p in net.parameters()], step


def test_steady_calls_do_not_walk_the_holders(monkeypatch):
    net, opt, gm = _world(optim.AdamW)
    step = xla_trace(_step)
    x = ht.tensor(X)
    step(x, net, opt, gm)
    step(x, net, opt, gm)
    walks = []
    for holder in (nn.Module, optim.Optimizer, GradManager):
        original = holder._trace_state
        monkeypatch.setattr(holder, "_trace_state", lambda self, o=original: walks.append(self) or o(self))
    for _ in range(20):
        step(x, net, opt, gm)
    assert walks == [], "a steady call re-collected the holders' state"
    opt.param_groups[0]["lr"] = 0.05  # a value change: the optimizer refreshes its hyper tensors only
    step(x, net, opt, gm)
    assert walks == []
    net.fc1.weight = ht.Parameter(net.fc1.weight.numpy() * 0.5)  # structural: collected again
    step(x, net, opt, gm)
    assert walks, "a replaced parameter went unnoticed"


def _replace_parameter(i, net, opt, gm):
    if i == 2:
        old = net.fc1.weight
        net.fc1.weight = ht.Parameter(old.numpy() + 1.0)
        # The optimizer and GradManager are told about the new parameter, as a user would.
        opt.param_groups[0]["params"][0] = net.fc1.weight
        opt.state[net.fc1.weight] = opt.state.pop(old)
        gm._attached[0] = net.fc1.weight
        gm._callbacks[id(net.fc1.weight)] = gm._callbacks.pop(id(old))
        gm.attach([])


def _change_lr(i, net, opt, gm):
    opt.param_groups[0]["lr"] = 0.1 / (i + 1)


def _add_group(i, net, opt, gm):
    if i == 1:
        extra = ht.Parameter(np.ones(2, np.float32))
        net.extra = extra
        gm.attach([extra])
        opt.add_param_group({"params": [extra], "lr": 0.5})


def _set_grad(i, net, opt, gm):
    if i == 2:
        net.fc2.bias.grad = ht.tensor(np.full(2, 3.0, np.float32))  # accumulated into by backward


def _swap_optimized_parameter(i, net, opt, gm):
    # After a steady compiled call (the third), the optimizer steps fc2.bias instead of
    # fc1.bias: nothing but the group's params list changes.
    if i == 3:
        group = opt.param_groups[0]["params"]
        old, new = net.fc1.bias, net.fc2.bias
        group[next(k for k, p in enumerate(group) if p is old)] = new
        opt.state[new] = opt.state.pop(old)


def _replace_group_then_change_lr(i, net, opt, gm):
    if i == 1:
        opt.param_groups[0] = dict(opt.param_groups[0], lr=0.05)  # a plain dict put in by hand
    if i == 3:
        opt.param_groups[0]["lr"] = 0.2  # ... whose later changes are seen too


def _eval_then_train(i, net, opt, gm):
    net.train(i % 2 == 0)


def _momentum_switched_on(i, net, opt, gm):
    if i == 2:
        opt.param_groups[0]["momentum"] = 0.9  # new optimizer state on the next step


@pytest.mark.parametrize(
    ("mutate", "compiles"),
    [
        (_replace_parameter, 1),  # same shapes: same program, new inputs
        (_change_lr, 1),  # a hyper tensor's value: no recompile
        (_swap_optimized_parameter, 3),  # fc2.bias's .grad (never cleared), then which tensor opt owns
        (_add_group, 2),
        (_set_grad, 2),  # the grad is an input on one call only (another signature)
        (_eval_then_train, 2),
        (_replace_group_then_change_lr, 1),
        (_momentum_switched_on, 2),
    ],
)
def test_structural_changes_between_calls_are_seen(mutate, compiles):
    kwargs = {"subset": True} if mutate is _swap_optimized_parameter else {}
    expected = _eager_reference(mutate, **kwargs)
    actual, step = _compiled(mutate, **kwargs)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
    assert step.cache_size == compiles


def test_a_call_returns_before_its_result_is_computed():
    """No host synchronisation in the call path: calls are enqueued (checked on outputs
    that are not ready yet, never on wall time)."""

    @xla_trace
    def heavy(x):
        for _ in range(6):
            x = F.tanh(F.matmul(x, x))
        return x

    x = ht.tensor(np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32) * 0.05)
    heavy(x)
    heavy(x).block_until_ready()
    outs = [heavy(x) for _ in range(100)]
    pending = sum(not out._device.is_ready() for out in outs)
    assert pending > 0, "every call had finished when it returned: the call path waits for results"
    assert outs[-1].block_until_ready() is outs[-1]
    assert all(out._device.is_ready() for out in outs)


def test_a_training_step_returns_before_its_result_is_computed():
    nn.init.seed(0)
    net = nn.Linear(384, 384)
    opt, gm = optim.SGD(net.parameters(), lr=1e-3), GradManager().attach(net.parameters())
    x = ht.tensor(np.random.default_rng(1).standard_normal((384, 384)).astype(np.float32))
    step = xla_trace(_step)
    step(x, net, opt, gm)
    step(x, net, opt, gm).block_until_ready()
    losses = [step(x, net, opt, gm) for _ in range(50)]
    assert sum(not loss._device.is_ready() for loss in losses) > 0
    losses[-1].block_until_ready()
