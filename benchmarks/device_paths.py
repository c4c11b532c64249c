"""Which per-call paths hlotrace's jaxlib takes on this machine: a compiled call of each
float width, a host array put, a one-device mesh. Prints the paths that fell back to a
slower one (``hlotrace.runtime.jaxlib_execute`` warns once for each); the device check's
first part, so that a jax version that changed a signature shows up before any timing.

    .venv/bin/python -m benchmarks.device_paths
"""

from __future__ import annotations

import sys

import numpy as np


def main() -> int:
    from benchmarks.common import private_compile_cache

    private_compile_cache()
    import hlotrace as ht
    import hlotrace.distributed as dist
    from hlotrace.runtime import jaxlib_execute

    for dtype in (np.float32, np.float64, np.int32):
        f = ht.xla_trace(lambda a, b: (a - b, a * b))
        x, y = np.arange(6, dtype=dtype).reshape(2, 3), np.ones((2, 3), dtype)
        for _ in range(3):
            d, p = f(ht.tensor(x), ht.tensor(y))
        assert np.array_equal(d.numpy(), x - y) and np.array_equal(p.numpy(), x * y), dtype
    mesh = dist.Mesh((1,), ("data",), devices=dist.devices()[:1])
    g = ht.xla_trace(lambda a: (a * 2).sum(axis=0))
    for _ in range(3):
        out = g(dist.shard(ht.tensor(np.ones((4, 3), np.float32)), mesh, dist.P("data")))
    assert np.array_equal(out.numpy(), np.full(3, 8.0, np.float32)) and out.sharding.mesh == mesh
    slow = sorted(jaxlib_execute._warned_slow_paths)
    print(f"per-call paths on {dist.devices()[0].platform}: " + (f"SLOW FALLBACKS {slow}" if slow else "all fast"))
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
