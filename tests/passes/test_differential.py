"""Generated: every op's samples give bitwise the same results with and without each pass.

One case per registered op with a sample strategy (hlotrace.testing.pass_check): the
sample's program (with its gradient when the op is differentiable) is lowered once, then
run through every pass alone, the default pipeline and all passes together. Nobody writes a
per-op or per-pass case here: a new op or a new pass is covered by registering it.
"""

import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills the rule registry)
from hlotrace.ops import OPS
from hlotrace.testing.pass_check import pass_differential_test, pipelines_under_test

OPS_WITH_SAMPLES = sorted(name for name, op in OPS.items() if op.sample is not None)


def test_every_hlotrace_pass_is_under_test():
    from hlotrace import passes

    tested = {spec.name for pipeline in pipelines_under_test() for spec in passes.parse_pipeline(pipeline)}
    own = {name for name, p in passes.PASSES.items() if not p.builtin and p.module.startswith("hlotrace.")}
    assert own <= tested


@pytest.mark.parametrize("name", OPS_WITH_SAMPLES)
def test_passes_keep_results_bitwise(name, hypothesis_base_seed):
    pass_differential_test(OPS[name], hypothesis_base_seed)()
