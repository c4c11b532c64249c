"""Issue 36's target: a closure-style step (``net``, ``opt`` and ``gm`` closed over, no
arguments but the batch) trains identically to the argument style, compiled with
``xla_trace`` and with a ``partial_trace`` forward. The generated rows of every convention
and optimizer are in tests/test_calling_conventions.py (closure-*); this is README's
"Training" step, the two styles side by side, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.datasets import digits_split
from hlotrace.jit import partial_trace, xla_trace


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _model():
    nn.init.seed(7)
    net = MLP()
    return net, optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2), GradManager().attach(net.parameters())


def _argument_style(mode):
    net, opt, gm = _model()
    forward = partial_trace(lambda net, x: net(x)) if mode == "partial" else (lambda net, x: net(x))

    def train_step(data, label, *, net, opt, gm):
        with gm:
            loss = F.cross_entropy(forward(net, data), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    step = xla_trace(train_step) if mode == "xla" else train_step
    compiled = step if mode == "xla" else forward
    return net, opt, compiled, lambda x, y: step(x, y, net=net, opt=opt, gm=gm)


def _closure_style(mode):
    net, opt, gm = _model()
    forward = partial_trace(lambda x: net(x)) if mode == "partial" else (lambda x: net(x))

    def train_step(data, label):
        with gm:
            loss = F.cross_entropy(forward(data), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    step = xla_trace(train_step) if mode == "xla" else train_step
    return net, opt, step if mode == "xla" else forward, step


@pytest.mark.parametrize("mode", ["xla", "partial"])
def test_the_closure_style_trains_as_the_argument_style(mode):
    x_train, y_train, _, _ = digits_split()
    runs = []
    for style in (_argument_style, _closure_style):
        net, opt, compiled, call = style(mode)  # compiled: the xla_trace step, or the partial forward
        losses = []
        for i in range(4):
            if i == 2:
                opt.param_groups[0]["lr"] *= 0.5  # refreshed in both styles, no recompile
            batch = slice(32 * i, 32 * (i + 1))
            losses.append(float(call(ht.tensor(x_train[batch]), ht.tensor(y_train[batch])).numpy()))
        state = {name: p.numpy() for name, p in net.named_parameters()}
        state.update({f"opt.{k}": t.numpy() for k, t in enumerate(opt._trace_state()[1])})
        runs.append((losses, state, compiled.cache_size))
    (arg_losses, arg_state, arg_cache), (closure_losses, closure_state, closure_cache) = runs
    assert closure_losses == arg_losses
    assert sorted(closure_state) == sorted(arg_state)
    for name, value in arg_state.items():
        np.testing.assert_array_equal(closure_state[name], value, err_msg=name)
    assert closure_cache == arg_cache == 1  # the lr change recompiled neither
    assert not np.array_equal(closure_state["fc1.weight"], _model()[0].fc1.weight.numpy())  # it trained


def test_a_recompile_explanation_names_the_rebound_closure(caplog):
    net = _model()[0]

    @xla_trace(explain_recompiles=True)
    def predict(x):
        return net(x)

    x = ht.tensor(np.ones((2, 64), np.float32))
    predict(x)
    first = predict.describe_entries()
    assert "closed over[0]: MLP at" in first and "training" in first
    net = MLP()  # rebinding the closure variable: another entry, and the log says why
    with caplog.at_level("WARNING", logger="hlotrace"):
        predict(x)
    assert predict.cache_size == 2
    assert "closed over[0]: MLP at" in caplog.text and " -> MLP at" in caplog.text
