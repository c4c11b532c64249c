"""A failed call loses nothing (issue 18, part 3).

Generated: fault x how the state is passed (as holders, as arguments, closed over). Each fault strikes a compiled training step
(dropout, so the default generator's key is state too; AdamW, so there is optimizer
state; a ``.grad`` left set on one parameter, so gradients are state) and must leave every
parameter, optimizer state tensor, ``.grad`` (object and value) and the random key exactly
as before the call; the next call must work and train as an undisturbed run does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.dispatch import apply
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace
from hlotrace.lowering.registry import RULES, rule
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op
from hlotrace.runtime.jaxlib_compat import stablehlo


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(4, 8), nn.Dropout(0.25), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.drop(F.tanh(self.fc1(x))))


class World:
    def __init__(self):
        nn.init.seed(5)
        ht.random.seed(11)
        self.net = Net()
        self.opt = optim.AdamW(self.net.parameters(), lr=0.01)
        self.gm = GradManager().attach(self.net.parameters())
        # A gradient left from an earlier backward (the optimizer steps fc1 and fc2 alike,
        # but this one is accumulated into by the next backward).
        self.net.fc2.bias.grad = ht.tensor(np.full(2, 0.5, "float32"))

    def everything(self) -> dict:
        """Every value a step may touch, plus the identity of each .grad object."""
        out = {}
        for name, p in self.net.named_parameters():
            out[name] = p.numpy().copy()
            out[f"{name}.grad"] = None if p.grad is None else (id(p.grad), p.grad.numpy().copy())
        for k, t in enumerate(self.opt._trace_state()[1]):
            out[f"opt.{k}"] = t.numpy().copy()
        out["random key"] = ht.random.get_state().numpy().copy()
        return out


def _assert_same(after: dict, before: dict) -> None:
    assert sorted(after) == sorted(before)
    for name, value in before.items():
        if isinstance(value, tuple) or value is None:
            assert (after[name] is None) == (value is None), name
            if value is not None:
                assert after[name][0] == value[0], f"{name}: another .grad object"
                np.testing.assert_array_equal(after[name][1], value[1], err_msg=name)
        else:
            np.testing.assert_array_equal(after[name], value, err_msg=name)


def _batch(i, features=4, dtype="float32"):
    rng = np.random.default_rng(i)
    return ht.tensor(rng.standard_normal((6, features)).astype(dtype))


def _train(gm, opt, loss):
    gm.backward(loss)
    opt.step().clear_grad()


# How the state reaches the step: (step body -> traced function, call).
def holders_convention(body):
    def step(x, net, gm, opt):
        with gm:
            return body(x, net, gm, opt)

    return step, lambda f, w, x: f(x, w.net, w.gm, w.opt)


def arguments_convention(body):
    def step(x, params, net, gm, opt):  # the parameters as arguments and through net/gm/opt
        assert params[0] is net.fc1.weight
        with gm:
            return body(x, net, gm, opt)

    return step, lambda f, w, x: f(x, list(w.net.parameters()), w.net, w.gm, w.opt)


_CLOSED: dict = {}  # the World a closure-style step reaches (set by its call)


def closure_convention(body):
    def step(x):  # net, gm and opt closed over (through a global, as a script's loop does)
        w = _CLOSED["world"]
        with w.gm:
            return body(x, w.net, w.gm, w.opt)

    def call(f, w, x):
        _CLOSED["world"] = w
        return f(x)

    return step, call


CONVENTIONS = {"holders": holders_convention, "arguments": arguments_convention, "closure": closure_convention}


def normal_body(x, net, gm, opt):
    loss = F.mean(F.square(net(x)))
    _train(gm, opt, loss)
    return loss


class UserCodeFailed(Exception):
    pass


def raising_after_backward(x, net, gm, opt):
    loss = F.mean(F.square(net(x)))
    _train(gm, opt, loss)  # parameters, optimizer state, grads and the key all moved
    raise UserCodeFailed("user code failed after gm.backward and opt.step")


def interrupted(x, net, gm, opt):
    loss = F.mean(F.square(net(x)))
    gm.backward(loss)
    raise KeyboardInterrupt  # Ctrl-C while the first call records


@pytest.fixture
def rejected_by_xla():
    """A user op whose rule emits a custom call XLA has no implementation for."""
    name = "test_rejected_by_xla"
    op = register_op(
        OpDef(
            name=name,
            family="user",
            reference=lambda x: x,
            infer=lambda x: Aval(x.shape, x.dtype),
            vjp=lambda ct, out, x: (ct,),
        )
    )

    @rule(name)
    def _rejected(ctx, x):
        return stablehlo.CustomCallOp([x.type], [x], "hlotrace_test_no_such_target").result

    yield op
    OPS.pop(name)
    RULES.pop(name)


FAULTS = ["exception-after-backward", "keyboard-interrupt", "compile-failure", "bad-later-argument"]


def failing_step(fault: str, wrap, request):
    """(the traced step that fails with ``fault``, the exception it raises) for the faults
    that strike inside a call: an exception after backward, Ctrl-C, a compile failure."""
    if fault == "exception-after-backward":
        return xla_trace(wrap(raising_after_backward)[0]), UserCodeFailed
    if fault == "keyboard-interrupt":
        return xla_trace(wrap(interrupted)[0]), KeyboardInterrupt
    op = request.getfixturevalue("rejected_by_xla")

    def rejected_body(x, net, gm, opt):
        loss = F.mean(F.square(apply(op, net(x))))
        _train(gm, opt, loss)
        return loss

    return xla_trace(wrap(rejected_body)[0]), Exception


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("fault", FAULTS)
def test_a_failed_call_leaves_every_tensor_as_it_was(fault, convention, request):
    wrap = CONVENTIONS[convention]
    good, call = wrap(normal_body)
    good = xla_trace(good)
    # Two good calls first (record, then compiled) when the fault is a bad later argument.
    warmup = (0, 1) if fault == "bad-later-argument" else ()
    world = World()
    for i in warmup:
        call(good, world, _batch(i))
    before = world.everything()
    if fault == "bad-later-argument":
        # Another dtype and feature count: records again and fails inside matmul.
        with pytest.raises(HlotraceError, match="matmul"):
            call(good, world, _batch(2, features=3, dtype="float64"))
    else:
        failing, expected = failing_step(fault, wrap, request)
        with pytest.raises(expected) as info:
            call(failing, world, _batch(0))
        if fault == "compile-failure":
            assert "hlotrace_test_no_such_target" in str(info.value)
    _assert_same(world.everything(), before)
    # The next calls work and train exactly as a run that never saw the fault (the same
    # steps from the same state: the default generator is reseeded by World()).
    for i in (5, 6):
        call(good, world, _batch(i))
    after_fault = world.everything()
    reference = World()
    reference_step = xla_trace(wrap(normal_body)[0])
    for i in warmup:
        call(reference_step, reference, _batch(i))
    for i in (5, 6):
        call(reference_step, reference, _batch(i))
    _assert_same_values(after_fault, reference.everything())


def _assert_same_values(a: dict, b: dict) -> None:
    for name in b:
        if isinstance(b[name], tuple) or b[name] is None:
            assert (a[name] is None) == (b[name] is None), name
            if b[name] is not None:
                np.testing.assert_array_equal(a[name][1], b[name][1], err_msg=name)
        else:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import hlotrace as ht

    path = sys.argv[1]
    big = {"w%d" % i: np.full((1024, 1024), float(i), np.float32) for i in range(64)}  # 256 MiB
    print("writing", flush=True)
    while True:
        ht.save(big, path)
    """
)


def test_an_interrupted_save_leaves_the_previous_file_intact(tmp_path):
    path = tmp_path / "ckpt.npz"
    previous = {"step": 3, "w": np.arange(12, dtype=np.float32).reshape(3, 4)}
    ht.save(previous, path)
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, env={**os.environ, "JAX_PLATFORMS": "cpu"}
    )
    try:
        assert writer.stdout.readline().strip() == b"writing"
        # Kill it while the first big checkpoint is being written (a temporary file exists).
        deadline = time.monotonic() + 60
        while not any(name.startswith("ckpt.npz.tmp") for name in os.listdir(tmp_path)):
            assert time.monotonic() < deadline, "the writer never started its temporary file"
            time.sleep(0.001)
        time.sleep(0.02)  # mid-write: a 256 MiB archive takes far longer than this
        writer.send_signal(signal.SIGKILL)
    finally:
        writer.wait(timeout=60)
    loaded = ht.load(path)
    assert loaded["step"] == 3
    np.testing.assert_array_equal(loaded["w"], previous["w"])
