"""One dispatcher: control-flow ops go through ``hlotrace.dispatch.apply`` like every op.

The active recorder (the protocol in hlotrace.recording) is handed every op application by
``apply`` and by nothing else, so a spy recorder sees every op, control flow included; the
autodiff tape holds the registered OpDef of a control-flow op, whose ``vjp`` is the op's
own VJP; several results come back from ``apply`` as a tuple."""

import sys

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
import hlotrace.ops.control_flow as control_flow
import hlotrace.ops.control_flow_grad as control_flow_grad
from hlotrace.autodiff import Tape, grad
from hlotrace.avals import Aval
from hlotrace.dispatch import apply
from hlotrace.errors import OpError
from hlotrace.ops import OPS
from hlotrace.ops.registry import ReverseModeRefused, is_differentiable
from hlotrace.recording import RECORDER
from hlotrace.regions import close, record
from hlotrace.trace import Trace


class SpyRecorder:
    """A Recorder (hlotrace.recording.Recorder) that computes eagerly and logs every op
    application it is handed, with how many results it had."""

    abstract = False

    def __init__(self):
        self.called_modules = {}
        self.table = Trace(name="spy")  # the regions recorded meanwhile put their vars here
        self.seen: list[tuple[str, int]] = []

    def var_of(self, tensor, used_by, location) -> int:
        return id(tensor)

    def add_constant(self, tensor) -> int:
        return id(tensor)

    def record(self, op, attrs, inputs, outputs, location) -> None:
        self.seen.append((op.name, len(outputs) if isinstance(outputs, tuple) else 1))

    def alias(self, tensor, same_as) -> None:
        pass

    def assign(self, tensor, value, location) -> None:
        pass


def _program(x):
    y = x + 1.0
    y = F.cond(F.sum(y) > 0, lambda v: v * 2.0, lambda v: -v, y)
    (h, k), ys = F.scan(lambda c, t: ((F.tanh(c[0] + t), c[1] + 1), c[0] * t), (y[0], ht.tensor(0)), y)
    n = F.while_loop(lambda c: c < 3, lambda c: c + 1, ht.tensor(0))
    return F.switch(n, [F.tanh, F.exp], h), ys, k


def _applied(fn, *args):
    """``fn(*args)`` and the name of the op of every call of ``hlotrace.dispatch.apply`` it
    made (a profile hook on apply's code: the dispatcher itself is not touched)."""
    names = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code is apply.__code__:
            names.append(frame.f_locals["op"].name)

    sys.setprofile(hook)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return out, names


def test_apply_sees_every_op_and_hands_it_to_the_recorder_control_flow_included():
    x = ht.tensor(np.linspace(-1.0, 1.0, 4))
    expected = [t.numpy() for t in _program(x)]
    spy = SpyRecorder()
    token = RECORDER.set(spy)
    try:
        out, applied = _applied(_program, x)
    finally:
        RECORDER.reset(token)
    recorded = [name for name, _ in spy.seen]
    # The recorder sees the program's own ops, control flow among them, in order (the ops of
    # the bodies are recorded into their regions, not here), each one applied by apply.
    assert [n for n in recorded if n in ("switch", "scan", "while_loop")] == ["switch", "scan", "while_loop", "switch"]
    assert recorded[0] == "add" and "greater" in recorded
    for name in set(recorded):
        assert applied.count(name) >= recorded.count(name), name
    # several results arrive as one application with all its outputs: h, k and ys
    assert ("scan", 3) in spy.seen
    for a, b in zip(expected, out, strict=True):
        np.testing.assert_array_equal(a, b.numpy())


def test_apply_sees_control_flow_eagerly_and_in_its_vjps():
    x = ht.tensor(np.array([0.5, -0.25]))

    def loss(x):
        h, ys = F.scan(lambda c, t: (F.tanh(c * t), c), x, F.stack([x, x]))
        return F.sum(F.cond(F.sum(h) > 0, lambda v: v * 2.0, lambda v: -v, h)) + F.sum(ys)

    _, applied = _applied(grad(loss), x)
    # forward scan and switch, the backward scan and switch of their VJPs
    assert applied.count("scan") >= 2 and applied.count("switch") >= 2


def test_the_dispatcher_is_the_only_entry_no_bind_no_side_table():
    assert not hasattr(control_flow, "bind")
    assert not hasattr(control_flow_grad, "VJPS")


def test_control_flow_vjps_are_on_the_opdefs():
    assert OPS["scan"].vjp is control_flow_grad.scan_vjp
    assert OPS["switch"].vjp is control_flow_grad.switch_vjp
    assert isinstance(OPS["while_loop"].vjp, ReverseModeRefused)
    assert is_differentiable(OPS["scan"]) and not is_differentiable(OPS["while_loop"])


def test_the_tape_holds_the_registered_control_flow_op():
    x = ht.tensor(np.array([0.5, -0.25]))
    tape = Tape()
    with tape:
        tape.watch(x)
        F.scan(lambda c, t: (F.tanh(c * t), c), x, F.stack([x, x, x]))
    scans = [node for node in tape.nodes if node.op.name == "scan"]
    assert len(scans) == 1 and scans[0].op is OPS["scan"]
    assert isinstance(scans[0].out, tuple) and len(scans[0].out) >= 2  # h, ys (and saved carries)


def _region(fn, avals):
    recorded = record(fn, (tuple, (None,) * len(avals)), avals, "a test body", None)
    (region,), captures = close([recorded])
    assert not captures
    return region


def test_apply_returns_a_tuple_for_several_results_and_a_tensor_for_one():
    a = Aval((3,), np.dtype("float64"))
    two = _region(lambda c, x: ((c + x,), c * x), [a, a])
    one = _region(lambda c, x: ((c + x,), ()), [a, a])
    c, xs = np.ones(3), np.arange(6.0).reshape(2, 3)
    attrs = {"num_carry": 1, "num_xs": 1, "length": 2, "reverse": False}
    out = apply(OPS["scan"], c, xs, body=two, **attrs)
    assert isinstance(out, tuple) and [t.shape for t in out] == [(3,), (2, 3)]
    np.testing.assert_array_equal(out[0].numpy(), c + xs.sum(0))
    single = apply(OPS["scan"], c, xs, body=one, **attrs)
    assert isinstance(single, ht.Tensor)
    np.testing.assert_array_equal(single.numpy(), out[0].numpy())


def test_a_bare_while_loop_op_under_grad_is_refused_where_it_ran():
    a = Aval((2,), np.dtype("float64"))
    cond = _region(lambda c: F.sum(F.abs(c)) < 10.0, [a])
    body = _region(lambda c: c * 2.0, [a])

    def loss(x):
        return F.sum(apply(OPS["while_loop"], x, cond=cond, body=body, num_carry=1))

    with pytest.raises(
        OpError, match=r"^while_loop: .*F.while_loop is not supported \(the op at .*test_control_flow_dispatch"
    ):
        grad(loss)(ht.tensor(np.ones(2)))
