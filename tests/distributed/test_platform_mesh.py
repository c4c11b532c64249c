"""A mesh of one device on every platform present: the CPU always, CUDA where a GPU is (skipped
without one). One GPU is the common case of a mesh of one device, and the SPMD path (Shardy
annotations, the partitioner with one partition, results built from their shards) is not the
one-device path: each test compares the two on the same platform.

- every registered op, its sample's inputs placed on the mesh (replicated or along a
  dimension), against the same op compiled for one device of that platform;
- the MLP step data-parallel and FSDP-style, the Megatron MLP on a 1x1 mesh and the
  transformer example data-parallel and FSDP-style, step after step, against one device;
- what a user inspects on such a mesh: no collectives, per-device memory, a checkpoint.

On the GPU: ``pytest tests/distributed/test_platform_mesh.py -k cuda`` (more examples per op
with ``HLOTRACE_SPMD_EXAMPLES=N``).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_spmd_compile import _setup, _train_alike
from test_spmd_differential import assert_mesh_result, run_sample, seeded_examples
from test_spmd_training import OPTIMIZERS, _assert_same_run, _example, _mlp_batches, _mlp_run, _transformer_run

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import config
from hlotrace.distributed.inspect import bytes_per_device, collectives
from hlotrace.errors import BackendError
from hlotrace.ops import OPS
from hlotrace.testing import strategies

EXAMPLES = config.get("HLOTRACE_SPMD_EXAMPLES") or 1


@pytest.fixture(params=["cpu", "cuda"])
def platform(request):
    """The platform under test; its one-device mesh is ``_mesh(platform)``."""
    if request.param == "cuda":
        try:
            dist.devices("cuda")
        except BackendError:
            pytest.skip("no CUDA device here")
    return request.param


def _device(platform):
    """One device of ``platform``: the first of hlotrace's client for it (the one a
    one-device compile for that platform runs on)."""
    return dist.devices(platform)[0]


def _mesh(platform, names=("data",)):
    return dist.Mesh((1,) * len(names), names, devices=[_device(platform)])


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_op_on_a_one_device_mesh_gives_the_one_device_result(name, platform, hypothesis_base_seed):
    op = OPS[name]
    mesh = _mesh(platform, ("data", "model") if name == "sharding_constraint" else ("data",))

    @seeded_examples(f"spmd-one:{name}", hypothesis_base_seed, EXAMPLES)
    @given(op.sample(strategies), st.data())
    def run(sample, data):
        positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
        arrays = [np.array(sample.args[i]) for i in positions]
        expected = run_sample(op, sample, [ht.tensor(a) for a in arrays], positions, platform=platform)
        specs = []
        for a in arrays:  # a mesh axis of size 1 divides every dimension
            dim = data.draw(st.integers(-1, a.ndim - 1))
            specs.append(dist.P() if dim < 0 else dist.P(*([None] * dim), "data"))
        placed = [dist.shard(ht.tensor(a), mesh, s) for a, s in zip(arrays, specs, strict=True)]
        try:
            actual = run_sample(op, sample, placed, positions, platform=platform)
        except BackendError as exc:
            if "crashes the process" in str(exc):
                return  # refused cleanly (runtime/spmd.py), as on a mesh of several devices
            raise
        if positions:
            assert actual.sharding is not None and actual.sharding.mesh == mesh
        assert_mesh_result(op, actual, expected, f"{name} on a one-device {platform} mesh, inputs {specs}: {sample!r}")

    run()


@pytest.mark.parametrize("mode", ["data_parallel", "fsdp"])
def test_a_one_device_mesh_trains_like_one_device(platform, mode):
    """jaxlib's result handlers fail on a one-partition executable, so its results are built
    from the shards (jaxlib_spmd)."""
    mesh = _mesh(platform)
    ref, par = _setup(), _setup()
    dist.shard_module(par[0], mesh, {"*": dist.P("data") if mode == "fsdp" else dist.P()})
    _, many = _train_alike(mesh, ref, par, state_every_step=True, platform=platform)
    assert many.cache_size == 1
    assert all(p.sharding.mesh == mesh for p in par[0].parameters())
    assert collectives(many) == []  # one device: nothing to communicate


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mode", ["data_parallel", "fsdp"])
def test_the_transformer_on_a_one_device_mesh_trains_like_one_device(platform, mode, opt_name):
    example = _example("train_transformer")
    mesh = _mesh(platform)
    one = _transformer_run(example, opt_name, platform=platform)[0]
    many, net, _, step = _transformer_run(example, opt_name, mode, mesh, platform=platform)
    _assert_same_run(many, one, f"transformer on a one-device {platform} mesh, {mode}, {opt_name}")
    assert step.cache_size == 1
    assert all(p.sharding.mesh == mesh for p in net.parameters())


def test_the_megatron_plan_on_a_one_by_one_mesh_and_what_a_user_inspects(platform, tmp_path):
    mesh = _mesh(platform, ("data", "model"))
    one = _mlp_run("adamw", platform=platform)[0]
    many, net, opt, step, gm = _mlp_run("adamw", mesh, platform=platform)
    _assert_same_run(many, one, f"Megatron MLP on a one-device {platform} mesh")
    # What a user inspects: one device, so nothing for the partitioner to communicate, and
    # XLA's arguments are every input whole.
    assert collectives(step) == []
    xs, ys = (dist.shard(ht.tensor(a), mesh, dist.P("data")) for a in _mlp_batches()[0])
    inputs = [xs, ys, *opt._trace_state()[1]]
    assert step.memory_stats()["argument"] == bytes_per_device(inputs)[int(mesh.devices[0].id)]
    # A checkpoint of the placed state: global values, loaded back in place on the mesh.
    path = tmp_path / "mlp.npz"
    ht.save({"model": net.state_dict(), "optim": opt.state_dict()}, path)
    saved = {name: p.numpy().copy() for name, p in net.named_parameters()}
    step(xs, ys, net, opt, gm)  # move away from the checkpoint
    ckpt = ht.load(path)
    net.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optim"])
    for name, p in net.named_parameters():
        np.testing.assert_array_equal(p.numpy(), saved[name], err_msg=name)
        assert p.sharding is not None and p.sharding.mesh == mesh, name
        assert p.sharding.mesh.devices[0].platform == _device(platform).platform
    step(xs, ys, net, opt, gm)
    assert step.cache_size == 1
