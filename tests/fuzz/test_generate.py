"""The program generator: valid programs (they lower, and their eager values are what the
recording computed), deterministic per seed, drawn from the ops asked for."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hlotrace.lowering import lower_trace
from hlotrace.testing.fuzz.evaluate import evaluate
from hlotrace.testing.fuzz.generate import MAX_OPS, generate, select_ops
from hlotrace.testing.fuzz.program import Program


def _doc(program: Program) -> str:
    doc, arrays = program.trace.to_json()
    return json.dumps(doc, sort_keys=True) + repr(sorted(arrays)) + repr([a.tobytes() for a in program.inputs])


@pytest.mark.parametrize("seed", range(12))
def test_programs_are_valid_and_lower(seed):
    program = generate(seed)
    assert 1 <= program.size <= MAX_OPS
    assert len(program.inputs) == len(program.trace.inputs)
    for var_id, value in zip(program.trace.inputs, program.inputs, strict=True):
        assert program.trace.aval(var_id) == (value.shape, value.dtype)
    env = evaluate(program.trace, program.inputs)
    top_level = [
        *program.trace.inputs,
        *program.trace.constants,
        *(v for r in program.trace.records for v in r.outputs),
    ]
    for var_id in top_level:  # a region's vars share the table; its record computes them inside
        var = program.trace.vars[var_id]
        assert env[var_id].shape == var.shape and env[var_id].dtype == var.dtype, (var_id, program)
    lower_trace(program.trace)  # verifies, or raises


def test_the_same_seed_gives_the_same_program_and_another_seed_another():
    assert _doc(generate(5)) == _doc(generate(5))
    assert _doc(generate(5)) != _doc(generate(6))


def test_values_chain_and_dtypes_vary_over_many_programs():
    programs = [generate(seed) for seed in range(40)]
    records = [r for p in programs for r in p.trace.records]
    chained = sum(
        1 for p in programs for r in p.trace.records if set(r.inputs) & {v for q in p.trace.records for v in q.outputs}
    )
    assert chained / len(records) > 0.2
    dtypes = {str(p.trace.vars[v].dtype) for p in programs for v in p.trace.inputs}
    assert {"float32", "int32", "bool"} <= dtypes
    assert any(0 in p.trace.vars[v].shape for p in programs for v in p.trace.vars)  # zero-size values
    assert any(not np.isfinite(a).all() for p in programs for a in p.inputs if a.dtype.kind == "f")  # specials


def test_only_the_ops_asked_for():
    for seed in range(6):
        assert set(generate(seed, ops=["add", "exp", "sum"]).ops()) <= {"add", "exp", "sum"}
    with pytest.raises(KeyError, match="nope"):
        select_ops(["add", "nope"])


def test_an_op_without_a_sample_strategy_is_generated(user_op_without_sample):
    programs = [generate(seed, ops=[user_op_without_sample, "add"]) for seed in range(8)]
    assert any(user_op_without_sample in p.ops() for p in programs)


def test_generated_astype_stays_inside_its_domain():
    for seed in range(30):
        program = generate(seed, ops=["astype", "multiply", "exp"])
        env = evaluate(program.trace, program.inputs)
        for record in program.trace.records:
            if record.op == "astype":
                from hlotrace.ops.registry import OPS

                assert OPS["astype"].domain(env[record.inputs[0]], **record.attrs) is None


def test_save_and_load_keep_the_program(tmp_path):
    program = generate(3)
    program.description = "a description"
    path = str(tmp_path / "p.trace.json")
    program.save(path)
    back = Program.load(path)
    assert _doc(back) == _doc(program) and back.description == "a description" and back.seed == 3
