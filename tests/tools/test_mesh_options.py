"""`hlotrace lower/stages/explain --mesh` with `--input DTYPE[SHAPE]@SPEC`: a sharded
lowering (Shardy annotations), the partitioned HLO and the collectives XLA inserted with the
lines that caused them; one-line errors (exit status 2) for bad meshes and placements.

On the CPU a mesh larger than hlotrace's client takes a separate CPU client of that many
devices, so these run under any HLOTRACE_CPU_DEVICES."""

from __future__ import annotations

import json

import pytest

from hlotrace.tools.cli import main
from hlotrace.tools.common import CliError, parse_mesh

PLACED = ["-i", "f32[16,8]@data", "-i", "f32[8,32]@None,model", "-i", "f32[32,4]@model"]


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(
        "from hlotrace import functional as F\n"
        "def mlp(x, w1, w2):\n"
        "    h = F.relu(F.matmul(x, w1))\n"
        "    return F.sum(F.matmul(h, w2), axis=1)\n"
    )
    return f"{path}:mlp"


def test_lower_with_a_mesh_prints_the_shardy_annotated_module(program, capsys):
    assert main(["lower", program, "--mesh", "4x2:data,model", *PLACED]) == 0
    captured = capsys.readouterr()
    assert 'sdy.mesh @mesh = <["data"=4, "model"=2]>' in captured.out
    assert '#sdy.sharding<@mesh, [{}, {"model"}]>' in captured.out
    assert "mesh data=4,model=2: 1 collectives (all-reduce 1)" in captured.err
    assert main(["lower", program, "--mesh", "data=4,model=2", *PLACED, "--compiled"]) == 0
    assert "all-reduce(" in capsys.readouterr().out


def test_stages_and_explain_show_the_partitioned_program_and_its_collectives(program, capsys):
    assert main(["stages", program, "--mesh", "4x2:data,model", *PLACED, "--passes", "cse"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("==== ")]
    assert "partitioned for 8 devices" in headers[-1] and "all-reduce 1" in headers[-1]
    assert main(["explain", program, "--mesh", "4x2:data,model", *PLACED, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (reduce,) = report["collectives"]
    assert (reduce["kind"], reduce["axes"], reduce["group_size"]) == ("all-reduce", ["model"], 2)
    assert reduce["lines"] == ["prog.py:4"] and reduce["bytes"] == 4 * 4 * 4
    assert report["devices"] == 8
    assert (
        main(["explain", program, "--mesh", "8:data", "-i", "f32[16,8]@data", "-i", "f32[8,32]", "-i", "f32[32,4]"])
        == 0
    )
    out = capsys.readouterr().out
    assert "XLA memory stats (per device)" in out and "(none: XLA inserted no collectives)" in out


@pytest.mark.parametrize(
    "mesh, message",
    [
        ("4x2", "no axis names"),
        ("4x2:data", "2 axis size(s) but 1 axis name(s)"),
        ("4xa:data,model", "axis size 'a' is not a positive integer"),
        ("0:data", "axis size '0'"),
        ("data=4,data=2", "axis name(s) 'data' repeated"),
        ("2:da-ta", "axis name 'da-ta' is not an identifier"),
    ],
)
def test_a_bad_mesh_string_is_named(mesh, message):
    with pytest.raises(CliError, match="malformed --mesh") as info:
        parse_mesh(mesh)
    assert message in str(info.value) and "4x2:data,model" in str(info.value)


def test_mesh_strings_in_both_forms():
    assert parse_mesh("4x2:data,model") == ((4, 2), ("data", "model"))
    assert parse_mesh("data=4, model=2") == ((4, 2), ("data", "model"))
    assert parse_mesh("8:batch") == ((8,), ("batch",))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--mesh", "4x2", *PLACED], "malformed --mesh '4x2': no axis names"),
        (["-i", "f32[16,8]@data", "-i", "f32[8,32]", "-i", "f32[32,4]"], "give --mesh too"),
        (
            ["--mesh", "4:data", "-i", "f32[16,8]@batch", "-i", "f32[8,32]", "-i", "f32[32,4]"],
            "unknown mesh axis 'batch'",
        ),
        (["--mesh", "4:data", "-i", "f32[16,8]@None,None,data", "-i", "f32[8,32]", "-i", "f32[32,4]"], "rank 2"),
        (["--mesh", "3:data", "-i", "f32[16,8]@data", "-i", "f32[8,32]", "-i", "f32[32,4]"], "size 16"),
        (["--mesh", "4:data", "-i", "f32[16,8]@da-ta", "-i", "f32[8,32]", "-i", "f32[32,4]"], "'da-ta' is not an axis"),
        (["--mesh", "1000:data", *PLACED], "needs 1000 devices"),
    ],
)
def test_bad_placements_are_one_line_errors(program, capsys, extra, message):
    assert main(["lower", program, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hlotrace: error:") and len(err.strip().splitlines()) == 1
    assert message in err, err


def test_mesh_needs_a_function_target(program, tmp_path, capsys):
    trace = tmp_path / "p.trace.json"
    assert (
        main(["lower", program, "-i", "f32[16,8]", "-i", "f32[8,32]", "-i", "f32[32,4]", "--trace-out", str(trace)])
        == 0
    )
    capsys.readouterr()
    assert main(["stages", str(trace), "--mesh", "4:data"]) == 2
    assert "--mesh needs a FILE.py:FUNC target" in capsys.readouterr().err
