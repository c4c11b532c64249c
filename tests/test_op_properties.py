"""Generated from the op registry: every registered op's compiled (PJRT) result must match
its eager NumPy reference on hypothesis-drawn samples (NaN/inf positions and the sign of
zero exactly, other values within hlotrace.testing.tolerances). One test per op and primary
dtype, each with its own seed, so ops sharing a strategy still see different examples.
Nobody writes a per-op test here.
"""

import os
import shlex
import sys

import numpy as np
import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
from hlotrace.lowering.registry import RULES
from hlotrace.ops import OPS
from hlotrace.testing.check import SEED_ENV, admitted_dtypes, property_test

CASES = [
    pytest.param(name, dtype, id=name if dtype is None else f"{name}-{np.dtype(dtype).name}")
    for name in sorted(OPS)
    if OPS[name].sample is not None
    for dtype in admitted_dtypes(OPS[name])
]


def reproduce_command(nodeid: str, base: int) -> str:
    profile = os.environ.get("HLOTRACE_HYPOTHESIS_PROFILE", "ci")
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else sys.executable
    return f"HLOTRACE_HYPOTHESIS_PROFILE={profile} {SEED_ENV}={base} {python} -m pytest {shlex.quote(nodeid)}"


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_compiled_matches_eager(name, dtype, hypothesis_base_seed, request):
    op = OPS[name]
    if name not in RULES:
        pytest.fail(f"op {name!r} has no lowering rule")
    try:
        property_test(op, hypothesis_base_seed, dtype)()
    except Exception as exc:
        exc.add_note(f"Reproduce with: {reproduce_command(request.node.nodeid, hypothesis_base_seed)}")
        raise
