"""`hlotrace graph` and `hlotrace diff` on programs with control flow: a region's records are
drawn inside a frame named like their locations (rec0:scan/body), and diffed at locations
nested under their control-flow op (prog.py:9 scan/body > prog.py:6)."""

from __future__ import annotations

import re

from hlotrace.tools.cli import main

PROGRAM = """\
from hlotrace import functional as F


def f(h, xs, w):
    def step(h, x):
        h = F.tanh(h @ w + x)
        return h, F.{y}(h)

    h, ys = F.scan(step, h, xs)
    return F.cond(F.sum(h) > 0, lambda a: a * 2.0, lambda a: -a, h), ys
"""
INPUTS = ["-i", "f32[3]", "-i", "f32[4,3]", "-i", "f32[3,3]"]


def _program(tmp_path, name: str, y: str = "exp") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "prog.py").write_text(PROGRAM.format(y=y))
    return f"{folder / 'prog.py'}:f"


def test_graph_draws_regions_in_frames_fed_by_the_records_inputs(tmp_path, capsys):
    out = tmp_path / "g.svg"
    assert main(["graph", _program(tmp_path, "a"), *INPUTS, "-o", str(out), "--group", "none"]) == 0
    assert "5 ops (and 6 in 3 regions)" in capsys.readouterr().err
    svg = out.read_text()
    frames = re.findall(r'fill="#555">([^<]+)</text>', svg)
    assert sorted(frames) == ["rec0:scan/body", "rec4:switch/branch0", "rec4:switch/branch1"]
    tips = re.findall(r"<title>([^<]+)</title>", svg)
    assert any(t.startswith("rec0:scan/body/rec2:tanh ") for t in tips)
    assert any(t.startswith("rec4:switch/branch1/rec0:multiply ") for t in tips)
    # The body is drawn above the scan that runs it, and the body's matmul reads the input.
    boxes = {
        title: (float(x), float(y))
        for x, y, title in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)"[^>]*/><text[^>]*>([^<]+)</text>', svg)
    }
    assert boxes["[1] add"][1] < boxes["[0] scan"][1] and boxes["[0] matmul"][1] > boxes["input %0"][1]
    html_out = tmp_path / "g.html"
    assert main(["graph", _program(tmp_path, "b"), *INPUTS, "-o", str(html_out)]) == 0
    assert "6 in 3 control-flow regions" in html_out.read_text()


def test_diff_locates_region_ops_under_their_control_flow_op(tmp_path, capsys):
    traces = {}
    for name, y in (("a", "exp"), ("b", "sin"), ("c", "exp")):
        traces[name] = str(tmp_path / f"{name}.trace.json")
        target = _program(tmp_path, name, y)
        assert main(["lower", target, *INPUTS, "--trace-out", traces[name]]) == 0
    capsys.readouterr()
    assert main(["diff", traces["a"], traces["b"]]) == 1
    text = capsys.readouterr().out
    changed = [line.strip() for line in text.split("by location", 1)[1].splitlines()[1:]]
    assert changed == ["prog.py:9 scan/body > prog.py:7 -1 stablehlo.exponential, +1 stablehlo.sine"]
    # The while and case ops print their location after their regions: counted there.
    assert main(["diff", traces["a"], traces["c"]]) == 0
    same = capsys.readouterr().out
    assert "the same ops everywhere" in same
    assert re.search(r"stablehlo\.while\s+1\s+1", same) and re.search(r"stablehlo\.case\s+1\s+1", same)


def test_diff_sorts_a_regions_ops_after_the_op_holding_them():
    from hlotrace.tools.diff_cmd import _location_key

    locations = ["m.py:12", "m.py:9 scan/body > m.py:6", "m.py:9", "m.py:10", "m.py:9 scan/body > m.py:5"]
    assert sorted(locations, key=_location_key) == [
        "m.py:9",
        "m.py:9 scan/body > m.py:5",
        "m.py:9 scan/body > m.py:6",
        "m.py:10",
        "m.py:12",
    ]
