"""Where XLA's SPMD partitioner (jaxlib 0.10.2) goes wrong, and what hlotrace does about it
(hlotrace.distributed.compile.Plan.guard, hlotrace.runtime.spmd._refuse_known_crashes).
Each case was found by the SPMD differential (test_spmd_differential.py)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace.dispatch import apply
from hlotrace.errors import BackendError
from hlotrace.ops import OPS


def _compare(op_name, arrays, specs, attrs, mesh):
    op = OPS[op_name]
    one = ht.xla_trace(lambda *xs: apply(op, *xs, **attrs))
    tensors = [ht.tensor(a) for a in arrays]
    one(*tensors)
    expected = one(*tensors).numpy()
    many = ht.xla_trace(lambda *xs: apply(op, *xs, **attrs))
    placed = [dist.shard(ht.tensor(a), mesh, s) for a, s in zip(arrays, specs, strict=True)]
    many(*placed)
    return many(*placed).numpy(), expected, many


def test_a_convolution_split_along_a_spatial_dimension_gives_the_one_device_values(devices):
    # Unguarded, XLA doubles some outputs (jax.jit with these shardings as well).
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 1, 3, 6)), rng.standard_normal((2, 1, 1, 3))
    mesh = dist.Mesh((2, 2), ("data", "model"), devices=devices[:4])
    attrs = {"stride": (3, 3), "padding": 1, "dilation": (2, 1), "groups": 1}
    actual, expected, many = _compare(
        "conv2d", [x, w], [dist.P(None, None, None, "model"), dist.P("data")], attrs, mesh
    )
    np.testing.assert_allclose(actual, expected, rtol=1e-14, atol=1e-14)
    assert "sdy.sharding_constraint" in many.stablehlo_text  # the guard keeps spatial dims whole


def test_a_grouped_convolution_with_its_kernel_split_gives_the_one_device_values(devices):
    # With the batch and feature dimensions left open to propagation, XLA got this wrong.
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 6)).astype(np.float32), rng.standard_normal((4, 1, 3)).astype(np.float32)
    mesh = dist.Mesh((4,), ("data",), devices=devices[:4])
    attrs = {"stride": 3, "padding": 0, "dilation": 1, "groups": 2}
    actual, expected, _ = _compare("conv1d", [x, w], [dist.P(), dist.P("data")], attrs, mesh)
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def test_max_pool_backward_split_along_one_dimension_over_two_axes_does_not_abort(devices):
    # Unguarded, XLA aborts the process (spmd_partitioner.cc:885): run it in a child.
    script = textwrap.dedent(
        """
        import os
        os.environ["HLOTRACE_CPU_DEVICES"] = "4"
        import numpy as np, hlotrace as ht, hlotrace.distributed as dist
        from hlotrace.ops import OPS
        from hlotrace.dispatch import apply
        op = OPS["max_pool2d_backward"]
        attrs = {"kernel_size": (1, 1), "stride": 1, "padding": (0, 0)}
        a = [np.random.default_rng(0).standard_normal((2, 3, 3, 4)), np.full((2, 3, 3, 4), 0.0625)]
        one = ht.xla_trace(lambda x, g: apply(op, x, g, **attrs))
        one(*map(ht.tensor, a))
        mesh = dist.Mesh((2, 2), ("data", "model"))
        specs = [dist.P(None, None, None, "data"), dist.P(None, None, None, "model")]
        placed = [dist.shard(ht.tensor(v), mesh, s) for v, s in zip(a, specs)]
        many = ht.xla_trace(lambda x, g: apply(op, x, g, **attrs))
        many(*placed)
        assert np.array_equal(many(*placed).numpy(), one(*map(ht.tensor, a)).numpy())
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "HLOTRACE_CPU_DEVICES"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_a_grouped_convolution_of_an_empty_operand_is_refused_instead_of_crashing(devices):
    # XLA's partitioner dies with SIGFPE on it (even replicated).
    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    attrs = {"kernel_size": (1, 2), "stride": (3, 3), "padding": (1, 2), "dilation": (2, 1), "groups": 3}
    with pytest.raises(BackendError, match="SIGFPE"):
        _compare(
            "conv2d_weight_grad",
            [np.zeros((0, 3, 4, 5), np.float32), np.zeros((0, 6, 2, 3), np.float32)],
            [dist.P(), dist.P()],
            attrs,
            mesh,
        )
