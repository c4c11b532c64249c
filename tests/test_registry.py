"""Registry contracts: every op has a rule and a sample strategy; duplicates are refused."""

import pathlib

import pytest

import hlotrace.lowering.rules  # noqa: F401
from hlotrace.lowering.registry import RULES, rule
from hlotrace.ops import OPS
from hlotrace.ops.registry import OpDef, register_op

# Ops allowed to lack a lowering rule. This file may only shrink (like PyTorch's expect
# files for decompositions): adding a name here needs a reason in review.
MISSING_RULES_FILE = pathlib.Path(__file__).with_name("ops_missing_rules.txt")


def _allowed_missing() -> set[str]:
    lines = MISSING_RULES_FILE.read_text().splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_every_op_has_a_rule_except_the_checked_in_list():
    missing = sorted(set(OPS) - set(RULES))
    assert missing == sorted(_allowed_missing()), (
        f"ops without a lowering rule: {missing}; the list in {MISSING_RULES_FILE.name} must match "
        "(and may only shrink)"
    )


def test_missing_rules_list_is_empty():
    assert _allowed_missing() == set(), "every op has a rule today; keep it that way"


def test_every_op_has_a_sample_strategy():
    lacking = sorted(name for name, op in OPS.items() if op.sample is None)
    assert lacking == [], f"ops without a hypothesis sample strategy (no property test): {lacking}"


def test_every_rule_belongs_to_an_op():
    assert sorted(set(RULES) - set(OPS)) == []


def test_the_issue_op_set_is_registered():
    expected = {
        "add",
        "subtract",
        "multiply",
        "divide",
        "power",
        "maximum",
        "minimum",
        "equal",
        "not_equal",
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "logical_and",
        "logical_or",
        "negative",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "tanh",
        "sin",
        "cos",
        "logical_not",
        "where",
        "astype",
        "sum",
        "max",
        "min",
        "mean",
        "matmul",
        "reshape",
        "transpose",
        "broadcast_to",
        "expand_dims",
        "squeeze",
        "concat",
        "getitem",
    }
    assert expected <= set(OPS), sorted(expected - set(OPS))


def test_duplicate_op_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_op(OpDef(name="add", family="test", reference=lambda x: x, infer=lambda x: x))


def test_duplicate_rule_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        rule("add")(lambda ctx, x, y: x)
