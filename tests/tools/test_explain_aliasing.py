"""`hlotrace explain` of a saved training step keeps its aliasing (issue 37, item 3): the
trace file records which donated inputs the step's outputs are written into, and explain
lowers with them, so its module and report alias exactly as the live step's do."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace
from hlotrace.lowering import lower_trace
from hlotrace.tools.cli import main
from hlotrace.tools.explain_cmd import aliasing
from hlotrace.trace import Trace

_ALIASED_ARG = re.compile(r"%arg(\d+): tensor<[^>]*> \{[^}]*tf\.aliasing_output = (\d+)")


def _aliased_args(stablehlo: str) -> set[tuple[int, int]]:
    return {(int(i), int(o)) for i, o in _ALIASED_ARG.findall(stablehlo)}


@pytest.fixture(scope="module")
def trained_step():
    nn.init.seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gm = GradManager().attach(net.parameters())

    @xla_trace
    def step(data, label, *, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(data), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    data, label = ht.tensor(np.ones((4, 8), np.float32)), ht.tensor(np.zeros(4, np.int32))
    for _ in range(2):  # the second call has the momentum buffers as state
        step(data, label, net=net, opt=opt, gm=gm)
    return step


def test_the_saved_trace_carries_the_donation_and_lowers_as_the_live_step(trained_step, tmp_path):
    live = _aliased_args(trained_step.lowered.text())
    assert len(live) >= 4, "the step updates 4 parameters (and momentum buffers) in place"
    path = tmp_path / "step.trace.json"
    trained_step.trace.save(path)
    loaded = Trace.load(path)
    assert loaded.donate == trained_step.trace.donate
    assert {(i, o) for i, o in loaded.donate.items()} == live
    assert _aliased_args(lower_trace(loaded, donate=loaded.donate).text()) == live


def test_explain_of_the_saved_trace_reports_the_live_aliasing(trained_step, tmp_path, capsys):
    path = str(tmp_path / "step.trace.json")
    trained_step.trace.save(path)
    live = aliasing(trained_step.executable.hlo_text(), trained_step.trace)
    assert {(a["input"], a["output"]) for a in live} == _aliased_args(trained_step.lowered.text())

    assert main(["explain", path, "--passes", "", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["aliasing"] == live
    assert report["memory"]["alias"] > 0
    assert main(["explain", path, "--passes", ""]) == 0
    text = capsys.readouterr().out
    first = live[0]
    assert f"in{first['input']} -> out{first['output']}" in text


def test_a_trace_saved_without_donation_still_explains_with_no_aliasing(trained_step, tmp_path, capsys):
    doc, _ = trained_step.trace.to_json()
    del doc["donate"]  # as a version 2 file written before the key existed
    path = tmp_path / "old.trace.json"
    path.write_text(json.dumps(doc))
    assert Trace.load(path).donate == {}
    assert main(["explain", str(path), "--passes", "", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["aliasing"] == []


def test_a_donation_out_of_range_is_one_line_naming_it(trained_step, tmp_path, capsys):
    doc, _ = trained_step.trace.to_json()
    doc["donate"] = [[999, 0]]
    path = tmp_path / "bad.trace.json"
    path.write_text(json.dumps(doc))
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "999" in err and "out of range" in err, err


def test_every_tool_lowers_a_saved_step_with_its_aliasing(trained_step, tmp_path, capsys):
    """lower_trace without ``donate=`` takes the trace's own map: show/stages/export/graph of
    a saved step alias as the live step does (they passed no map before)."""
    step = trained_step
    live = _aliased_args(step.stablehlo_text)
    assert live  # the step donates its state
    path = tmp_path / "step.trace.json"
    step.trace.save(path)
    assert _aliased_args(lower_trace(Trace.load(path)).text()) == live
    assert main(["show", str(path), "--lower", "--no-locations"]) == 0
    assert _aliased_args(capsys.readouterr().out) == live
