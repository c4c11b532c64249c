"""The eager-device oracle (issue 35): each program also runs eagerly under the device
engine and is compared with the compiled module (bitwise for elementwise outputs, else
within the tolerance) and with eager NumPy; a wrong engine is an engine bug, found,
shrunk, saved and replayed."""

from __future__ import annotations

import glob

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace.engines.device import DeviceEngine
from hlotrace.jit import xla_trace
from hlotrace.tensor import Tensor
from hlotrace.testing.fuzz import eager_device
from hlotrace.testing.fuzz.oracles import ENGINE_BUG, Oracles, check
from hlotrace.testing.fuzz.program import Program
from hlotrace.tools.cli import main

ALL = Oracles(passes=(), eager_device="all")


def _program(fn, *arrays) -> Program:
    traced = xla_trace(fn, passes="")
    traced(*[ht.tensor(a) for a in arrays])
    return Program(traced.trace, [np.asarray(a) for a in arrays])


def _x():
    return np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 4.0]], np.float32)


def _elementwise():  # output 0: elementwise ops only (compared bitwise); 1: exp and a reduction (tolerance)
    return _program(lambda x: (F.abs(x) * 3.0 - x, F.sum(F.exp(x), axis=1)), _x())


@pytest.fixture
def wrong_engine(monkeypatch):
    """The device engine, with an op's results changed: ``change[name] = fn(array)`` (set by the test)."""
    original = DeviceEngine.__call__
    change = {}

    def call(self, op, attrs, tensors, out_aval, key=None):
        out = original(self, op, attrs, tensors, out_aval, key)
        if op.name in change:
            return Tensor._from_array(change[op.name](np.asarray(out.numpy())))
        return out

    monkeypatch.setattr(DeviceEngine, "__call__", call)
    return change


def test_it_runs_and_a_correct_engine_agrees():
    verdict = check(_elementwise(), ALL)
    assert verdict.findings == [] and "eager-device" not in verdict.skipped, verdict


@pytest.mark.parametrize(
    "name, change, outputs, how",
    [
        ("exp", lambda a: a * 1.5, {1}, "compiled module agrees with eager"),  # far off: NumPy's tolerance
        ("multiply", lambda a: np.nextafter(a, np.inf), {0}, "bitwise vs the compiled module"),  # one ulp
    ],
    ids=["off-by-half", "one-ulp"],
)
def test_a_wrong_engine_is_an_engine_bug(wrong_engine, name, change, outputs, how):
    wrong_engine[name] = change
    verdict = check(_elementwise(), ALL)
    found = {f.output for f in verdict.findings if (f.kind, f.oracle) == (ENGINE_BUG, "eager-device")}
    assert found == outputs and all(f.oracle == "eager-device" for f in verdict.findings), verdict.findings
    assert any(how in f.evidence for f in verdict.findings), verdict.findings


def test_a_wrong_rule_is_the_compiled_oracles_finding_only(wrong_minimum):
    """The engine builds its executables from the same rule: the rule bug is reported once."""
    verdict = check(_program(lambda x, y: F.minimum(x, y), _x(), -_x()), ALL)
    assert [(f.kind, f.oracle) for f in verdict.findings] == [("rule bug", "compiled")], verdict.findings


def test_which_programs_it_runs_on():
    def chain(x):
        for _ in range(eager_device.SHORT_RECORDS):
            x = F.tanh(x) * 0.5
        return x

    small, large = _elementwise(), _program(chain, _x())
    assert len(large.trace.records) > eager_device.SHORT_RECORDS >= len(small.trace.records)
    assert Oracles().eager_device == "short"  # on by default, in its short form
    assert eager_device.runs_on(small, "short") is None
    assert eager_device.runs_on(small, "short", rotate=eager_device.SHORT_EVERY) is None
    assert "one program in" in eager_device.runs_on(small, "short", rotate=1)
    assert "more than" in eager_device.runs_on(large, "short")
    assert eager_device.runs_on(large, "all") is None
    assert "not asked for" in eager_device.runs_on(small, "off")
    assert "eager-device" in check(large, Oracles(passes=())).skipped


def test_a_fuzzing_session_finds_shrinks_saves_and_replays_it(wrong_engine, tmp_path, capsys):
    wrong_engine["exp"] = lambda a: a * 1.5
    out = tmp_path / "out"
    argv = ["fuzz", "--programs", "4", "--jobs", "1", "--ops", "exp,add", "--no-interpreter", "--passes", ""]
    status = main([*argv, "--max-ops", "4", "--eager-device", "all", "--out", str(out), "--stop-on-bug"])
    report = capsys.readouterr().out
    assert status == 1, report
    (saved,) = glob.glob(str(out / "engine-bug-*.trace.json"))
    assert main(["replay", saved, "--no-interpreter", "--passes", ""]) == 1  # reproduces with the wrong engine
    wrong_engine.clear()
    capsys.readouterr()
    assert main(["replay", saved, "--no-interpreter", "--passes", ""]) == 0  # and not with the real one
    assert "the saved engine bug [eager-device] does not reproduce" in capsys.readouterr().out


def test_a_subnormal_constant_flushed_at_run_time_is_an_xla_disagreement():
    """Fuzzer (seed 1232821024, session seed 15): log(c) - log(c) with c = 1.1754942e-38, a
    captured subnormal: NaN on the engine (XLA:CPU flushes c to 0 at run time: -inf - -inf),
    0 compiled (XLA folded the constant without flushing) and 0 in NumPy. The engine's value is
    NumPy's on the flushed input: an XLA disagreement, not an engine bug."""
    c = ht.tensor(np.array([2.0, 1.1754942106924411e-38], np.float32))
    traced = xla_trace(lambda x: (F.log(c) - F.log(c)) + x * 0.0, capture_as_const=True)
    x = np.zeros(2, np.float32)
    traced(ht.tensor(x))
    findings = check(Program(traced.trace, [x]), ALL).findings
    assert ENGINE_BUG not in [f.kind for f in findings], [str(f) for f in findings]
    assert any("subnormals flushed" in f.evidence for f in findings), [str(f) for f in findings]
