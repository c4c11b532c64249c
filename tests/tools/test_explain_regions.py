"""`hlotrace explain` on a program with control flow: XLA instructions computed inside a
while body or a conditional's branch are attributed to the control-flow record holding the
region, with the nested record and its own source line (issue 22)."""

from __future__ import annotations

import json

import pytest

from hlotrace.passes.locations import location_from_name, record_location
from hlotrace.tools.cli import main

PROGRAM = """\
from hlotrace import functional as F


def f(h, xs, w):
    def step(h, x):
        h = F.tanh(h @ w + x)
        return h, F.exp(h)

    h, ys = F.scan(step, h, xs)
    return F.cond(F.sum(h) > 0, lambda a: a * 2.0, lambda a: -a, h), ys
"""
INPUTS = ["-i", "f32[3]", "-i", "f32[4,3]", "-i", "f32[3,3]"]


class _Op:
    def __init__(self, location: str):
        self.location = location


def test_a_nested_location_belongs_to_the_top_level_record():
    found = record_location(_Op('loc("rec0:scan/body/rec2:tanh"("/x/prog.py":6:0))'))
    assert (found.record, found.op, found.nested) == (0, "scan", "scan/body/rec2:tanh")
    assert (found.file, found.line) == ("/x/prog.py", 6)
    assert found.nested_records() == [("body", 2, "tanh")]
    # The backward flag, scope and module path are the top-level record's.
    deep = location_from_name("MLP.fc1/rec3:scan:bwd@s.x#2/body/rec1:switch/branch1/rec0:add")
    assert (deep.record, deep.op, deep.backward, deep.scope, deep.instance, deep.path) == (
        3, "scan", True, "s.x", 2, "MLP.fc1"
    )  # fmt: skip
    assert deep.nested_records() == [("body", 1, "switch"), ("branch1", 0, "add")]
    assert location_from_name("rec1:scan/body/const%7").nested == "scan/body/const%7"
    top = location_from_name("rec2:tanh")
    assert top.nested is None and top.nested_records() == []
    assert location_from_name("const%4") is None


@pytest.fixture
def program(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    return f"{tmp_path / 'prog.py'}:f"


def test_explain_attributes_loop_and_branch_instructions_to_the_control_flow_record(program, capsys):
    assert main(["explain", program, *INPUTS, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    loop = next(i for i in report["instructions"] if "rec0:scan/body/rec2:tanh" in i["ops"])
    assert 0 in loop["records"] and loop["flops"] > 0
    tanh = next(n for n in loop["nested"] if n["op"] == "rec0:scan/body/rec2:tanh")
    assert tanh == {"op": "rec0:scan/body/rec2:tanh", "record": 0, "nested": "scan/body/rec2:tanh",
                    "line": "prog.py:9 scan/body > prog.py:6"}  # fmt: skip
    assert "prog.py:9 scan/body > prog.py:7" in loop["lines"]  # the body's exp
    # Nested record 2 of the body is not top-level record 2 (the greater of the cond).
    assert all(n["record"] == 0 for n in loop["nested"])
    branches = next(i for i in report["instructions"] if i["opcode"] == "conditional")
    assert {"rec4:switch/branch0/rec0:negative", "rec4:switch/branch1/rec0:multiply"} <= set(branches["ops"])
    assert {"prog.py:10 switch/branch0 > prog.py:10", "prog.py:10 switch/branch1 > prog.py:10"} <= set(
        branches["lines"]
    )
    lines = {entry["line"]: entry for entry in report["lines"]}
    assert lines["prog.py:9 scan/body > prog.py:6"]["ops"] == [
        "rec0:scan/body/rec0:matmul", "rec0:scan/body/rec1:add", "rec0:scan/body/rec2:tanh"
    ]  # fmt: skip
    assert lines["prog.py:9 scan/body > prog.py:6"]["flops"] > 0
    assert main(["explain", program, *INPUTS]) == 0
    text = capsys.readouterr().out
    assert "prog.py:9 scan/body > prog.py:6" in text and "rec0:scan/body/rec2:tanh" in text
