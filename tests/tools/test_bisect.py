"""``hlotrace.debug.bisect`` and ``hlotrace bisect`` (issue 23, part 1): a planted wrong user
rule deep inside a 20-op program is named with its source line, against every reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F
from hlotrace.debug import bisect, bisect_trace
from hlotrace.dispatch import apply
from hlotrace.lowering.registry import RULES, rule
from hlotrace.ops.registry import OPS, Aval, OpDef, get_op, register_op
from hlotrace.runtime.jaxlib_compat import stablehlo
from hlotrace.tools.cli import main

OP = "test_bisect_cube"


@pytest.fixture(params=["wrong", "right"])
def cube(request):
    """x**3 as a user op whose rule computes x*x ("wrong") or x*x*x ("right")."""
    register_op(OpDef(name=OP, family="user", reference=lambda x: x * x * x, infer=lambda x: Aval(x.shape, x.dtype)))

    @rule(OP)
    def _cube(ctx, x):
        square = stablehlo.MulOp(x, x).result
        return square if request.param == "wrong" else stablehlo.MulOp(square, x).result

    yield request.param
    OPS.pop(OP)
    RULES.pop(OP)


def program(x, w):
    """22 records; the user op is record 11."""
    h = F.tanh(F.matmul(x, w))
    for _ in range(4):
        h = h * 0.5 + 0.25
    h = F.sqrt(h)
    h = apply(get_op(OP), h)  # PLANTED: the line bisect must name
    for _ in range(4):
        h = F.exp(h * 0.1)
    return F.sum(h, axis=1) - 1.0


PLANTED_LINE = next(i for i, line in enumerate(open(__file__), 1) if "# PLANTED" in line)


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)


@pytest.mark.parametrize("window", [1, 3, 64])
@pytest.mark.parametrize("against", ["eager", "float64", "interpreter"])
def test_the_planted_rule_is_named_with_its_line(cube, against, window):
    report = bisect(program, *_inputs(), against=against, window=window)
    if against == "interpreter":
        # The interpreter runs the same lowered module: it catches XLA, not a wrong rule.
        assert report.divergence is None and any("same lowered module" in n for n in report.notes)
        return
    if cube == "right":
        assert report.divergence is None, report.text()
        assert report.checked == report.records == 22
        return
    d = report.divergence
    assert d is not None, report.text()
    assert (d.index, d.op) == (11, OP)
    assert d.location.endswith(f"test_bisect.py:{PLANTED_LINE} (in program)")
    assert report.checked == 12  # it stopped at the first divergence
    assert d.elements == 20 and d.max_error > 0.01
    assert len(d.inputs) == 1 and "f32[4,5]" in d.inputs[0]
    assert d.known == ""  # no subnormal in sight: nothing excuses it
    text = report.text()
    assert f"record 11 ({OP})" in text and f"test_bisect.py:{PLANTED_LINE}" in text


def test_state_the_function_updates_is_put_back(cube):
    w = ht.Parameter(np.ones((3, 5), np.float32))

    def step(x, w):
        w -= 0.5
        return program(x, w)

    bisect(step, _inputs()[0], w)
    np.testing.assert_array_equal(w.numpy(), np.ones((3, 5), np.float32))


def test_a_known_xla_behaviour_is_named():
    # 1e-10 * 1e-30 is subnormal in float32: XLA:CPU flushes it, so the next product is 0
    # where NumPy gives 1e-4.
    x, y, z = (np.full(3, v, np.float32) for v in (1e-10, 1e-30, 1e36))  # inputs: XLA cannot fold them
    report = bisect(lambda x, y, z: (x * y) * z, x, y, z)
    if report.divergence is None:
        pytest.skip("this platform keeps subnormals")
    assert report.divergence.index == 1
    assert "flushes to zero" in report.divergence.known


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ht.HlotraceError, match="against must be one of"):
        bisect(lambda x: x + 1.0, np.ones(2, np.float32), against="numpy")
    with pytest.raises(ht.HlotraceError, match="window must be at least 1"):
        bisect(lambda x: x + 1.0, np.ones(2, np.float32), window=0)


@pytest.fixture
def program_file(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(
        "from hlotrace import functional as F\n"
        "from hlotrace.ops import apply, get_op\n"
        "def f(x, w):\n"
        "    h = F.tanh(F.matmul(x, w)) * 0.5 + 0.75\n"
        f"    h = apply(get_op({OP!r}), h)\n"
        "    return F.exp(h * 0.1)\n"
    )
    return path


def test_the_command(cube, program_file, capsys, tmp_path):
    status = main(["bisect", f"{program_file}:f", "-i", "f32[4,3]", "-i", "f32[3,5]", "--window", "2"])
    out = capsys.readouterr().out
    if cube == "right":
        assert status == 0 and "no record outside tolerance" in out
        return
    assert status == 1
    assert f"({OP}) at {program_file}:5 (in f)" in out
    assert main(["bisect", f"{program_file}:f", "-i", "f32[4,3]", "-i", "f32[3,5]", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["divergence"]["op"] == OP and doc["divergence"]["location"].endswith("prog.py:5 (in f)")
    # A saved trace bisects the same (random inputs from --seed).
    traced = ht.xla_trace(lambda x, w: program(x, w))
    traced(*map(ht.tensor, _inputs()))
    traced.trace.save(tmp_path / "p.trace.json")
    assert main(["bisect", str(tmp_path / "p.trace.json")]) == 1
    assert f"({OP})" in capsys.readouterr().out


def test_command_errors_exit_2(capsys, tmp_path):
    assert main(["bisect", str(tmp_path / "missing.trace.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    try:
        status = main(["bisect", "x.py:f", "--against", "numpy"])
    except SystemExit as exc:
        status = exc.code
    assert status == 2
    assert main(["bisect", "x.py:f", "--window", "0"]) == 2


def test_bisect_trace_of_a_correct_program_checks_every_record():
    traced = ht.xla_trace(lambda x: F.exp(x) * 2.0 + 1.0)
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    traced(ht.tensor(x))
    report = bisect_trace(traced.trace, [x], window=2)
    assert report.divergence is None and report.checked == len(traced.trace.records) and report.outputs_agree
