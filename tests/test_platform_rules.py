"""Platform-scoped lowering rules and ``lowering.override`` (issue 23, part 2)."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import lowering
from hlotrace.dispatch import apply
from hlotrace.jit import xla_trace
from hlotrace.lowering.registry import PLATFORM_RULES, RULES, rule, rule_for
from hlotrace.ops.registry import OPS, Aval, OpDef, get_op, register_op
from hlotrace.runtime import platform_name
from hlotrace.runtime.jaxlib_compat import stablehlo

OP = "test_platform_double"


@pytest.fixture
def double():
    """x * 2 whose default rule is wrong (x + x + x); the current platform's rule is right."""
    register_op(OpDef(name=OP, family="user", reference=lambda x: x * 2, infer=lambda x: Aval(x.shape, x.dtype)))

    @rule(OP)
    def _default(ctx, x):
        return stablehlo.AddOp(stablehlo.AddOp(x, x).result, x).result

    here = platform_name()

    @rule(OP, platform=here)
    def _here(ctx, x):
        return stablehlo.AddOp(x, x).result

    @rule(OP, platform="some-other-platform")
    def _elsewhere(ctx, x):
        raise AssertionError("another platform's rule was used")

    yield here
    OPS.pop(OP)
    RULES.pop(OP)
    PLATFORM_RULES[here].pop(OP)
    PLATFORM_RULES["some-other-platform"].pop(OP)


def _compiled(fn, x):
    traced = xla_trace(fn)
    traced(x)
    return traced(x).numpy(), traced


X = np.array([1.0, 2.0, 3.0], np.float32)


def test_the_executables_platform_rule_wins(double):
    out, traced = _compiled(lambda x: apply(get_op(OP), x), ht.tensor(X))
    np.testing.assert_array_equal(out, X * 2)
    assert rule_for(OP, double).__name__ == "_here"
    assert rule_for(OP).__name__ == "_default"  # outside a lowering for a platform
    # Lowered for no platform in particular: the default rule.
    assert lowering.lower_trace(traced.trace).text().count("stablehlo.add") == 2


def test_a_platform_rule_is_registered_once(double):
    with pytest.raises(ValueError, match=f"already registered.*{OP}|{OP}.*already registered"):
        rule(OP, platform=double)(lambda ctx, x: x)


def test_override_is_scoped_and_part_of_the_cache_key():
    def negate_rule(ctx, x):
        return stablehlo.NegOp(x).result

    f = xla_trace(lambda x: F_exp(x))
    x = ht.tensor(X)
    f(x)
    expected = f(x).numpy()
    with lowering.override({"exp": negate_rule}):
        f(x)  # recorded again: the override is in the key
        np.testing.assert_array_equal(f(x).numpy(), -X)
        assert lowering.RULES["exp"] is not negate_rule  # the registry is untouched
    np.testing.assert_array_equal(f(x).numpy(), expected)  # the original program again
    assert f.cache_size == 2
    with pytest.raises(TypeError, match="not a function"):
        with lowering.override({"exp": 3}):
            pass


def F_exp(x):
    from hlotrace import F

    return F.exp(x)


def test_the_rules_command_lists_platform_rules(double, capsys):
    from hlotrace.tools.cli import main

    main(["rules", "--json"])
    import json

    report = json.loads(capsys.readouterr().out)
    (entry,) = [o for o in report["ops"] if o["op"] == OP]
    assert entry["platform_rules"] == sorted([double, "some-other-platform"])
