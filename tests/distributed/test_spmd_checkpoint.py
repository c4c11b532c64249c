"""Checkpoints of sharded state: ``ht.save`` writes global values, and ``load_state_dict``
(module and optimizer) keeps every tensor's placement, with its value back on the mesh."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.distributed.inspect import bytes_per_device
from hlotrace.jit import xla_trace

PLAN = {"fc1.weight": dist.P("data"), "fc2.weight": dist.P(None, "data"), "*.bias": dist.P()}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _step(data, label, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _model(mesh, seed=0):
    nn.init.seed(seed)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    if mesh is not None:
        dist.shard_module(net, mesh, PLAN)
    return net, opt, gm


def _batches(mesh, n):
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        x = ht.tensor(rng.standard_normal((32, 8)).astype(np.float32))
        y = ht.tensor(rng.integers(0, 4, 32).astype(np.int32))
        out.append((dist.shard(x, mesh, dist.P("data")), dist.shard(y, mesh, dist.P("data"))) if mesh else (x, y))
    return out


def _moments(net, opt):
    return [(name, key, t) for name, p in net.named_parameters() for key, t in opt.state[p].items() if t.ndim]


@pytest.fixture
def mesh(devices):
    return dist.Mesh((4,), ("data",), devices=devices[:4])


@pytest.fixture
def trained(mesh, tmp_path):
    """A sharded model after two steps, and its checkpoint on disk."""
    net, opt, gm = _model(mesh)
    step = xla_trace(_step, first_call="compiled")
    for x, y in _batches(mesh, 2):
        step(x, y, net, opt, gm)
    path = tmp_path / "ckpt.npz"
    ht.save({"model": net.state_dict(), "optim": opt.state_dict()}, path)
    return net, opt, gm, step, path


def test_save_of_sharded_state_writes_global_values(trained):
    net, opt, _, _, path = trained
    ckpt = ht.load(path)
    for name, p in net.named_parameters():
        assert ckpt["model"][name].shape == p.shape  # global, not one device's shard
        np.testing.assert_array_equal(ckpt["model"][name], p.numpy())
    for index, (name, key, t) in enumerate(_moments(net, opt)):
        stored = ckpt["optim"]["state"][index // 2][key]
        assert stored.shape == t.shape, (name, key)
        np.testing.assert_array_equal(stored, t.numpy())
    with np.load(path) as plain:  # readable without hlotrace, global arrays too
        assert plain["model/fc1.weight"].shape == (16, 8)


def test_loading_into_a_fresh_sharded_model_keeps_placements_and_continues_bitwise(trained, mesh):
    net, opt, gm, step, path = trained
    ckpt = ht.load(path)
    fresh, fresh_opt, fresh_gm = _model(mesh, seed=1)  # other initial values, same plan
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optim"])
    for (name, p), q in zip(net.named_parameters(), fresh.parameters(), strict=True):
        assert q.sharding == p.sharding, name
        np.testing.assert_array_equal(q.numpy(), p.numpy())
    # The values are on the mesh again (each device holds its slice), not on the host.
    assert bytes_per_device(fresh.parameters()) == bytes_per_device(net.parameters())
    resumed = xla_trace(_step, first_call="compiled")
    for x, y in _batches(mesh, 4)[2:]:
        expected = step(x, y, net, opt, gm)
        loss = resumed(x, y, fresh, fresh_opt, fresh_gm)
        np.testing.assert_array_equal(loss.numpy(), expected.numpy())
    for (name, p), q in zip(net.named_parameters(), fresh.parameters(), strict=True):
        np.testing.assert_array_equal(q.numpy(), p.numpy(), err_msg=name)
        assert q.sharding == p.sharding
    for (name, key, a), (_, _, b) in zip(_moments(net, opt), _moments(fresh, fresh_opt), strict=True):
        np.testing.assert_array_equal(b.numpy(), a.numpy(), err_msg=f"{name} {key}")
        assert b.sharding == a.sharding == dict(net.named_parameters())[name].sharding, (name, key)


def test_loading_back_into_the_same_sharded_model_keeps_its_placements_and_executable(trained, mesh):
    net, opt, gm, step, path = trained
    placements = {name: p.sharding for name, p in net.named_parameters()}
    for x, y in _batches(mesh, 3)[1:]:  # train on: the values move away from the checkpoint
        step(x, y, net, opt, gm)
    ckpt = ht.load(path)
    net.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optim"])
    for name, p in net.named_parameters():
        assert p.sharding == placements[name], name
        np.testing.assert_array_equal(p.numpy(), ckpt["model"][name])
    for name, key, t in _moments(net, opt):
        assert t.sharding == placements[name], (name, key)
        assert bytes_per_device([t]) == bytes_per_device([dict(net.named_parameters())[name]])
    x, y = _batches(mesh, 1)[0]
    step(x, y, net, opt, gm)
    assert step.cache_size == 1  # same placements: the same executable
    assert {name: p.sharding for name, p in net.named_parameters()} == placements


def test_a_sharded_checkpoint_loads_into_a_one_device_model(trained):
    net, _, _, _, path = trained
    single, _, _ = _model(None, seed=1)
    single.load_state_dict(ht.load(path)["model"])
    for (name, p), q in zip(net.named_parameters(), single.parameters(), strict=True):
        assert q.sharding is None, name
        np.testing.assert_array_equal(q.numpy(), p.numpy())
