"""The fuzzer generates programs with control flow (issue 22): switch, scan and while_loop
records of several outputs whose regions are drawn from the run's ops, checked by every
oracle (eager, compiled, passes, the interpreter, the float64 judge), and shrunk by
removing a region record whole or, inside a switch's or scan's regions, their records."""

from __future__ import annotations

import pytest

from hlotrace.testing.fuzz.evaluate import evaluate
from hlotrace.testing.fuzz.generate import generate
from hlotrace.testing.fuzz.interpreter import Interpreter
from hlotrace.testing.fuzz.oracles import RULE_BUG, Oracles, check
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.fuzz.shrink import shrink
from hlotrace.tools.cli import main

OPS = ["switch", "scan", "while_loop", "add", "multiply"]


def _with_regions(seeds, ops=OPS) -> list[Program]:
    """The programs of ``seeds`` that hold a control-flow record of several outputs."""
    return [p for p in map(lambda s: generate(s, ops=ops), seeds) if any(len(r.outputs) > 1 for r in p.trace.records)]


def test_generated_programs_hold_multi_output_control_flow_records():
    programs = [generate(seed, ops=OPS) for seed in range(40)]
    multi = {r.op for p in programs for r in p.trace.records if len(r.outputs) > 1}
    assert multi == {"switch", "scan", "while_loop"}
    for program in programs[:10]:  # every output of every record is evaluated, also in float64
        env, wide = evaluate(program.trace, program.inputs), evaluate(program.trace, program.inputs, wide=True)
        assert all(v in env and v in wide for r in program.trace.records for v in r.outputs)


def test_programs_with_regions_pass_every_oracle_on_the_unmutated_tree():
    interpreter = Interpreter()
    try:
        for program in _with_regions(range(200, 212))[:4]:
            verdict = check(program, Oracles(interpreter=interpreter))
            assert verdict.findings == [], [str(f) for f in verdict.findings]
            assert "interpreter" not in verdict.skipped, verdict.skipped
    finally:
        interpreter.close()


def test_a_fuzz_run_with_control_flow_ops_is_clean(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["fuzz", "--seconds", "8", "--seed", "5", "--ops", ",".join(OPS), "--out", str(out)]
    assert main(args) == 0
    assert "rule bug                  0" in capsys.readouterr().out


@pytest.fixture
def wrong_tanh():
    """tanh lowered as tanh(tanh(x)): tanh appears only inside the generated regions here."""
    from hlotrace.lowering.registry import RULES
    from hlotrace.runtime.jaxlib_compat import stablehlo

    saved = RULES["tanh"]
    RULES["tanh"] = lambda ctx, x: stablehlo.TanhOp(stablehlo.TanhOp(x).result).result
    yield
    RULES["tanh"] = saved


def _region_ops(program) -> list[list[str]]:
    from hlotrace.testing.fuzz.shrink import _region_slots

    return [[x.op for x in region.records] for r in program.trace.records for _, _, region in _region_slots(r.attrs)]


def test_a_wrong_rule_inside_a_body_is_found_and_shrunk_inside_its_region(wrong_tanh, tmp_path):
    program = next(
        p for p in _with_regions(range(300, 340), ["scan", "while_loop", "switch", "add"])
        if any(len(r.outputs) > 1 for r in p.trace.records)
    )  # fmt: skip
    findings = [f for f in check(program, Oracles(passes=())).findings if f.kind == RULE_BUG]
    assert findings, "the wrong tanh rule inside a region was not found"
    small, found, _ = shrink(program, findings[0], Oracles(passes=()))
    assert found.kind == RULE_BUG and len(small.trace.records) <= len(program.trace.records)
    assert any(r.op in ("scan", "while_loop", "switch") for r in small.trace.records)
    # Inside the regions too (switch and scan): only the wrong op is left, e.g. a switch of
    # branches [tanh], [], [] from one of [add, tanh, add, tanh], [add, tanh] * 5, ...
    regions = _region_ops(small)
    assert ["tanh"] in regions and all(ops in ([], ["tanh"]) for ops in regions), regions
    path = tmp_path / "repro.trace.json"
    small.save(path)
    loaded = Program.load(path)
    assert [f.kind for f in check(loaded, Oracles(passes=())).findings] == [RULE_BUG]
