"""The fuzzer and user ops without a sample strategy (issue 18): the number of operands
(``OpDef.arity``, else the inference's signature, else the reference's), operand sets of
other dtypes and shapes when the inference refuses the first, programs the generator cannot
build counted apart ("not generated", never a rule bug), and ``hlotrace fuzz`` exiting 2 for
an op that cannot be generated at all."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.lowering.registry import RULES
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op
from hlotrace.testing.fuzz import session
from hlotrace.testing.fuzz.generate import GeneratorError, cannot_generate, generate
from hlotrace.testing.fuzz.inferred import arity
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.fuzz.session import Settings, fuzz
from hlotrace.tools.cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "variadic_user_ops.py")
QUIET = ["--jobs", "1", "--passes", "", "--no-interpreter"]


@pytest.fixture
def user_ops(monkeypatch):
    """The helper module's ops, removed afterwards (however the test imported them: by path
    or by module name), so that the next import registers them again."""
    monkeypatch.syspath_prepend(HERE)
    before_ops, before_rules = set(OPS), set(RULES)
    yield MODULE
    for name in set(OPS) - before_ops:
        OPS.pop(name)
    for name in set(RULES) - before_rules:
        RULES.pop(name)
    session._IMPORTED.discard(os.path.abspath(MODULE))
    session._IMPORTED.discard("variadic_user_ops")
    sys.modules.pop("variadic_user_ops", None)
    sys.modules.pop("hlotrace_user_variadic_user_ops", None)


def _saved(out) -> list[str]:
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".trace.json"))


# -- (a) a wrong rule is found, shrunk, saved and replayed ----------------------------------


def test_a_wrong_rule_of_a_variadic_inference_op_is_found_shrunk_saved_and_replayed(user_ops, tmp_path, capsys):
    out = str(tmp_path / "out")
    argv = ["fuzz", "--import", user_ops, "--ops", "issue18_fma_wrong", "--seconds", "120", "--programs", "4"]
    assert main([*argv, *QUIET, "--seed", "0", "--stop-on-bug", "--out", out]) == 1
    report = capsys.readouterr().out
    assert "rule bug" in report and "issue18_fma_wrong" in report, report
    (path,) = _saved(out)
    assert os.path.basename(path).startswith("rule-bug-")
    small = Program.load(path)
    assert small.ops() == ["issue18_fma_wrong"], str(small)
    assert len(small.trace.records[0].inputs) == 3  # the reference's three operands, not two
    assert main(["replay", "--import", user_ops, path]) == 1
    assert "the saved rule bug [compiled] reproduces" in capsys.readouterr().out


def test_the_session_api_imports_the_module_by_name_and_finds_the_bug(user_ops, tmp_path):
    settings = Settings(
        seed=3,
        ops=("issue18_fma_wrong",),
        imports=("variadic_user_ops",),
        out_dir=str(tmp_path),
        passes=(),
        interpreter=False,
    )
    report = fuzz(settings, 120, jobs=1, max_programs=4, stop_on_bug=True)
    assert report.bugs == 1 and report.not_generated == 0 and report.programs >= 1
    ((kind, path, _, size),) = report.saved
    assert kind == "rule bug" and size == 1 and os.path.exists(path)


# -- (b) the correct rule: no false alarm -----------------------------------------------------


def test_the_same_op_with_a_correct_rule_exits_0_after_running_programs(user_ops, tmp_path, capsys):
    argv = ["fuzz", "--import", user_ops, "--ops", "issue18_fma", "--seconds", "120", "--programs", "6"]
    assert main([*argv, *QUIET, "--seed", "1", "--out", str(tmp_path)]) == 0
    first, *rows = capsys.readouterr().out.splitlines()
    programs, ops = int(first.split()[0]), int(first.split("(")[1].split()[0])
    assert programs == 6 and ops >= 6, first
    assert any(row.split()[:3] == ["not", "generated", "0"] for row in rows), rows
    assert _saved(str(tmp_path)) == []


# -- (c) an op that cannot be generated: exit 2, one line --------------------------------------


def test_an_op_whose_inference_refuses_everything_is_an_error_naming_what_to_add(user_ops, tmp_path, capsys):
    argv = ["fuzz", "--import", user_ops, "--ops", "issue18_refuses,add", "--programs", "2", "--out", str(tmp_path)]
    assert main([*argv, *QUIET]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("hlotrace: error:") and "issue18_refuses" in line, line
    assert "OpDef(sample=...)" in line and "arity=" in line and "this op accepts nothing" in line
    assert captured.out == ""  # nothing ran


def test_programs_that_cannot_be_built_are_not_generated_not_rule_bugs(user_ops, tmp_path):
    settings = Settings(ops=("issue18_refuses",), imports=(user_ops,), out_dir=str(tmp_path), interpreter=False)
    report = fuzz(settings, 60, jobs=1, max_programs=5)
    assert report.programs == 0 and report.not_generated == 5 and report.bugs == 0
    assert not report.classes and _saved(str(tmp_path)) == []
    table = report.table()
    assert "0 programs (0 ops)" in table and "0 per hour" in table
    assert "not generated             5" in table and "this op accepts nothing" in table


def test_a_generator_error_is_counted_apart_and_throughput_counts_programs_that_ran(monkeypatch, tmp_path, capsys):
    from hlotrace.testing.fuzz import generate as generate_module

    real = generate_module.generate

    def every_other(seed, ops=None, max_ops=30):
        if seed % 2:
            raise GeneratorError("add: TypeError: planted")
        return real(seed, ops, max_ops)

    monkeypatch.setattr(generate_module, "generate", every_other)
    report = fuzz(Settings(ops=("add",), passes=(), interpreter=False), 120, jobs=1, max_programs=8)
    assert report.programs + report.not_generated == 8 and report.not_generated > 0 and report.bugs == 0
    assert report.table().splitlines()[0].startswith(f"{report.programs} programs")
    assert f"(programs that ran; {report.not_generated} not generated)" in report.table()

    # Nothing at all generated (an op that builds alone in the first check, never in a
    # program): exit 2 after the session, one line.
    def never(seed, ops=None, max_ops=30):
        raise GeneratorError("never")

    monkeypatch.setattr(generate_module, "generate", never)
    assert main(["fuzz", "--ops", "add", "--programs", "3", *QUIET, "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    (line,) = [line for line in captured.err.splitlines() if line.startswith("hlotrace:")]  # after progress
    assert line.startswith("hlotrace: error: no program could be generated") and "never" in line
    assert captured.err.strip().splitlines()[-1] == line and captured.out == ""


# -- (d) the arity rule ----------------------------------------------------------------------


def _op(infer, reference, **kw) -> OpDef:
    return OpDef(name="issue18_arity_probe", family="user", reference=reference, infer=infer, **kw)


def test_arity_an_explicit_field_wins_over_both_signatures():
    assert arity(_op(lambda x, y: x, lambda a: a, arity=3)) == 3
    assert arity(_op(lambda *avals: avals[0], lambda *arrays: arrays[0], arity=1)) == 1


def test_arity_a_variadic_inference_takes_the_references_signature():
    def ref(a, b, c):
        return a * b + c

    def ref_with_attrs(a, b, c=None, *, axis=0):
        return a

    assert arity(_op(lambda *avals: avals[0], ref)) == 3
    assert arity(_op(lambda *avals, **attrs: avals[0], ref_with_attrs)) == 2  # required positional only
    assert arity(_op(lambda *avals: avals[0], np.add)) == 2  # a ufunc: its nin
    assert arity(_op(lambda *avals: avals[0], np.negative)) == 1
    assert arity(_op(lambda x: x, lambda *arrays: arrays[0], variadic=True)) is None  # concat-like: unknown


def test_arity_a_fixed_inference_signature_wins_over_the_reference():
    def infer(x, y, *, axis=0):
        return x

    assert arity(_op(infer, lambda *arrays: arrays[0])) == 2
    assert arity(_op(lambda x, y=None: x, lambda a, b, c: a)) == 1
    assert arity(_op(lambda *avals: avals[0], lambda *arrays: arrays[0])) is None  # both variadic


# -- the generator tries other operand sets ---------------------------------------------------


def _same(*avals):
    if len({a.shape for a in avals}) > 1 or len({a.dtype for a in avals}) > 1:
        raise ShapeDtypeError("one shape and dtype")
    return avals[0]


def _only(dtype):
    def infer(x):
        if x.dtype != dtype:
            raise ShapeDtypeError(f"only {dtype}")
        return Aval(x.shape, x.dtype)

    return infer


def _rank2_float64(x):
    if x.dtype != dt.float64 or len(x.shape) != 2:
        raise ShapeDtypeError("only float64 matrices")
    return Aval(x.shape, x.dtype)


def _mask_first(m, x, y):
    if m.dtype != dt.bool_ or x.dtype not in dt.FLOATING or (x.shape, x.dtype) != (y.shape, y.dtype):
        raise ShapeDtypeError("where(mask, x, y)")
    if m.shape != x.shape:
        raise ShapeDtypeError("one shape")
    return Aval(x.shape, x.dtype)


def _strict_broadcast(x, y):
    if x.dtype != y.dtype or x.shape == y.shape or x.dtype not in dt.FLOATING:
        raise ShapeDtypeError("two different, broadcast-compatible float shapes")
    try:
        return Aval(tuple(np.broadcast_shapes(x.shape, y.shape)), x.dtype)
    except ValueError:
        raise ShapeDtypeError("shapes do not broadcast") from None


def _matmul(x, y):
    if len(x.shape) != 2 or len(y.shape) != 2 or x.shape[1] != y.shape[0] or x.dtype != y.dtype:
        raise ShapeDtypeError("matrices (m, k) and (k, n)")
    if x.dtype not in dt.FLOATING:
        raise ShapeDtypeError("floats")
    return Aval((x.shape[0], y.shape[1]), x.dtype)


def _sum3(*avals):
    if len(avals) != 3:
        raise ShapeDtypeError(f"three operands, not {len(avals)}")
    return _same(*avals)


PICKY = {
    "issue18_only_bool": (_only(dt.bool_), lambda x: ~x),
    "issue18_only_int32": (_only(dt.int32), lambda x: x + 1),
    "issue18_float64_matrix": (_rank2_float64, lambda x: x * 2),
    "issue18_where": (_mask_first, lambda m, x, y: np.where(m, x, y)),
    "issue18_strict_broadcast": (_strict_broadcast, lambda x, y: x + y),
    "issue18_matmul": (_matmul, lambda x, y: x @ y),
    "issue18_three_of_unknown_arity": (_sum3, lambda *arrays: arrays[0] + arrays[1] + arrays[2]),
}


@pytest.fixture
def picky_ops():
    for name, (infer, reference) in PICKY.items():
        register_op(OpDef(name=name, family="user", reference=reference, infer=infer))
    yield
    for name in PICKY:
        OPS.pop(name, None)


@pytest.mark.parametrize("name", sorted(PICKY))
def test_the_generator_finds_operands_a_picky_inference_accepts(picky_ops, name):
    assert cannot_generate(name) is None
    programs = [generate(seed, ops=[name]) for seed in range(4)]
    assert all(p.ops() and set(p.ops()) == {name} for p in programs)


def test_user_op_steps_take_live_values_and_vary_dtypes_and_ranks(user_ops):
    from hlotrace.testing.fuzz.session import import_user_modules

    import_user_modules([user_ops])
    programs = [generate(seed, ops=["issue18_fma"]) for seed in range(20)]
    records = [(p, r) for p in programs for r in p.trace.records]
    chained = [r for p, r in records if set(r.inputs) & {v for q in p.trace.records for v in q.outputs}]
    assert len(chained) / len(records) > 0.3
    avals = [[p.trace.vars[v] for v in r.inputs] for p, r in records]
    assert len({a[0].dtype for a in avals}) >= 3 and len({len(a[0].shape) for a in avals}) >= 3
    assert any(len({x.shape for x in a}) > 1 for a in avals)  # broadcast-compatible operands


def test_the_error_names_attributes_only_a_sample_strategy_can_give():
    def infer(x, *, axis):
        return x

    register_op(OpDef(name="issue18_needs_axis", family="user", reference=lambda x, axis: x, infer=infer))
    try:
        why = cannot_generate("issue18_needs_axis")
    finally:
        OPS.pop("issue18_needs_axis")
    assert why is not None and "issue18_needs_axis" in why and "attribute(s) axis" in why and "\n" not in why
