"""The device eager engine and tensors placed on a mesh (issue 35): an eager op on a placed
tensor runs on the NumPy engine (its global value, as before the device engine existed),
counted in ``eager_host_fallbacks`` -- never a one-device executable fed a sharded buffer.
One-op SPMD executables that keep the placement are not built yet (README, "Not yet")."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F


@pytest.mark.parametrize("spec", [("data",), (None,)], ids=["sharded", "replicated"])
def test_an_eager_op_on_a_placed_tensor_falls_back_to_numpy_and_is_counted(devices, spec):
    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    x = dist.shard(ht.tensor(np.arange(12, dtype=np.float32).reshape(4, 3)), mesh, dist.P(*spec))
    expected = np.exp(np.arange(12, dtype=np.float32).reshape(4, 3) * 2.0)
    results = {}
    for engine in ("numpy", "device"):
        before = ht.metrics()
        with ht.eager_engine(engine):
            results[engine] = F.exp(x * 2.0)
            unplaced = results[engine] + 0.0  # an unplaced result runs on the engine again
        after = ht.metrics()
        fallbacks = after["eager_host_fallbacks"] - before["eager_host_fallbacks"]
        executions = after["eager_executions"] - before["eager_executions"]
        assert (fallbacks, executions) == ((0, 0) if engine == "numpy" else (1, 2)), engine
        np.testing.assert_allclose(unplaced.numpy(), expected, rtol=1e-6)
    # The multiply fell back (the NumPy engine); exp ran on XLA (within an ulp of NumPy's).
    np.testing.assert_allclose(results["device"].numpy(), results["numpy"].numpy(), rtol=1e-6)
