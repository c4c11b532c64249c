"""The ``hlotrace`` command-line program: lower, rules, show, and its error handling.

Most tests call ``main([...])`` in-process (fast); a few run the real program in a
subprocess to check the console script / ``python -m hlotrace`` entry points.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills RULES before tests patch it)
from hlotrace import dtypes
from hlotrace.lowering import RULES
from hlotrace.ops import OPS
from hlotrace.ops.registry import is_differentiable
from hlotrace.tools import cli
from hlotrace.tools.cli import CliError, main, parse_input_spec, random_input
from hlotrace.trace import Trace

MODEL = """\
import hlotrace.functional as F
from hlotrace.jit import xla_trace


def f(x, y):
    z = F.exp(x) * 2.0
    return F.tanh(z + y)


@xla_trace
def decorated(x):
    return F.sin(x) - x


def scalar_mix(x, s):
    return x * F.astype(s, "bfloat16")


def broadcast_error(x, y):
    return x + y


def raises(x):
    return x.no_such_attribute


def no_args():
    return None


NOT_A_FUNCTION = 3
"""
# 1-based line numbers of interesting statements in MODEL.
LINE_EXP = 6
LINE_TANH = 7
LINE_BROADCAST = 20
LINE_RAISES = 24


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return str(path)


def _run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _assert_one_error_line(status, out, err, *needles):
    assert status == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("hlotrace: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# -- lower ----------------------------------------------------------------------------------


def test_lower_prints_module_with_user_locations(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:f", "--input", "f32[2,3]", "--input", "f32[3]")
    assert status == 0, err
    assert "func.func public @main" in out
    assert "tensor<2x3xf32>" in out
    assert "stablehlo.exponential" in out and "stablehlo.tanh" in out
    assert "loc(" in out
    assert f'loc("{model}":{LINE_EXP}:0)' in out
    assert f'loc("{model}":{LINE_TANH}:0)' in out
    assert '"rec0:exp"' in out
    # stdout is the module and nothing else; the summary is on stderr
    assert out.lstrip().startswith(("#loc", "module"))
    assert out.rstrip().endswith(")")
    assert "platform" in err and "exponential" in err
    assert "stablehlo" not in err.split("platform")[1]


def test_lower_no_locations(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:f", "-i", "f32[2,3]", "-i", "f32[3]", "--no-locations")
    assert status == 0, err
    assert "func.func public @main" in out
    assert "loc(" not in out
    assert model not in out


def test_lower_bf16_and_scalar_inputs(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:scalar_mix", "--input", "bf16[2,3]", "--input", "f32[]")
    assert status == 0, err
    assert "%arg0: tensor<2x3xbf16>" in out
    assert "%arg1: tensor<f32>" in out
    assert "stablehlo.convert" in out


def test_lower_decorated_function(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:decorated", "--input", "f32[4]", "--seed", "7")
    assert status == 0, err
    assert "stablehlo.sine" in out and "stablehlo.subtract" in out


def test_lower_function_without_inputs(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:no_args")
    assert status == 0, err
    assert "func.func public @main() {" in out or "func.func public @main()" in out


def test_lower_compiled_prints_hlo(capsys, model):
    status, out, err = _run(capsys, "lower", f"{model}:f", "-i", "f32[2,3]", "-i", "f32[3]", "--compiled")
    assert status == 0, err
    assert "HloModule" in out
    assert "stablehlo." not in out
    assert "rec0:exp" in out  # locations survive as HLO metadata


def test_lower_local_imports_resolve(capsys, tmp_path):
    (tmp_path / "cli_helper_mod.py").write_text("def double(x):\n    return x * 2.0\n")
    (tmp_path / "uses_helper.py").write_text("from cli_helper_mod import double\n\ndef g(x):\n    return double(x)\n")
    before = list(sys.path)
    status, out, err = _run(capsys, "lower", f"{tmp_path / 'uses_helper.py'}:g", "-i", "f32[3]")
    assert status == 0, err
    assert f'"{tmp_path / "cli_helper_mod.py"}":2:0' in out
    assert sys.path == before  # the file's directory is taken off sys.path again


# -- --input specs and random inputs --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "shape", "dtype"),
    [
        ("f32[64,1000]", (64, 1000), dtypes.float32),
        ("f32[]", (), dtypes.float32),
        ("bf16[2,3]", (2, 3), dtypes.bfloat16),
        ("f16[1]", (1,), dtypes.float16),
        ("i32[5]", (5,), dtypes.int32),
        ("bool[2,2]", (2, 2), dtypes.bool_),
        ("float32[ 2 , 3 ]", (2, 3), dtypes.float32),
        ("i32[0,4]", (0, 4), dtypes.int32),
        ("f64[3]", (3,), dtypes.float64),
        ("i64[]", (), dtypes.int64),
    ],
)
def test_parse_input_spec(spec, shape, dtype):
    assert parse_input_spec(spec) == (shape, dtype)


@pytest.mark.parametrize("spec", ["f32", "f32[2,3", "c64[2]", "x[2]", "f32[2,-1]", "f32[a]", "f32[2,,3]", "[2]", ""])
def test_parse_input_spec_rejects(spec):
    with pytest.raises(CliError) as info:
        parse_input_spec(spec)
    message = str(info.value)
    assert "f32[64,1000]" in message
    assert "bf16" in message and "i32" in message and "bool" in message


@pytest.mark.parametrize("spec", ["f32[3,4]", "bf16[2]", "f16[2]", "i32[50]", "i64[50]", "f64[2]", "bool[6]", "f32[]"])
def test_random_input_matches_spec(spec):
    shape, dtype = parse_input_spec(spec)
    array = random_input(shape, dtype, np.random.default_rng(0))
    assert array.shape == shape and array.dtype == dtype
    again = random_input(shape, dtype, np.random.default_rng(0))
    np.testing.assert_array_equal(array, again)
    if dtype in dtypes.INTEGER:
        assert array.min() >= 0 and array.max() <= 9


# -- errors: one line, exit status 2 -------------------------------------------------------


def test_error_missing_file(capsys, tmp_path):
    _assert_one_error_line(*_run(capsys, "lower", f"{tmp_path / 'nope.py'}:f"), "no such file", "nope.py")


def test_error_target_without_function(capsys, model):
    _assert_one_error_line(*_run(capsys, "lower", model), "FILE.py:FUNC")


def test_error_file_fails_to_import(capsys, tmp_path):
    path = tmp_path / "broken_import.py"
    path.write_text("import numpy\n\nraise RuntimeError('boom at import')\n")
    _assert_one_error_line(*_run(capsys, "lower", f"{path}:f"), "cannot import", "RuntimeError", "boom at import")


def test_error_file_with_syntax_error(capsys, tmp_path):
    path = tmp_path / "broken_syntax.py"
    path.write_text("def f(x:\n    return x\n")
    _assert_one_error_line(*_run(capsys, "lower", f"{path}:f"), "cannot import", "SyntaxError")


def test_error_function_not_found_lists_callables(capsys, model):
    line = _assert_one_error_line(*_run(capsys, "lower", f"{model}:missing_fn"), "'missing_fn' not found")
    for name in ("f", "decorated", "scalar_mix", "raises"):
        assert name in line
    assert "xla_trace" not in line  # imported names are not the file's own


def test_error_not_callable(capsys, model):
    _assert_one_error_line(*_run(capsys, "lower", f"{model}:NOT_A_FUNCTION"), "not callable", "int")


def test_error_malformed_input_spec(capsys, model):
    _assert_one_error_line(
        *_run(capsys, "lower", f"{model}:f", "--input", "f32(2,3)", "--input", "f32[3]"),
        "malformed --input",
        "f32[64,1000]",
        "bf16",
    )


def test_error_unknown_dtype(capsys, model):
    _assert_one_error_line(*_run(capsys, "lower", f"{model}:f", "-i", "c64[2]", "-i", "f32[2]"), "unknown dtype 'c64'")


@pytest.mark.parametrize("count", [0, 1, 3])
def test_error_wrong_number_of_inputs(capsys, model, count):
    specs = [arg for _ in range(count) for arg in ("-i", "f32[2]")]
    _assert_one_error_line(*_run(capsys, "lower", f"{model}:f", *specs), f"{count} input(s)", "2 required: x, y")


def test_error_op_error_names_user_line(capsys, model):
    _assert_one_error_line(
        *_run(capsys, "lower", f"{model}:broadcast_error", "-i", "f32[2,3]", "-i", "f32[4]"),
        "add",
        f"model.py:{LINE_BROADCAST}",
    )


def test_error_user_function_raises(capsys, model):
    _assert_one_error_line(
        *_run(capsys, "lower", f"{model}:raises", "-i", "f32[2]"),
        "AttributeError",
        "no_such_attribute",
        f"model.py:{LINE_RAISES}",
    )


def test_error_missing_lowering_rule(capsys, model, monkeypatch):
    monkeypatch.delitem(RULES, "tanh")
    _assert_one_error_line(
        *_run(capsys, "lower", f"{model}:f", "-i", "f32[2]", "-i", "f32[2]"),
        "no lowering rule for op 'tanh'",
        f"model.py:{LINE_TANH}",
    )


def test_error_trace_out_unwritable(capsys, model, tmp_path):
    _assert_one_error_line(
        *_run(capsys, "lower", f"{model}:decorated", "-i", "f32[2]", "--trace-out", str(tmp_path / "no" / "t.json")),
        "cannot write trace",
    )


@pytest.mark.parametrize(
    "argv",
    [[], ["bogus"], ["lower"], ["lower", "m.py:f", "--seed", "x"], ["show"], ["rules", "--frob"]],
)
def test_usage_errors_exit_2(capsys, argv):
    status, out, err = _run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.strip().splitlines()[-1].startswith("hlotrace: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["--help"], ["lower", "--help"], ["rules", "--help"], ["show", "--help"]])
def test_help(capsys, argv):
    status, out, _ = _run(capsys, *argv)
    assert status == 0
    assert "usage: hlotrace" in out
    assert "examples:" in out


# -- rules ----------------------------------------------------------------------------------


def _table_rows(out: str) -> list[list[str]]:
    lines = out.strip().split("\n\n")[0].splitlines()
    assert lines[0].split()[:3] == ["op", "family", "rule"]
    return [line.split(None, 5) for line in lines[1:]]


def test_rules_lists_every_op_consistently_with_registries(capsys):
    status, out, err = _run(capsys, "rules")
    rows = _table_rows(out)
    names = [row[0] for row in rows]
    assert set(names) == set(OPS) and len(names) == len(OPS)
    assert [(row[1], row[0]) for row in rows] == sorted((OPS[n].family, n) for n in names)
    for name, family, has_rule, has_test, vjp, *_ in rows:
        assert family == OPS[name].family
        assert has_rule == ("yes" if name in RULES else "no")
        assert has_test == ("yes" if OPS[name].sample is not None else "no")
        assert vjp == ("n/a" if not is_differentiable(OPS[name]) else "yes" if OPS[name].vjp else "MISSING")
    assert "cross_entropy" in out.split("composites")[1]
    complete = all(n in RULES and op.sample is not None for n, op in OPS.items())
    assert status == (0 if complete else 1)
    assert f"{len(OPS)} ops" in err


def test_rules_json(capsys):
    status, out, _ = _run(capsys, "rules", "--json")
    report = json.loads(out)
    assert {o["op"] for o in report["ops"]} == set(OPS)
    assert set(report["missing_rules"]) == set(OPS) - set(RULES)
    assert set(report["missing_samples"]) == {n for n, op in OPS.items() if op.sample is None}
    assert set(report["stale_rules"]) == set(RULES) - set(OPS)
    assert {o["op"] for o in report["ops"] if o["has_vjp"]} == {n for n, op in OPS.items() if callable(op.vjp)}
    assert "softmax" in {c["name"] for c in report["composites"]}
    assert status == (1 if report["missing_rules"] or report["missing_samples"] or report["missing_vjps"] else 0)


def test_rules_exit_0_when_complete_and_lists_stale(capsys, monkeypatch):
    for name in set(OPS) - set(RULES):
        monkeypatch.setitem(RULES, name, lambda ctx, *args, **kw: None)
    for name, op in list(OPS.items()):
        if op.sample is None:
            monkeypatch.setitem(OPS, name, dataclasses.replace(op, sample=lambda s: None))
    monkeypatch.setitem(RULES, "zz_stale_rule", lambda ctx, x: x)
    status, out, err = _run(capsys, "rules")
    assert status == 0
    assert "zz_stale_rule" not in out
    assert "stale" in err and "zz_stale_rule" in err


def test_rules_exit_1_on_missing_vjp(capsys, monkeypatch):
    monkeypatch.setitem(OPS, "tanh", dataclasses.replace(OPS["tanh"], vjp=None))
    status, out, err = _run(capsys, "rules")
    assert status == 1
    assert {row[0]: row for row in _table_rows(out)}["tanh"][4] == "MISSING"
    assert "differentiable ops without a VJP: tanh" in err


def test_rules_exit_1_on_missing_rule_or_sample(capsys, monkeypatch):
    monkeypatch.delitem(RULES, "exp")
    monkeypatch.setitem(OPS, "sin", dataclasses.replace(OPS["sin"], sample=None))
    status, out, err = _run(capsys, "rules")
    assert status == 1
    rows = {row[0]: row for row in _table_rows(out)}
    assert rows["exp"][2] == "no" and rows["sin"][3] == "no"
    assert "exp" in err and "sin" in err


# -- show -----------------------------------------------------------------------------------


def test_show_round_trips_saved_trace(capsys, model, tmp_path):
    trace_path = str(tmp_path / "f.trace.json")
    status, lowered_out, err = _run(
        capsys, "lower", f"{model}:f", "-i", "f32[2,3]", "-i", "f32[3]", "--trace-out", trace_path
    )
    assert status == 0, err
    assert os.path.exists(trace_path)

    status, out, err = _run(capsys, "show", trace_path)
    assert status == 0, err
    assert out == str(Trace.load(trace_path)) + "\n"
    assert out.startswith("trace f(")
    for op in ("exp", "multiply", "add", "tanh"):
        assert f"= {op}(" in out
    assert f"model.py:{LINE_EXP}" in out

    status, out, err = _run(capsys, "show", trace_path, "--lower")
    assert status == 0, err
    assert out == lowered_out  # the saved trace lowers to the same module, locations included

    status, out, err = _run(capsys, "show", trace_path, "--lower", "--no-locations")
    assert status == 0, err
    assert "func.func public @main" in out and "loc(" not in out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json at all", "cannot read trace"),
        ('{"schema": "something.else", "version": 1}', "not an hlotrace trace"),
        ('{"schema": "hlotrace.trace", "version": 99}', "version"),
        ('{"schema": "hlotrace.trace", "version": 1, "name": "m"}', "'vars'"),
        ("[1, 2, 3]", "bad trace file"),
    ],
)
def test_show_bad_trace_file(capsys, tmp_path, content, needle):
    path = tmp_path / "bad.trace.json"
    path.write_text(content)
    _assert_one_error_line(*_run(capsys, "show", str(path)), "bad trace file", needle)


def test_show_trace_with_undeclared_var(capsys, tmp_path):
    doc = {
        "schema": "hlotrace.trace",
        "version": 1,
        "name": "m",
        "vars": [{"id": 0, "shape": [2], "dtype": "float32"}],
        "inputs": [0],
        "outputs": [1],
        "constants": [],
        "records": [{"op": "exp", "attrs": {}, "inputs": [0], "outputs": [1], "location": None}],
    }
    path = tmp_path / "undeclared.trace.json"
    path.write_text(json.dumps(doc))
    _assert_one_error_line(*_run(capsys, "show", str(path)), "bad trace file", "undeclared var")


def test_show_missing_file(capsys, tmp_path):
    _assert_one_error_line(*_run(capsys, "show", str(tmp_path / "absent.json")), "no such file")


# -- the installed program ------------------------------------------------------------------


def _console_script() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "hlotrace")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "hlotrace"]


def test_console_script_help():
    proc = subprocess.run([*_console_script(), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage: hlotrace" in proc.stdout and "lower" in proc.stdout and "rules" in proc.stdout


def test_python_m_hlotrace_error_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "hlotrace", "lower", f"{tmp_path / 'missing.py'}:f", "-i", "f32[2]"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"hlotrace: error: no such file: {tmp_path / 'missing.py'}"]


def test_module_entry_point_is_cli_main():
    import hlotrace.__main__ as entry

    assert entry.main is cli.main
