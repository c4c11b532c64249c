"""The shrinker reduces a planted bug to its minimal program; the repro is a trace file that
`hlotrace replay` re-runs (exit 1 while the bug is there, 0 once fixed); `hlotrace fuzz`
finds, shrinks and saves it, with a summary table and exit status 1."""

from __future__ import annotations

import os

import numpy as np

import hlotrace as ht
from hlotrace import functional as F
from hlotrace.jit import xla_trace
from hlotrace.testing.fuzz.oracles import RULE_BUG, Oracles, check
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.fuzz.shrink import shrink
from hlotrace.tools.cli import main


def _big_program():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    y = np.cos(x).astype(np.float32)

    def fn(x, y):
        a = F.exp(x * 0.5) + y
        b = F.minimum(a, F.tanh(y) * 2.0)  # the planted bug's op
        c = F.sum(F.abs(b), axis=1)
        return c, F.sqrt(F.abs(x)) - 1.0

    traced = xla_trace(fn, passes="")
    traced(ht.tensor(x), ht.tensor(y))
    return Program(traced.trace, [x, y], seed=None)


def test_a_planted_bug_shrinks_to_the_one_op_that_is_wrong(wrong_minimum, tmp_path):
    program = _big_program()
    verdict = check(program, Oracles(passes=()))
    (finding,) = verdict.bugs
    small, found, checks = shrink(program, finding, Oracles(passes=()))
    assert found.kind == RULE_BUG and small.ops() == ["minimum"], str(small)
    assert small.size < program.size and checks > 0
    assert small.description.startswith("rule bug [compiled] in minimum:")
    path = str(tmp_path / "repro.trace.json")
    small.save(path)
    assert main(["replay", path, "--no-interpreter", "--passes", ""]) == 1


def test_replay_exits_0_once_the_bug_is_gone(tmp_path, capsys):
    program = _big_program()
    program.meta = {"class": RULE_BUG, "oracle": "compiled"}
    path = str(tmp_path / "fixed.trace.json")
    program.save(path)
    assert main(["replay", path, "--no-interpreter", "--passes", "cse"]) == 0
    out = capsys.readouterr().out
    assert "every oracle agrees" in out and "does not reproduce" in out


