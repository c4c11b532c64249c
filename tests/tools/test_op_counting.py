"""One op-counting rule for every command: ``lower``, ``stages``, ``show --passes`` and
``diff`` give the same number for the same module (nested regions counted, terminators
not), and each command's --help says what is counted."""

from __future__ import annotations

import re

import pytest

from hlotrace.passes.op_count import RULE, TERMINATORS
from hlotrace.tools.cli import main

PROGRAM = """\
from hlotrace import functional as F


def f(h, xs, w):
    def step(h, x):
        h = F.tanh(h @ w + x)
        return h, F.exp(h)

    h, ys = F.scan(step, h, xs)
    out = F.cond(F.sum(h) > 0, lambda a: a * 2.0, lambda a: -a, h)
    return F.softmax(out, axis=-1) + F.gelu(out), ys
"""
INPUTS = ["-i", "f32[3]", "-i", "f32[4,3]", "-i", "f32[3,3]"]


@pytest.fixture
def target(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    return f"{tmp_path / 'prog.py'}:f"


def _lower_count(capsys, *args) -> int:
    assert main(["lower", *args]) == 0
    return int(re.search(r"\): (\d+) stablehlo ops", capsys.readouterr().err).group(1))


@pytest.mark.parametrize("pipeline", ["", "simplify,elide-guards,cse", "fuse-elementwise"])
def test_every_command_counts_a_module_alike(tmp_path, capsys, target, pipeline):
    lowered = _lower_count(capsys, target, *INPUTS, "--passes", "", "--trace-out", str(tmp_path / "t.json"))
    after = _lower_count(capsys, target, *INPUTS, "--passes", pipeline)

    out = tmp_path / "stages"
    assert main(["stages", target, *INPUTS, "--passes", pipeline, "-o", str(out)]) == 0
    titles = capsys.readouterr().err
    assert f"stablehlo ({lowered} ops)" in titles
    passes = re.findall(r"\((\d+) -> (\d+) ops", titles)
    if passes:
        assert int(passes[0][0]) == lowered and int(passes[-1][1]) == after
    else:
        assert lowered == after

    files = sorted(p for p in out.iterdir() if p.suffix == ".mlir")
    assert main(["diff", str(files[0]), str(files[-1])]) in (0, 1)
    total = re.search(r"total\s+(\d+)\s+(\d+)", capsys.readouterr().out)
    assert (int(total.group(1)), int(total.group(2))) == (lowered, after)

    if pipeline:
        assert main(["show", str(tmp_path / "t.json"), "--lower", "--passes", pipeline]) == 0
        timings = re.findall(r"(\d+) -> (\d+) ops", capsys.readouterr().err)
        assert int(timings[0][0]) == lowered and int(timings[-1][1]) == after


def test_regions_count_and_terminators_do_not(capsys, target):
    from hlotrace.lowering import lower_trace
    from hlotrace.passes.op_count import count_ops, op_counts
    from hlotrace.tools.lower_cmd import record_target

    traced = record_target(target, INPUTS[1::2], passes="")
    module = lower_trace(traced.trace).module
    counts = op_counts(module)
    assert not set(counts) & TERMINATORS
    assert counts["stablehlo.tanh"] == 1  # inside the scan's while body
    assert counts["stablehlo.while"] == 1 and counts["stablehlo.case"] == 1
    assert count_ops(module) == sum(counts.values())
    text = module.operation.get_asm()
    assert text.count("stablehlo.return") > 0  # there are terminators, and none was counted


def test_help_says_what_is_counted(capsys):
    for command in ("lower", "stages", "diff", "show"):
        assert main([command, "--help"]) == 0
        assert " ".join(RULE.split()) in " ".join(capsys.readouterr().out.split()), command
