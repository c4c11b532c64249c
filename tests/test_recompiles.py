"""``HLOTRACE_EXPLAIN_RECOMPILES`` / ``xla_trace(explain_recompiles=True)`` (issue 20, part 4):
every compile after a function's first logs what differs from the nearest earlier signature."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace


def _step(x, net, opt, gm, scale=1.0):
    with gm:
        loss = F.mean(F.square(net(x))) * scale
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _world():
    nn.init.seed(0)
    net = nn.Linear(3, 2)
    return net, optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "hlotrace"]


def _x(rows=4):
    return ht.tensor(np.ones((rows, 3), np.float32))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda w, s: s(_x(5), *w), "args[0]: f32[4,3] -> f32[5,3]"),
        (lambda w, s: s(_x(), *w, scale=2.0), "scale: absent -> static value 2.0"),
        (lambda w, s: (w[0].eval(), s(_x(), *w)), "args[1] structure: Linear (True,) -> Linear (False,)"),
        (lambda w, s: s(_x().astype("float64"), *w), "args[0]: f32[4,3] -> f64[4,3]"),
        (
            lambda w, s: (w[1].param_groups[0].__setitem__("momentum", 0.9), s(_x(), *w)),
            "args[2] state: 6 tensors of 12 elements, .grad set on 0 -> 10 tensors of 22 elements",
        ),
    ],
)
def test_a_recompile_names_what_changed_and_where(change, expected, caplog):
    world = _world()
    step = xla_trace(_step, explain_recompiles=True)
    with caplog.at_level(logging.WARNING, logger="hlotrace"):
        step(_x(), *world)
        step(_x(), *world)
        assert _messages(caplog) == [], "no warning for the first compile or a cached call"
        change(world, step)
    (message,) = _messages(caplog)
    assert "_step compiles again (signature 2)" in message
    assert "test_recompiles.py" in message  # the user's call site
    assert expected in message


def test_the_environment_variable_enables_it(monkeypatch, caplog):
    world = _world()
    step = xla_trace(_step)
    with caplog.at_level(logging.WARNING, logger="hlotrace"):
        step(_x(), *world)
        step(_x(5), *world)
        assert _messages(caplog) == []
        monkeypatch.setenv("HLOTRACE_EXPLAIN_RECOMPILES", "1")
        step(_x(6), *world)
    (message,) = _messages(caplog)
    assert "f32[4,3] -> f32[6,3]" in message or "f32[5,3] -> f32[6,3]" in message


def test_aliasing_changes_are_named(caplog):
    @xla_trace(explain_recompiles=True)
    def add(a, b):  # in place: not a stateless function (those share one program either way)
        a += b
        return a

    x, y = _x(), _x()
    with caplog.at_level(logging.WARNING, logger="hlotrace"):
        add(x, y)
        add(x, x)
    (message,) = _messages(caplog)
    assert "aliasing: every argument tensor distinct -> args[1] is args[0]" in message
