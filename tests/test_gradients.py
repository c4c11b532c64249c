"""Generated from the op registry: every differentiable op's VJP is checked (a) eagerly
against central finite differences in float64 and (b) compiled (the backward recorded and
lowered by the ordinary rules) against the eager gradient, on samples drawn by the op's
own strategy. Nobody writes a per-op gradient test here.
"""

import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
from hlotrace.ops import OPS
from hlotrace.ops.registry import NOT_DIFFERENTIABLE
from hlotrace.testing.gradcheck import differentiable_ops, gradient_test

DIFFERENTIABLE = sorted(op.name for op in differentiable_ops(OPS.values()))


def test_every_differentiable_op_has_a_vjp():
    missing = [name for name in sorted(OPS) if OPS[name].vjp is None]
    assert not missing, (
        f"ops without a VJP: {missing}. Add vjp= to their OpDef (see hlotrace/autodiff.py for the "
        f"contract), or vjp=NOT_DIFFERENTIABLE if their result carries no gradient"
    )


def test_non_differentiable_ops_are_marked():
    marked = {name for name, op in OPS.items() if op.vjp is NOT_DIFFERENTIABLE}
    assert {"equal", "less", "logical_and", "logical_not"} <= marked


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_vjp_matches_finite_differences(name, hypothesis_base_seed, request):
    if OPS[name].vjp is None:
        pytest.fail(f"op {name!r} has no VJP")
    gradient_test(OPS[name], hypothesis_base_seed, "fd")()


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_compiled_gradient_matches_eager(name, hypothesis_base_seed, request):
    if OPS[name].vjp is None:
        pytest.fail(f"op {name!r} has no VJP")
    gradient_test(OPS[name], hypothesis_base_seed, "compiled")()