def test_replay_bad_input_is_one_line(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["replay", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("hlotrace: error:") for line in err) and len(err) == 2


def test_fuzz_finds_shrinks_and_saves_a_planted_bug(wrong_minimum, tmp_path, capsys):
    out = str(tmp_path / "out")
    argv = ["fuzz", "--seconds", "120", "--programs", "6", "--jobs", "1", "--seed", "1"]
    status = main([*argv, "--ops", "minimum,add,exp", "--passes", "", "--no-interpreter", "--out", out])
    report = capsys.readouterr().out
    assert status == 1, report
    assert "rule bug" in report and "programs/s" in report
    saved = [f for f in os.listdir(out) if f.endswith(".trace.json")]
    assert saved and all(f.startswith("rule-bug-") for f in saved)
    small = Program.load(os.path.join(out, saved[0]))
    assert small.ops() == ["minimum"], str(small)
    # --stop-on-bug (what the mutation harness's fuzzer column runs) ends at the first one.
    again = str(tmp_path / "again")
    assert (
        main([*argv, "--ops", "minimum,add,exp", "--passes", "", "--no-interpreter", "--out", again, "--stop-on-bug"])
        == 1
    )
    assert len([f for f in os.listdir(again) if f.endswith(".trace.json")]) == 1


def test_fuzz_on_the_unmutated_tree_exits_0_and_is_deterministic(tmp_path, capsys):
    argv = ["fuzz", "--seconds", "120", "--programs", "4", "--jobs", "1", "--seed", "3", "--out", str(tmp_path)]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert main(argv) == 0
    second = capsys.readouterr().out
    assert first.splitlines()[0].split(" in ")[0] == second.splitlines()[0].split(" in ")[0]  # programs, ops


def test_fuzz_imports_a_users_module_and_fuzzes_its_op(tmp_path, capsys):
    module = tmp_path / "my_ops.py"
    module.write_text(
        "from hlotrace.ops.registry import Aval, OpDef, register_op\n"
        "from hlotrace.lowering.registry import rule\n"
        "from hlotrace.runtime.jaxlib_compat import stablehlo\n"
        "register_op(OpDef(name='my_square', family='user', reference=lambda x: x * x,\n"
        "                  infer=lambda x: Aval(x.shape, x.dtype)))\n"
        "@rule('my_square')\n"
        "def _square(ctx, x):\n"
        "    return stablehlo.AddOp(x, x).result   # wrong on purpose: x + x\n"
    )
    from hlotrace.lowering.registry import RULES
    from hlotrace.ops.registry import OPS

    try:
        argv = ["fuzz", "--import", str(module), "--ops", "my_square", "--programs", "3", "--jobs", "1"]
        status = main([*argv, "--no-interpreter", "--passes", "", "--out", str(tmp_path / "o")])
        assert status == 1, capsys.readouterr().out
    finally:
        OPS.pop("my_square", None)
        RULES.pop("my_square", None)


def test_a_program_that_kills_its_worker_is_a_crash_saved_whole(tmp_path, capsys):
    module = tmp_path / "aborting_ops.py"
    module.write_text(
        "import os\n"
        "from hlotrace.ops.registry import Aval, OpDef, register_op\n"
        "from hlotrace.lowering.registry import rule\n"
        "register_op(OpDef(name='my_abort', family='user', reference=lambda x: x,\n"
        "                  infer=lambda x: Aval(x.shape, x.dtype)))\n"
        "@rule('my_abort')\n"
        "def _abort(ctx, x):\n"
        "    os.abort()   # what a crash in XLA or the bindings does to the process\n"
    )
    from hlotrace.lowering.registry import RULES
    from hlotrace.ops.registry import OPS

    out = tmp_path / "o"
    try:
        argv = ["fuzz", "--import", str(module), "--ops", "my_abort", "--programs", "2", "--jobs", "2"]
        status = main([*argv, "--no-interpreter", "--passes", "", "--out", str(out)])
    finally:
        OPS.pop("my_abort", None)
        RULES.pop("my_abort", None)
    text = capsys.readouterr().out
    assert status == 1, text
    saved = sorted(f for f in os.listdir(out) if f.endswith(".trace.json"))
    assert saved and all(f.startswith("crash-") for f in saved), saved
    program = Program.load(out / saved[0])
    assert "my_abort" in program.ops() and "crash [worker]" in program.description


def test_fuzz_bad_arguments_are_one_line(capsys):
    assert main(["fuzz", "--ops", "nope"]) == 2
    assert main(["fuzz", "--passes", "nope"]) == 2
    assert main(["fuzz", "--import", "no_such_module_xyz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("hlotrace: error:") for line in err)
    assert main(["fuzz", "--help"]) == 0
    assert "examples:" in capsys.readouterr().out


def test_the_mutation_harness_fuzzer_column_aims_at_the_mutants_ops():
    from hlotrace.testing.mutation.catalog import Mutant
    from hlotrace.testing.mutation.runner import COLUMNS, fuzz_argv, fuzz_killer

    column = COLUMNS["fuzzer"]
    assert not column.default and column.argv_for is fuzz_argv
    argv = fuzz_argv(Mutant(id="m", file="f", find="a", replace="b", why="w", ops=("minimum",)))
    assert argv[argv.index("--ops") + 1].startswith("minimum,add") and "--stop-on-bug" in argv
    assert "--ops" not in fuzz_argv(None)
    output = (
        "1 programs\nsaved .fuzz-mutant/rule-bug-1.trace.json (1 ops): rule bug [compiled] in minimum: 1 of 1 differ\n"
    )
    assert fuzz_killer(output, 1) == "fuzzer: rule bug, 1 ops"


def test_cut_shapes_resolve_shape_dependent_attributes_again():
    """x[4:0:-1] on 6 elements, cut to 1: the slice must be resolved for the new shape (an
    empty selection), not kept as start 4 (a repro that fails to lower on any tree)."""
    from hlotrace.testing.fuzz.program import retyped

    x = np.arange(6, dtype=np.float32)
    traced = xla_trace(lambda x: x[4:0:-1] * 2.0, passes="")
    traced(ht.tensor(x))
    program = Program(traced.trace, [x])
    small = retyped(program, [x[:1].copy()])
    assert small.trace.records[0].attrs["index"] == (("slice", 0, 0, 1),)
    assert small.trace.vars[small.trace.outputs[0]].shape == (0,)
    assert check(small, Oracles(passes=())).findings == []
