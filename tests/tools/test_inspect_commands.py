"""`hlotrace stages`, `explain` and `diff` on the softmax example and on small files: the
stages in order, each XLA instruction mapped to its records and lines, diffs by location;
one-line errors with exit status 2."""

from __future__ import annotations

import json
import os

import pytest

from hlotrace.tools.cli import main

SOFTMAX = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "softmax_demo.py") + ":fused_softmax"


@pytest.fixture
def program(tmp_path):
    path = tmp_path / "prog.py"
    path.write_text(
        "from hlotrace import functional as F\n"
        "def f(x, w):\n"
        "    y = F.matmul(x, w)\n"
        "    z = F.exp(y) * 2.0\n"
        "    return F.sum(z, axis=1)\n"
    )
    return f"{path}:f"


def test_stages_prints_every_stage_in_order(capsys):
    assert main(["stages", SOFTMAX, "--input", "f32[4,8]", "--passes", "simplify,cse"]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("==== ")]
    assert [h.split()[2] for h in headers] == ["trace", "stablehlo", "after", "after", "xla"]
    assert "after simplify" in headers[2] and "after cse" in headers[3]
    assert "HloModule" in out and 'loc("rec0:max"' in out


def test_stages_writes_one_file_per_stage(tmp_path, program, capsys):
    out = tmp_path / "stages"
    assert main(["stages", program, "-i", "f32[3,4]", "-i", "f32[4,5]", "-o", str(out), "--passes", "cse"]) == 0
    assert sorted(os.listdir(out)) == ["00-trace.txt", "01-stablehlo.mlir", "02-after-cse.mlir", "03-xla-optimized.hlo"]
    assert "matmul" in (out / "00-trace.txt").read_text()
    # the saved trace goes through the same stages
    trace = tmp_path / "p.trace.json"
    assert main(["lower", program, "-i", "f32[3,4]", "-i", "f32[4,5]", "--trace-out", str(trace)]) == 0
    capsys.readouterr()
    assert main(["stages", str(trace), "--passes", ""]) == 0
    assert capsys.readouterr().out.count("==== ") == 3


