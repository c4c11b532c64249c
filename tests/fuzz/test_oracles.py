"""Each oracle and the classification: planted rule and pass bugs are found and named,
an op's declared domain makes a disagreement an undefined input, the interpreter runs in its
own process and decides between XLA and the rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace.jit import xla_trace
from hlotrace.testing.fuzz.evaluate import outputs
from hlotrace.testing.fuzz.interpreter import Interpreter, unsupported_reason
from hlotrace.testing.fuzz.oracles import (
    PASS_BUG,
    RULE_BUG,
    UNDEFINED_INPUT,
    XLA_DISAGREEMENT,
    Oracles,
    check,
    output_tolerance,
)
from hlotrace.testing.fuzz.program import Program


def _program(fn, *arrays) -> Program:
    traced = xla_trace(fn, passes="")
    traced(*[ht.tensor(a) for a in arrays])
    return Program(traced.trace, [np.asarray(a) for a in arrays])


def _x():
    return np.array([[1.5, -2.0, 0.25], [3.0, -0.5, 4.0]], np.float32)


def test_a_correct_program_has_no_findings():
    program = _program(lambda x, y: F.exp(F.minimum(x, y)) * 2.0 + F.sum(x, axis=1, keepdims=True), _x(), -_x())
    verdict = check(program, Oracles())
    assert verdict.findings == [] and verdict.compiles >= 2


def test_a_wrong_rule_is_a_rule_bug(wrong_minimum):
    program = _program(lambda x, y: F.minimum(x, y) + 1.0, _x(), -_x())
    (finding,) = check(program, Oracles(passes=())).findings
    assert (finding.kind, finding.oracle, finding.output) == (RULE_BUG, "compiled", 0)
    assert "elements differ" in finding.evidence


def test_a_pass_that_changes_bits_is_a_pass_bug_named_by_the_pass(inexact_pass):
    program = _program(lambda x, y: x * y - 1.0, _x(), _x())
    verdict = check(program, Oracles(passes=("cse", inexact_pass)))
    assert [(f.kind, f.oracle) for f in verdict.findings] == [(PASS_BUG, f"pass:{inexact_pass}")]
    assert "exact pass changed bits" in verdict.findings[0].evidence


class _AgreeingInterpreter:
    """A stand-in for the interpreter whose StableHLO semantics match eager NumPy."""

    def __init__(self, program):
        self.program = program

    def run(self, module_text, inputs):
        return outputs(self.program.trace, inputs)


def test_the_interpreter_siding_with_eager_makes_it_an_xla_disagreement(wrong_minimum):
    program = _program(lambda x, y: F.minimum(x, y), _x(), -_x())
    (finding,) = check(program, Oracles(passes=(), interpreter=_AgreeingInterpreter(program))).findings
    assert finding.kind == XLA_DISAGREEMENT and "interpreter agrees with eager" in finding.evidence


def test_the_real_interpreter_sides_with_xla_on_a_wrong_rule(wrong_minimum):
    program = _program(lambda x, y: F.minimum(x, y), _x(), -_x())
    interpreter = Interpreter()
    try:
        (finding,) = check(program, Oracles(passes=(), interpreter=interpreter)).findings
    finally:
        interpreter.close()
    assert finding.kind == RULE_BUG  # the module computes max: so does the interpreter


def test_the_interpreter_matches_eager_across_dtypes_and_survives_a_crash():
    program = _program(
        lambda x, b, i: (F.tanh(x) * 3.0, F.astype(b, "float32") + F.sum(i), F.astype(x, "bfloat16") * 2.0),
        _x(),
        np.array([True, False, True]),
        np.array([[1, 2], [3, 4]], np.int32),
    )
    from hlotrace.lowering import lower_trace

    text = lower_trace(program.trace).text()
    interpreter = Interpreter()
    try:
        results = interpreter.run(text, program.inputs)
        for got, want in zip(results, outputs(program.trace, program.inputs), strict=True):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2)
            assert got.dtype == want.dtype
        interpreter._proc.kill()  # a worker that died is restarted on the next call
        interpreter._proc.wait()
        assert not isinstance(interpreter.run(text, program.inputs), str)
        assert "does not run" in unsupported_reason("%0 = stablehlo.remainder %a, %b : tensor<4xi32>")
    finally:
        interpreter.close()


def test_a_value_outside_the_ops_domain_is_an_undefined_input():
    x = np.array([np.nan, 3e9, 1.0], np.float32)
    program = _program(lambda x: F.astype(x, "int32"), x)
    verdict = check(program, Oracles(passes=()))
    assert [f.kind for f in verdict.findings] in ([], [UNDEFINED_INPUT])
    bad = dataclasses.replace(program, inputs=[np.array([np.nan, -np.inf, 7e9], np.float32)])
    for finding in check(bad, Oracles(passes=())).findings:
        assert finding.kind == UNDEFINED_INPUT and "undefined" in finding.evidence


def test_the_tolerance_grows_with_the_path_and_uses_each_records_dtype():
    program = _program(lambda x: F.astype(F.exp(F.exp(x) * 0.1), "float64"), _x())
    tolerance = output_tolerance(program, program.trace.outputs[0])
    assert tolerance.rtol >= 3 * 1e-5  # float32 exp's entry, three float records


def test_a_module_that_does_not_lower_is_a_rule_bug():
    from hlotrace.lowering.registry import RULES

    program = _program(lambda x: F.exp(x), _x())
    saved = RULES.pop("exp")
    try:
        (finding,) = check(program, Oracles(passes=())).findings
    finally:
        RULES["exp"] = saved
    assert (finding.kind, finding.oracle) == (RULE_BUG, "lowering")


def test_a_raw_exception_out_of_lowering_is_a_rule_bug_not_a_crash_of_the_fuzzer(monkeypatch):
    # A constant the bindings refuse (a mutant hands bfloat16 constants over as float32)
    # raised a ValueError out of lower_trace, which ended the fuzz session with a traceback.
    from hlotrace.lowering import hlo

    def refuse(*args, **kwargs):
        raise ValueError("DenseElementsAttr could not be constructed from the given buffer")

    program = _program(lambda x: x + np.array([1.0, 2.0, 3.0], np.float32), _x())
    assert program.trace.constants
    monkeypatch.setattr(hlo, "constant", refuse)
    (finding,) = check(program, Oracles(passes=())).findings
    assert (finding.kind, finding.oracle) == (RULE_BUG, "lowering")
    assert "ValueError: DenseElementsAttr" in finding.evidence


@pytest.mark.parametrize("seed", range(6))
def test_generated_programs_pass_on_the_unmutated_tree(seed):
    from hlotrace.testing.fuzz.generate import generate

    verdict = check(generate(1000 + seed), Oracles())
    assert verdict.bugs == [], [str(f) for f in verdict.bugs]


@pytest.fixture
def negative_as_zero_minus():
    """negative(x) lowered as 0 - x: -(+0.0) comes out +0.0."""
    from hlotrace.lowering import hlo
    from hlotrace.lowering.registry import RULES
    from hlotrace.runtime.jaxlib_compat import stablehlo

    saved = RULES["negative"]

    def wrong(ctx, x):
        (aval,) = ctx.in_avals
        return stablehlo.SubtractOp(hlo.constant(0.0, aval.dtype, aval.shape), x).result

    RULES["negative"] = wrong
    yield
    RULES["negative"] = saved


def test_the_wrong_sign_of_an_exact_zero_is_a_rule_bug(negative_as_zero_minus):
    x = np.array([0.0, 1.5, -2.0], np.float32)
    (finding,) = check(_program(lambda x: -x, x), Oracles(passes=())).findings
    assert finding.kind == RULE_BUG and "got 0.0, eager -0.0" in finding.evidence


def test_only_a_zero_the_judge_confirms_has_its_sign_checked_past_the_widening():
    from hlotrace.testing.fuzz.compare import disagreeing
    from hlotrace.testing.tolerances import tolerance_for

    tolerance = tolerance_for("add", np.dtype(np.float32))
    actual, expected = np.array([0.0], np.float32), np.array([-0.0], np.float32)
    perturbed = np.array([-1e-6], np.float32)  # the nudged runs move this element: slack
    assert disagreeing(actual, expected, tolerance, np.array([-0.0]), None, perturbed).all()
    # Rounding made this zero (float64 says -1e-30): the widening still excuses its sign.
    assert not disagreeing(actual, expected, tolerance, np.array([-1e-30]), None, perturbed).any()
    assert not disagreeing(actual, expected, tolerance._replace(signed_zeros=False), np.array([-0.0])).any()


def test_the_judge_computes_with_integers_in_float64_where_the_op_reads_them_as_numbers():
    from hlotrace.testing.fuzz.evaluate import outputs

    x = np.array([[16777225, 16777227, 16777229]], np.int32)
    program = _program(lambda x: F.var(x, axis=1), x)
    (judge,) = outputs(program.trace, program.inputs, wide=True)
    assert judge.dtype == np.float64 and abs(float(judge[0]) - 8 / 3) < 1e-9  # float32 gives 4.0
    labels = np.array([0, 2, 1], np.int32)  # one_hot's labels stay integers (its inference says so)
    program = _program(lambda y: F.one_hot(y, 3), labels)
    (judge,) = outputs(program.trace, program.inputs, wide=True)
    assert np.array_equal(judge, np.eye(3)[labels])


def test_an_op_inside_a_branch_brings_its_tolerance_entry():
    """Fuzzer seed 1926383459 (session seed 11), shrunk: maximum(+0.0, -0.0) inside a switch
    branch was a "rule bug" (NumPy returned -0.0, XLA +0.0), because only the switch's own
    entry was read; the table lets maximum return either zero, inside a region as outside."""
    a = np.array([[-313.75], [-0.0], [4953.25]])

    def fn(i, a, b):
        return F.switch(i, (lambda a, b: (a, F.maximum(b - a, a)), lambda a, b: (a, b)), a, b)[1]

    program = _program(fn, np.int32(0), a, a.copy())
    assert not output_tolerance(program, program.trace.outputs[0]).signed_zeros
    assert [f.kind for f in check(program, Oracles(passes=())).findings] == []


def test_a_weight_gradient_convolution_is_skipped_before_it_kills_the_interpreter():
    """conv2d_weight_grad's feature-major output ([f, b, 0, 1]) aborts the reference
    interpreter: 34 of 40 such fuzz programs killed the worker before the check named it."""
    x, dy = np.ones((1, 1, 5, 4), np.float32), np.ones((1, 2, 3, 2), np.float32)
    program = _program(
        lambda x, dy: F.conv2d_weight_grad(x, dy, kernel_size=(1, 2), stride=(2, 2), padding=(0, 0)), x, dy
    )
    from hlotrace.lowering import lower_trace

    text = lower_trace(program.trace).text()
    assert "feature-major" in unsupported_reason(text)
    assert unsupported_reason(lower_trace(_program(lambda x: F.conv2d(x, x[:, :, :2, :2]), x).trace).text()) is None
