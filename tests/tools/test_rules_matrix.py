"""``hlotrace rules --matrix``: op x dtype (probed with each op's inference) x platform.

Every cell is checked against an actual eager call: an accepted cell's probe runs through
``ops.apply`` (inference and NumPy reference), and for a refused cell the op's sample
strategy, forced to that dtype with several seeds, only ever draws calls that ``apply``
refuses with an OpError."""

import json

import numpy as np
import pytest

from hlotrace import dtypes as dt
from hlotrace.errors import OpError
from hlotrace.ops import OPS
from hlotrace.testing.check import run_eager
from hlotrace.tools import rules_matrix
from hlotrace.tools.cli import main

REFUSAL_SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def report():
    return rules_matrix.matrix()


def test_the_matrix_follows_the_registries(capsys):
    assert main(["rules", "--matrix", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["op"]: r for r in report["ops"]}
    assert report["dtypes"] == ["i1", "i32", "i64", "f16", "bf16", "f32", "f64"]
    assert rows["add"]["dtypes"]["f32"] == {"cpu": "tested", "cuda": "rule"}
    assert "f32" not in rows["bitwise_and"]["dtypes"]  # its inference refuses floats
    assert rows["bitwise_and"]["dtypes"]["i32"]["cpu"] == "tested"
    assert all(cell["cuda"] != "tested" for r in rows.values() for cell in r["dtypes"].values())
    assert rows["add"]["probes"]["f32"].startswith("f32[")


def test_ops_that_make_tensors_and_control_flow_accept_float32(report):
    # The old matrix retyped array operands only: ops that take their dtype from an
    # attribute showed the one dtype their seed-0 example drew, and control flow the float64
    # its regions were recorded with.
    rows = {r["op"]: r for r in report["ops"]}
    for name in ("zeros", "ones", "full", "eye", "linspace", "arange", "scan", "while_loop", "switch"):
        assert "f32" in rows[name]["dtypes"], name
    assert rows["scan"]["dtypes"]["f32"]["cpu"] == "rule"  # its property test draws float64 only
    assert rows["random_uniform"]["dtypes"].keys() == {"f16", "bf16", "f32", "f64"}  # not its key's i32


@pytest.mark.parametrize("name", sorted(name for name, op in OPS.items() if op.sample is not None))
def test_every_cell_agrees_with_an_eager_call(report, name):
    op = OPS[name]
    row = next(r for r in report["ops"] if r["op"] == name)
    bases = rules_matrix.admitted(op)
    for dtype in dt.SUPPORTED:
        column = dt.short_name(dtype)
        if column in row["dtypes"]:
            sample = rules_matrix.probe(op, dtype, bases)
            assert sample is not None, column
            out = run_eager(op, sample)  # raises if the call is refused after all
            assert isinstance(out, np.ndarray)
            continue
        assert column not in row["probes"]
        assert dtype not in bases, f"{name}'s strategy draws {column}, which the matrix calls refused"
        for example_seed in REFUSAL_SEEDS:
            for sample in rules_matrix.candidates(op, dtype, bases, example_seed):
                with pytest.raises(OpError):
                    run_eager(op, sample)


def test_the_table(capsys):
    assert main(["rules", "--matrix"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("add "))
    assert first.split()[1:] == ["Tr"] * 7
    zeros = next(line for line in out.splitlines() if line.startswith("zeros "))
    assert zeros.split()[1:] == ["Tr"] * 7
    assert "T: rule and generated property test" in out


def test_value_dependent_shapes_are_listed_with_each_engines_path(report):
    entries = {e["expression"]: e for e in report["value_dependent_shapes"]}
    assert "x[bool_mask]" in entries
    assert "shape_syncs" in entries["x[bool_mask]"]["device engine"]
    assert "refused" in entries["x[bool_mask]"]["compiled"]
    text = rules_matrix.text(report)
    assert "Value-dependent shapes" in text and "x[bool_mask]" in text


def test_value_checks_are_listed_from_the_registry(report):
    """Every op with an OpDef.host_check, and only those (the device engine's host-side checks)."""
    assert report["value_checks"] == sorted(n for n, op in OPS.items() if op.host_check is not None)
    assert {"take", "take_along_axis", "scatter_add", "index_add", "index_copy", "power"} <= set(report["value_checks"])
    assert "refused when the operand is on the host" in rules_matrix.text(report)
