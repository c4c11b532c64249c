"""Generated from the op registry: every registered op applied eagerly with the device engine
(HLOTRACE_EAGER=device, ``ht.eager_engine("device")``) matches its NumPy reference as the
compiled op must (hlotrace.testing.engine_check). A few examples per op and dtype here
(ENGINE_EXAMPLES); `make test-seeds` and the thorough profile draw more."""

import numpy as np
import pytest
from hypothesis import settings

from hlotrace.ops import OPS
from hlotrace.testing.check import admitted_dtypes, property_test
from hlotrace.testing.engine_check import check_device_engine

# Under the ci profile 2 of the property tests' 25 examples: every op and dtype still runs
# under both engines, without doubling the suite's time (TESTING.md, "The engine column").
ENGINE_EXAMPLE_SHARE = 0.08

CASES = [
    pytest.param(name, dtype, id=name if dtype is None else f"{name}-{np.dtype(dtype).name}")
    for name in sorted(OPS)
    if OPS[name].sample is not None
    for dtype in admitted_dtypes(OPS[name])
]


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_device_engine_matches_the_reference(name, dtype, hypothesis_base_seed):
    examples = max(1, round(settings.default.max_examples * ENGINE_EXAMPLE_SHARE))
    property_test(OPS[name], hypothesis_base_seed, dtype, checker=check_device_engine, max_examples=examples)()


def test_the_expected_values_come_from_the_numpy_references_under_either_engine():
    """The oracle never runs on the engine it checks: with the device engine selected for
    the process (HLOTRACE_EAGER=device), check.run_eager and the gradient checks still compute
    with the NumPy references (a sample's expected value costs no device execution)."""
    import hlotrace as ht
    from hlotrace.engines import eager_engine
    from hlotrace.testing.check import run_eager
    from hlotrace.testing.sampling import OpSample

    sample = OpSample((np.arange(4, dtype=np.float32), np.ones(4, np.float32)), {}, ())
    with eager_engine("device"):
        before = ht.metrics()["eager_executions"]
        expected = run_eager(OPS["add"], sample)
        assert ht.metrics()["eager_executions"] == before
    np.testing.assert_array_equal(expected, np.arange(4) + 1.0)
