"""The spmd oracle (``hlotrace fuzz --devices N``): random programs, their inputs placed at
random on a mesh, agree with one device on the unmutated tree; a planted partitioning bug is an
``spmd bug``, shrunk, saved with its layout and re-run by ``hlotrace replay``; bad ``--devices``
values are one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace.jit import xla_trace
from hlotrace.testing.fuzz.generate import generate
from hlotrace.testing.fuzz.oracles import BUGS, SPMD_BUG, Oracles, check
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.fuzz.session import Settings, fuzz, program_seed
from hlotrace.testing.fuzz.shrink import shrink
from hlotrace.testing.fuzz.spmd import draw_layout, mesh_shapes
from hlotrace.tools.cli import main

CPU_DEVICES_ENV = "HLOTRACE_CPU_DEVICES"

ORACLES = Oracles(passes=(), devices=4)


def _program(seed=3) -> Program:
    x = np.linspace(-3, 3, 48, dtype=np.float32).reshape(8, 6)
    y = np.cos(x).astype(np.float32)

    def fn(x, y):
        return F.sum(F.exp(x) * y, axis=1), F.maximum(x * 2.0 - y, y)

    traced = xla_trace(fn, passes="")
    traced(ht.tensor(x), ht.tensor(y))
    return Program(traced.trace, [x, y], seed=seed)


@pytest.mark.parametrize("session_seed", [0, 1, 2])
def test_generated_programs_on_a_mesh_agree_with_one_device(session_seed):
    report = fuzz(Settings(seed=session_seed, passes=(), interpreter=False, devices=4), 120, max_programs=4)
    assert report.programs == 4
    assert report.bugs == 0, [(k, o.findings) for k, o in report.examples.items()]
    ran = 0
    for index in range(4):
        program = generate(program_seed(session_seed, index))
        verdict = check(program, ORACLES)
        assert not [f for f in verdict.findings if f.oracle == "spmd" and f.kind in BUGS], verdict.findings
        ran += "spmd" not in verdict.skipped
    assert ran >= 2  # the oracle ran (a program without inputs, say, skips it)


def test_a_layout_is_a_mesh_of_the_devices_and_specs_that_fit():
    program = _program()
    assert mesh_shapes(4) == [(4,), (2, 2)] and mesh_shapes(3, 2) == [(3, 1)] and mesh_shapes(8, 2) == [(2, 4), (4, 2)]
    layouts = [draw_layout(program, 4, 8, seed) for seed in range(12)]
    assert draw_layout(program, 4, 8, 5) == layouts[5]  # the same seed, the same layout
    assert {lay.mesh_shape for lay in layouts} == {(4,), (2, 2)}
    assert any(lay.inputs for lay in layouts) and any(len(lay.inputs) < 2 for lay in layouts)
    for lay in layouts:
        assert len(set(lay.device_order)) == 4 and all(0 <= i < 8 for i in lay.device_order)
        for var_id in program.trace.inputs:
            assert lay.fitted(program, var_id) == lay.inputs.get(var_id, ())
        again = type(lay).from_json(json.loads(json.dumps(lay.to_json())))
        assert again == lay


def test_the_correct_tree_has_no_spmd_findings_on_any_layout():
    for seed in range(4):
        verdict = check(_program(seed), ORACLES)
        assert verdict.findings == [] and "spmd" not in verdict.skipped


def test_a_planted_partitioning_bug_is_an_spmd_bug_shrunk_and_replayed(rotated_shards, tmp_path, monkeypatch):
    program = next(p for p in (_program(s) for s in range(8)) if draw_layout(p, 4, 8, p.seed).inputs)
    verdict = check(program, ORACLES)
    kinds = {(f.kind, f.oracle) for f in verdict.findings}
    assert kinds == {(SPMD_BUG, "spmd")}, verdict.findings
    assert "mesh [" in verdict.findings[0].evidence and verdict.layout
    program.meta = {"spmd": verdict.layout}
    small, found, checks = shrink(program, verdict.findings[0], ORACLES)
    assert found.kind == SPMD_BUG and small.size < program.size and checks > 0
    assert small.meta["spmd"]["inputs"], small.meta  # the layout it shows on, renumbered
    path = str(tmp_path / "spmd.trace.json")
    small.save(path)
    assert main(["replay", path, "--no-interpreter", "--passes", ""]) == 1
    monkeypatch.undo()  # the bug fixed: the saved layout runs clean
    assert check(Program.load(path), Oracles(passes=())).findings == []
    assert main(["replay", path, "--no-interpreter", "--passes", ""]) == 0


@pytest.fixture
def cpu_devices_env(monkeypatch):
    """hlotrace's CPU client made first, so that ``hlotrace fuzz --devices`` in this process
    leaves HLOTRACE_CPU_DEVICES alone (the oracle then takes a separate client); the variable
    put back afterwards all the same."""
    from hlotrace import runtime

    runtime.client("cpu")
    monkeypatch.setenv(CPU_DEVICES_ENV, os.environ.get(CPU_DEVICES_ENV, ""))


def test_fuzz_devices_gives_a_fresh_cpu_client_the_devices():
    code = (
        "from hlotrace.tools.fuzz_cmd import check_devices; check_devices(4); import os; "
        "import hlotrace.distributed as dist; print(os.environ['HLOTRACE_CPU_DEVICES'], len(dist.devices('cpu')))"
    )
    env = {k: v for k, v in os.environ.items() if k != CPU_DEVICES_ENV}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "8"]  # a pool of 8 to draw each mesh's 4 devices from


def test_fuzz_devices_finds_saves_and_exits_1_on_the_planted_bug(rotated_shards, cpu_devices_env, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["fuzz", "--devices", "4", "--programs", "6", "--seconds", "120", "--jobs", "1", "--no-interpreter"]
    code = main([*argv, "--passes", "", "--ops", "add,multiply,sum,transpose", "--stop-on-bug", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 1, text
    assert "spmd bug" in text and "saved " in text
    saved = sorted(out.glob("spmd-bug-*.trace.json"))
    assert saved, text
    assert json.loads(saved[0].read_text())["fuzz"]["spmd"]["mesh"]


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--devices", "1"], None, "--devices must be at least 2"),
        (["--devices", "500"], None, "at most 64"),
        (["--devices", "4"], "2", "HLOTRACE_CPU_DEVICES=2 gives the CPU only 2 device(s)"),
        (["--devices", "4"], "many", "expected an integer >= 1 (the number of CPU devices)"),
    ],
)
def test_bad_devices_are_one_clear_error(argv, env, message, cpu_devices_env, monkeypatch, capsys):
    if env is not None:
        monkeypatch.setenv(CPU_DEVICES_ENV, env)
    assert main(["fuzz", "--programs", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
