"""Generated from the op registry: every registered op's compiled (PJRT) result must match
its eager NumPy reference on hypothesis-drawn samples (NaN/inf positions exactly, other
values within hlotrace.testing.tolerances). Nobody writes a per-op test here.
"""

import pytest
from hypothesis import given

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
import hlotrace.testing.strategies as strategies
from hlotrace.lowering.registry import RULES
from hlotrace.ops import OPS
from hlotrace.testing.check import check_op

OPS_WITH_SAMPLES = sorted(name for name, op in OPS.items() if op.sample is not None)


@pytest.mark.parametrize("name", OPS_WITH_SAMPLES)
def test_compiled_matches_eager(name):
    op = OPS[name]
    if name not in RULES:
        pytest.fail(f"op {name!r} has no lowering rule")

    @given(op.sample(strategies))
    def check(sample):
        check_op(op, sample)

    check()
