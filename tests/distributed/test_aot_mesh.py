"""Ahead of time on a mesh (hlotrace.aot): ``lower`` of placed inputs writes the Shardy mesh
and shardings, ``compile`` is an SPMD executable, and the Compiled call is the function's."""

import numpy as np

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F
from hlotrace.jit import xla_trace
from hlotrace.metrics import metrics


def test_lower_and_compile_placed_inputs(devices):
    mesh = dist.Mesh((4,), ("data",), devices=devices[:4])
    x = dist.shard(ht.tensor(np.arange(32, dtype=np.float32).reshape(8, 4) / 32), mesh, dist.P("data"))
    w = ht.tensor(np.ones((4, 6), np.float32))

    @xla_trace
    def f(x, w):
        return F.tanh(x @ w).sum(axis=1)

    lowered = f.lower(x, w)
    assert 'sdy.mesh @mesh = <["data"=4]>' in lowered.as_text() and f.cache_size == 0
    compiled = lowered.compile()
    counts = metrics()
    result = compiled(x, w)
    assert result.sharding is not None and result.sharding.spec == dist.P("data")
    np.testing.assert_allclose(result.numpy(), np.tanh(x.numpy() @ w.numpy()).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(f(x, w).numpy(), result.numpy())
    assert metrics()["compiles"] == counts["compiles"] and f.cache_size == 1
