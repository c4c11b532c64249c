"""Lowering contracts: @main, locations on every op, output-aval checks, missing-rule errors."""

import re

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.errors import LoweringError
from hlotrace.jit import xla_trace
from hlotrace.lowering import RULES, lower_trace
from hlotrace.source import SourceLocation
from hlotrace.trace import OpRecord, Trace


def _traced():
    @xla_trace
    def f(x, w):
        h = F.matmul(x, w)  # line A
        return F.tanh(h).sum(axis=0)  # line B

    x = ht.tensor(np.ones((2, 3), "float32"))
    w = ht.tensor(np.ones((3, 4), "float32"))
    f(x, w)
    return f


def test_module_has_public_main_and_verifies():
    text = _traced().stablehlo_text
    assert "func.func public @main(" in text
    assert "stablehlo.dot_general" in text and "stablehlo.tanh" in text


def test_every_op_carries_record_op_and_user_file_line():
    f = _traced()
    text = f.lowered.text()
    body = text.split("func.func public @main", 1)[1].split("\n  }", 1)[0]
    op_lines = [ln for ln in body.splitlines() if "= stablehlo." in ln]
    assert op_lines
    aliases = dict(re.findall(r"^(#loc\d+) = (loc\(.*\))$", text, flags=re.M))
    line_a = f.trace.records[0].location.line
    for ln in op_lines:
        loc_ref = re.search(r"loc\((#loc\d+)\)\s*$", ln).group(1)
        loc = aliases[loc_ref]
        assert re.match(r'loc\("rec\d+:[a-z_]+"\(#loc\d+\)\)', loc), (ln, loc)
    assert '"rec0:matmul"' in text
    assert re.search(rf'loc\(".*test_lowering.py":{line_a}:0\)', text)
    assert re.search(rf'loc\(".*test_lowering.py":{line_a + 1}:0\)', text)


def test_locations_survive_into_compiled_hlo_metadata():
    hlo = _traced().executable.hlo_text()
    assert 'op_name="rec0:matmul"' in hlo
    assert "test_lowering.py" in hlo  # FileNames table


def _trace_with(op_name: str) -> Trace:
    trace = Trace(name="handmade")
    a = trace.new_var((3,), np.float32)
    b = trace.new_var((3,), np.float32)
    trace.inputs = [a]
    trace.records.append(OpRecord(op_name, {}, (a,), (b,), SourceLocation("/work/user_model.py", 42, "forward")))
    trace.outputs = [b]
    return trace


def test_missing_rule_names_op_record_line_and_known_rules():
    with pytest.raises(LoweringError) as info:
        lower_trace(_trace_with("frobnicate"))
    message = str(info.value)
    assert "'frobnicate'" in message and "record 0" in message
    assert "/work/user_model.py:42" in message
    assert "ops with rules:" in message and "matmul" in message


def test_rule_producing_the_wrong_type_is_caught(monkeypatch):
    from hlotrace.lowering import hlo

    monkeypatch.setitem(RULES, "negative", lambda ctx, x: hlo.convert(x, ctx.in_avals[0], np.int32))
    with pytest.raises(LoweringError, match=r"produced tensor<3xi32>, but the recorded output is f32\[3\]") as info:
        lower_trace(_trace_with("negative"))
    assert "user_model.py:42" in str(info.value)


def test_rule_that_raises_is_reported_with_op_and_inputs(monkeypatch):
    def broken(ctx, x):
        raise RuntimeError("boom")

    monkeypatch.setitem(RULES, "negative", broken)
    with pytest.raises(LoweringError, match=r"lowering rule for 'negative' \(record 0\).*f32\[3\].*boom"):
        lower_trace(_trace_with("negative"))


def test_splat_constants_keep_negative_zero():
    @xla_trace
    def f(x):
        return x * -0.0

    x = ht.tensor(np.array([1.0, -1.0, 0.0], "float32"))
    f(x)
    out = f(x).numpy()
    np.testing.assert_array_equal(np.signbit(out), np.signbit(x.numpy() * -0.0))


def test_verifier_failure_is_a_lowering_error_with_record_line_and_dump_hint(monkeypatch, tmp_path):
    from hlotrace.runtime.jaxlib_compat import stablehlo

    # Types match the recorded aval, so only MLIR's verifier can see the bad dimension.
    monkeypatch.setitem(RULES, "negative", lambda ctx, x: stablehlo.BroadcastInDimOp(x.type, x, [5]).result)
    monkeypatch.delenv("HLOTRACE_DUMP_TO", raising=False)
    with pytest.raises(LoweringError) as info:
        lower_trace(_trace_with("negative"))
    message = str(info.value)
    assert "does not verify" in message and "broadcast_dimensions" in message
    assert "record 0 'negative' at /work/user_model.py:42" in message
    assert "last op lowered was record 0 'negative'" in message
    assert "HLOTRACE_DUMP_TO=DIR" in message

    monkeypatch.setenv("HLOTRACE_DUMP_TO", str(tmp_path))
    with pytest.raises(LoweringError, match="unverified module is in"):
        lower_trace(_trace_with("negative"))
    assert "stablehlo.broadcast_in_dim" in (tmp_path / "handmade.unverified.mlir").read_text()
