"""``dispatch.apply`` memoizes inference by (op, input avals, attributes), and the device engine
keys its executables the same way: attributes that compare equal but mean something else
must not share an entry (found by tests/test_layout_ops.py: linspace(-0.0, ...) came back
with +0.0 once linspace(0.0, ...) had run)."""

import numpy as np
import pytest

from hlotrace import F
from hlotrace.engines import eager_engine


@pytest.mark.parametrize("engine", ["numpy", "device"])
def test_equal_attributes_of_other_types_or_signs_are_other_applications(engine):
    with eager_engine(engine):
        assert [F.full((2,), v).dtype for v in (1, 1.0, True)] == [np.int32, np.float32, np.bool_]
        assert not np.signbit(F.linspace(0.0, -4.0, 3).numpy()[0])
        assert np.signbit(F.linspace(-0.0, -4.0, 3).numpy()[0])
        assert np.isnan(F.full((1,), float("nan")).numpy()).all()  # NaN keys: found again, not stale
        np.testing.assert_array_equal(F.full((1,), float("nan")).numpy(), [np.nan])
        assert F.full((1,), np.float32(-0.0)).numpy()[0] == 0 and np.signbit(F.full((1,), np.float32(-0.0)).numpy()[0])
        assert not np.signbit(F.full((1,), np.float32(0.0)).numpy()[0])