def test_explain_maps_instructions_to_records_and_lines(program, capsys):
    assert main(["explain", program, "-i", "f32[3,4]", "-i", "f32[4,5]", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["flops"] > 0 and report["memory"]["argument"] == (12 + 20) * 4
    ops = {op for inst in report["instructions"] for op in inst["ops"]}
    assert {"rec0:matmul", "rec1:exp", "rec3:sum"} <= ops
    lines = {entry["line"] for entry in report["lines"]}
    assert {"prog.py:3", "prog.py:4", "prog.py:5"} <= lines
    dot = next(i for i in report["instructions"] if "rec0:matmul" in i["ops"])
    assert dot["flops"] >= 2 * 3 * 5 * 4  # 2*M*N*K for the matmul
    assert main(["explain", program, "-i", "f32[3,4]", "-i", "f32[4,5]", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "hottest source lines" in text and "XLA memory stats" in text


def test_diff_by_location_and_exit_status(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["stages", SOFTMAX, "--input", "f32[4,8]", "-o", str(out)]) == 0
    capsys.readouterr()
    before, after = str(out / "01-stablehlo.mlir"), str(out / "03-after-elide-guards.mlir")
    assert main(["diff", before, after]) == 1
    text = capsys.readouterr().out
    assert "stablehlo.select" in text and "softmax_demo.py:23" in text
    assert main(["diff", before, before]) == 0
    assert "the same ops everywhere" in capsys.readouterr().out
    assert main(["diff", str(out), str(out)]) == 0


def test_inspection_commands_bad_input_is_one_line(tmp_path, capsys):
    assert main(["stages", str(tmp_path / "nope.json")]) == 2
    assert main(["explain", SOFTMAX, "--input", "f32[4"]) == 2
    assert main(["explain", SOFTMAX, "--input", "f32[4,8]", "--passes", "nope"]) == 2
    assert main(["diff", str(tmp_path / "a.mlir"), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("hlotrace: error:") for line in err), err
    for command in ("stages", "explain", "diff"):
        assert main([command, "--help"]) == 0
        assert "examples:" in capsys.readouterr().out


def test_graph_draws_ops_edges_and_fusion_groups(tmp_path, capsys):
    source = tmp_path / "g.py"
    source.write_text(
        "from hlotrace import functional as F\n"
        "def f(x):\n"
        "    a = F.softmax(x, axis=-1)\n"
        "    return F.sum(a * F.gelu(x), axis=0)\n"
    )
    out = tmp_path / "g.html"
    assert main(["graph", f"{source}:f", "-i", "f32[4,8]", "-o", str(out)]) == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "http" not in page.replace("http://www.w3.org", "")
    assert "hlotrace.softmax" in page and "hlotrace.gelu" in page  # fuse-elementwise's groups
    assert "g.py:3" in page and "f32[4,8]" in page and page.count("<line ") >= 6
    svg = tmp_path / "g.svg"
    assert main(["graph", f"{source}:f", "-i", "f32[4,8]", "-o", str(svg), "--group", "scope"]) == 0
    text = svg.read_text()
    assert text.startswith("<svg") and "hlotrace.softmax" in text and "hlotrace.gelu" not in text
    assert main(["graph", f"{source}:f", "-i", "f32[4,8]", "-o", str(tmp_path / "g.jpg")]) == 2
    assert "expected a name ending in .html, .htm, .svg, .dot, .gv or .png" in capsys.readouterr().err


def test_locations_carry_the_module_path_for_model_explorer(tmp_path):
    import numpy as np

    import hlotrace as ht
    from hlotrace import functional as F
    from hlotrace import nn
    from hlotrace.jit import xla_trace
    from hlotrace.lowering import lower_trace
    from hlotrace.lowering.builder import main_function
    from hlotrace.passes.locations import record_location
    from hlotrace.trace import Trace

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return F.relu(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(Block(), Block())

        def forward(self, x):
            return self.body(x) * 2.0

    net = Net()
    traced = xla_trace(lambda x: F.exp(net(x)), capture_as_const=True, passes="")
    traced(ht.tensor(np.ones((2, 4), np.float32)))
    paths = {traced.trace.records[i].op: p for i, p in sorted(traced.trace.paths.items())}
    assert paths["matmul"].startswith("Net.body.") and paths["multiply"] == "Net" and "exp" not in paths
    text = traced.lowered.text()
    assert '"Net.body.0.fc/rec0:matmul"' in text and '"Net.body.1.fc/' in text
    found = [record_location(op) for op in main_function(traced.lowered.module).regions[0].blocks[0].operations]
    assert {f.path for f in found if f is not None} >= {"Net.body.0.fc", "Net.body.0", "Net", None}
    path = str(tmp_path / "t.trace.json")
    traced.trace.save(path)
    assert lower_trace(Trace.load(path)).text() == text  # saved and read back


def test_graph_open_hands_model_explorer_the_module_with_its_locations(monkeypatch, program, capsys):
    """--open with the optional package: Model Explorer gets a .mlir file whose locations
    name the records (checked by hand with ai-edge-model-explorer 0.1.34: the server starts
    and its MLIR adapter groups the ops by those names). Without it: one clear line."""
    import sys
    import types

    opened = []
    fake = types.ModuleType("model_explorer")
    fake.visualize = lambda path: opened.append(path)
    monkeypatch.setitem(sys.modules, "model_explorer", fake)
    assert main(["graph", program, "-i", "f32[2,3]", "-i", "f32[3,4]", "--open"]) == 0
    (path,) = opened
    text = open(path).read()
    assert path.endswith(".mlir") and "stablehlo.dot_general" in text and "rec0:matmul" in text
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # not installed: import fails
    assert main(["graph", program, "-i", "f32[2,3]", "-i", "f32[3,4]", "--open"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install ai-edge-model-explorer" in err[0]
