"""The mutation harness's fuzzer column: which mutants it can test, how a kill is confirmed
against the unmutated tree, and how the report counts it (n/a, the any-column row)."""

from __future__ import annotations

import dataclasses

from hlotrace.testing.mutation import report
from hlotrace.testing.mutation.catalog import Mutant
from hlotrace.testing.mutation.runner import (
    COLUMNS,
    Verdict,
    fuzz_artifact,
    fuzz_confirm,
    fuzz_not_applicable,
    run_columns,
)

SAVED = (
    "9 programs\n"
    "saved .fuzz-mutant/XLA-disagreement-7.trace.json (2 ops): XLA disagreement [compiled] in exp: 1 of 1 differ\n"
    "saved .fuzz-mutant/rule-bug-5.trace.json (1 ops): rule bug [compiled] in minimum: 1 of 1 differ\n"
)


def _mutant(file="hlotrace/lowering/rules/elementwise.py", **kw):
    return Mutant(id="m", file=file, find="a", replace="b", why="w", **kw)


def test_vjp_mutants_are_not_applicable_to_the_fuzzer():
    assert fuzz_not_applicable(_mutant()) is None
    assert fuzz_not_applicable(_mutant("hlotrace/passes/simplify.py")) is None
    assert "VJP" in fuzz_not_applicable(
        dataclasses.replace(_mutant("hlotrace/ops/math/unary.py"), id="tan-vjp-as-tanh")
    )
    assert "VJP" in fuzz_not_applicable(dataclasses.replace(_mutant("hlotrace/autodiff.py"), family="vjp"))
    # pad's index map lives in ops/layout.py and the lowering rule imports it: a forward change
    assert fuzz_not_applicable(_mutant("hlotrace/ops/layout.py")) is None


def test_the_artifact_is_the_first_bugs_repro_not_an_xla_disagreement():
    assert fuzz_artifact(SAVED) == ".fuzz-mutant/rule-bug-5.trace.json"
    assert fuzz_artifact("9 programs\n") == ""
    engine = "saved .fuzz-mutant/engine-bug-2.trace.json (1 ops): engine bug [eager-device] in exp: 1 of 4 differ\n"
    assert fuzz_artifact(engine) == ".fuzz-mutant/engine-bug-2.trace.json"  # the eager-device oracle's kills count


class FakeScratch:
    """Answers ``hlotrace replay`` with a fixed exit status; records what was run."""

    def __init__(self, code: int, output: str = ""):
        self.code, self.output, self.ran = code, output, []

    def run(self, argv, timeout):
        self.ran.append(argv)
        return self.code, self.output, 0.1, False


def test_a_kill_stands_only_if_the_repro_passes_on_the_unmutated_tree():
    kill = Verdict(True, "fuzzer: rule bug, 1 ops", artifact="r.trace.json")
    clean = FakeScratch(0)
    assert fuzz_confirm(clean, kill) == kill
    assert clean.ran[0][-2:] == ("replay", "r.trace.json")
    dirty = FakeScratch(1, "trace ...\nverdict: XLA disagreement [compiled output 0]: got 0.0, eager nan\n")
    voided = fuzz_confirm(dirty, kill)
    assert not voided.killed and "unmutated tree fails too" in voided.by and "XLA disagreement" in voided.by
    # Nothing to confirm: a survivor, or a kill without a saved repro (a crash).
    untouched = FakeScratch(1)
    assert fuzz_confirm(untouched, Verdict(False)) == Verdict(False)
    assert fuzz_confirm(untouched, Verdict(True, "crashed (SIGABRT)")).killed and not untouched.ran


def test_run_columns_marks_a_vjp_mutant_not_applicable_without_running_anything():
    scratch = FakeScratch(1)
    verdicts = run_columns(
        scratch,
        ["fuzzer"],
        [],
        10.0,
        dataclasses.replace(_mutant("hlotrace/ops/math/unary.py"), id="exp-vjp-uses-input"),
    )
    assert verdicts["fuzzer"].not_applicable and not verdicts["fuzzer"].killed and not scratch.ran


def test_the_report_counts_n_a_nowhere_and_the_columns_together():
    mutants = [dataclasses.replace(_mutant(), id=f"m{i}", family="f") for i in range(3)]
    results = report.Results(["suite", "fuzzer"], mutants, {m.name: "x.py:1" for m in mutants})
    results.verdicts = {
        "f/m0": {"suite": Verdict(True, "t"), "fuzzer": Verdict(False, not_applicable="a VJP rule")},
        "f/m1": {"suite": Verdict(False), "fuzzer": Verdict(True, "fuzzer: rule bug, 1 ops")},
        "f/m2": {"suite": Verdict(False), "fuzzer": Verdict(False)},
    }
    assert results.ratio("suite") == (1, 3)
    assert results.ratio("fuzzer") == (1, 2)  # m0 is n/a there
    assert results.ratio(report.ANY) == (2, 3)
    results.targets = {report.ANY: 0.95}
    assert results.below_targets() == ["any column: 2/3 = 66.7% < 95%"]
    text = report.render(results)
    assert "n/a (a VJP rule)" in text and "| any column | 2/3 |" in text
    assert "Survivors (in at least one column): `f/m1`, `f/m2`." in text  # m0 is not a survivor


def test_the_fuzzer_column_is_opt_in_and_confirms_its_kills():
    column = COLUMNS["fuzzer"]
    assert not column.default
    assert column.confirm is fuzz_confirm and column.not_applicable is fuzz_not_applicable
