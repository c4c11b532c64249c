"""The generated SPMD differential: every registered op, its sample's tensor inputs placed on
a 2- or 4-device mesh (each along a random dimension it divides, or replicated), must give
the one-device compiled result: bitwise for elementwise ops, within the tolerance table
otherwise. A few examples per op (``EXAMPLES``); seeded like the property tests."""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import config
from hlotrace.dispatch import apply
from hlotrace.errors import BackendError
from hlotrace.ops import OPS
from hlotrace.testing import strategies
from hlotrace.testing.check import example_seed
from hlotrace.testing.differential import assert_bitwise_equal
from hlotrace.testing.tolerances import assert_close, tolerance_for

EXAMPLES = config.get("HLOTRACE_SPMD_EXAMPLES") or 6
BITWISE_FAMILIES = {"elementwise", "math", "math_binary", "bitwise"}
# Elementwise ops compared within the tolerance table instead: XLA:CPU evaluates them on a
# vector path and a scalar path whose last bits differ, and a per-device shape picks the
# path (one device already: float64 arctan of 0.7588865181413276 is 0.649164263255168 in a
# 1-element array, 0.6491642632551679 in a 2-element one).
VECTOR_PATH_DEPENDENT = {
    "exp", "log", "tanh", "sin", "cos", "rsqrt", "power", "log1p", "expm1", "erf", "tan", "arctan",
    "sinh", "cosh", "atan2",
}  # fmt: skip
# What the partitioner does differently: it computes many non-elementwise ops on a split
# operand as masked local pieces summed over the devices (an all-reduce; also reshards and
# pads), and -0.0 + 0.0 is +0.0, so an expected -0.0 may come back +0.0. Seen (12 examples
# per op, base seeds 0-5) in getitem, take, take_along_axis, scatter_add, max_pool2d_gather, pad,
# repeat, scan and sharding_constraint; so the sign of zero is not compared for the ops
# checked against the tolerance table (everything else about their results is).
MESHES = [((2,), ("data",)), ((4,), ("data",)), ((2, 2), ("data", "model"))]


def _placement(data, array, mesh):
    """A spec for ``array``: one mesh axis (or both) on a dimension it divides (3 times in
    4 where there is one), else replicated."""
    options = []
    for axes in [(a,) for a in mesh.axis_names] + ([mesh.axis_names] if len(mesh.axis_names) > 1 else []):
        parts = int(np.prod([mesh.axis_size(a) for a in axes]))
        for d, n in enumerate(array.shape):
            if n % parts == 0:
                options.append(dist.P(*([None] * d), axes if len(axes) > 1 else axes[0]))
    if not options or data.draw(st.integers(0, 3)) == 0:
        return dist.P()
    return data.draw(st.sampled_from(options))


def run_sample(op, sample, tensors, positions, platform="cpu"):
    """``op`` on ``sample`` with the tensors at ``positions`` replaced by ``tensors``,
    compiled for ``platform`` (or for the mesh the tensors are placed on): its second call."""

    def program(*inputs):
        filled = list(sample.args)
        for position, tensor in zip(positions, inputs, strict=True):
            filled[position] = tensor
        return apply(op, *filled, **sample.attrs)

    program.__name__ = f"spmd_{op.name}"
    traced = ht.xla_trace(program, platform=platform)
    traced(*tensors)
    out = traced(*tensors)
    assert traced.cache_size == 1
    return out


def seeded_examples(key: str, base_seed: int, examples: int):
    """The differential's hypothesis settings: ``examples`` examples per test, seeded from
    ``key`` like the property tests, no database or deadline."""

    def decorate(test):
        return seed(example_seed(key, base_seed))(
            settings(
                max_examples=examples,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(test)
        )

    return decorate


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_op_on_a_mesh_gives_the_one_device_result(name, devices, hypothesis_base_seed):
    op = OPS[name]

    @seeded_examples(f"spmd:{name}", hypothesis_base_seed, EXAMPLES)
    @given(op.sample(strategies), st.data())
    def run(sample, data):
        positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
        # A mesh that can split some input if one can (sharding_constraint's sample names
        # both axes of the 2x2 mesh).
        meshes = MESHES if name != "sharding_constraint" else MESHES[2:]
        arrays = [sample.args[i] for i in positions]
        splittable = [m for m in meshes if any(n and n % min(m[0]) == 0 for a in arrays for n in a.shape)]
        shape, names = data.draw(st.sampled_from(splittable or meshes))
        mesh = dist.Mesh(shape, names, devices=devices[: int(np.prod(shape))])
        expected = run_sample(op, sample, [ht.tensor(np.array(sample.args[i])) for i in positions], positions)
        placed = [
            dist.shard(ht.tensor(np.array(sample.args[i])), mesh, _placement(data, sample.args[i], mesh))
            for i in positions
        ]
        try:
            actual = run_sample(op, sample, placed, positions)
        except BackendError as exc:
            if "crashes the process" in str(exc):
                return  # a module XLA's partitioner would die on, refused cleanly (runtime/spmd.py)
            raise
        if positions:
            assert actual.sharding is not None and actual.sharding.mesh == mesh
        assert_mesh_result(
            op, actual, expected, f"{name} on {mesh} with inputs {[t.sharding.spec for t in placed]}: {sample!r}"
        )

    run()


def assert_mesh_result(op, actual, expected, what: str) -> None:
    """A mesh's result against the one-device one: bitwise for elementwise ops, else within
    the tolerance table, signs of zero not compared (see above)."""
    if op.family in BITWISE_FAMILIES and op.name not in VECTOR_PATH_DEPENDENT:
        assert_bitwise_equal([actual.numpy()], [expected.numpy()], what)
    else:
        tolerance = tolerance_for(op.name, expected.dtype)._replace(signed_zeros=False)
        assert_close(actual.numpy(), expected.numpy(), tolerance, what=what)
