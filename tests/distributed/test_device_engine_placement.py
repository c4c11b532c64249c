"""The device eager engine and tensors placed on a mesh (issue 35, item 2): an eager op whose
inputs include a placed tensor runs as a one-op SPMD executable on that mesh (unplaced
operands -- host tensors, Python scalars -- replicated onto it) and its result stays on the
mesh, laid out as the partitioner chose: a batch-split input gives a batch-split result.

Generated over sharded and replicated specs x a 1-D and a 2-D mesh x unary, binary (placed
with placed, with a host tensor, with a Python scalar), reduction, matmul, convolution and
pooling; then autodiff (GradManager) and optimizer steps through placed eager ops. Every
value equals the NumPy engine's within the tolerance table, and the metrics show the eager
executions, no host fallback and no argument re-placed by the executable. A mesh spanning
processes keeps the NumPy engine (counted), and inputs on two meshes are an OpError."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F, nn, optim, spmd_hooks
from hlotrace.autodiff import GradManager
from hlotrace.errors import OpError
from hlotrace.testing.tolerances import assert_close, tolerance_for

MESHES = {"1d": ((4,), ("data",)), "2d": ((4, 2), ("data", "model"))}
# The spec of a sharded input: the batch (first) dimension over "data", and on the 2-D mesh
# the second dimension over "model" too (for a convolution's input, its channels: the
# lowering's guard keeps them whole for the partitioner).
SHARDED = {"1d": ("data",), "2d": ("data", "model")}


def _rng():
    return np.random.default_rng(35)


# name: (tolerance op, input shape, host operand shape or None, function of (x, host),
#        result dims that keep the input's split ("all": the result is laid out as the input))
CASES = {
    "unary": ("exp", (8, 4), None, lambda x, h: F.exp(x), "all"),
    "binary-placed": ("multiply", (8, 4), None, lambda x, h: x * x, "all"),
    "binary-host": ("add", (8, 4), (8, 4), lambda x, h: x + h, "all"),
    "binary-broadcast-host": ("subtract", (8, 4), (4,), lambda x, h: x - h, "all"),
    "python-scalar": ("multiply", (8, 4), None, lambda x, h: x * 2.5, "all"),
    "reduction": ("sum", (8, 4), None, lambda x, h: F.sum(x, axis=1), (0,)),
    "matmul": ("matmul", (8, 4), (4, 6), lambda x, h: x @ h, (0,)),
    "conv": ("conv2d", (8, 2, 6, 6), (3, 2, 3, 3), lambda x, h: F.conv2d(x, h, padding=1), (0,)),
    "pool": ("max_pool2d", (8, 2, 6, 6), None, lambda x, h: F.max_pool2d(x, 2), (0,)),
}


def _mesh(devices, kind):
    shape, names = MESHES[kind]
    return dist.Mesh(shape, names, devices=devices[: int(np.prod(shape))])


def _delta(before, after, *names):
    return {name: after.get(name, 0) - before.get(name, 0) for name in names}


COUNTERS = ("eager_executions", "eager_host_fallbacks", "spmd_replacements", "compiles")  # compiles: programs


def _check_layout(result, x, kept, mesh):
    """``result`` is on ``x``'s mesh, replicated when ``x`` is, else split as ``x`` along ``kept``."""
    assert result.sharding is not None and result.sharding.mesh == mesh
    got = result.sharding.dims(result.ndim)
    wanted = x.sharding.dims(x.ndim)
    if not any(wanted):
        assert not any(got), f"a replicated input gave {result.sharding}"
        return
    for d in range(result.ndim) if kept == "all" else kept:
        assert got[d] == wanted[d], f"dimension {d}: {result.sharding} from {x.sharding}"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("kind", sorted(MESHES))
@pytest.mark.parametrize("split", [True, False], ids=["sharded", "replicated"])
def test_an_eager_op_on_a_placed_tensor_runs_on_its_mesh(devices, case, kind, split):
    op, shape, host_shape, fn, kept = CASES[case]
    mesh = _mesh(devices, kind)
    rng = _rng()
    value = rng.standard_normal(shape).astype(np.float32)
    spec = dist.P(*SHARDED[kind]) if split else dist.P()
    x = dist.shard(ht.tensor(value), mesh, spec)
    host = None if host_shape is None else ht.tensor(rng.standard_normal(host_shape).astype(np.float32))
    with ht.eager_engine("numpy"):
        expected = fn(x, host)
    before = ht.metrics()
    with ht.eager_engine("device"):
        result = fn(x, host)
        again = fn(x, host)  # the cached executable
    after = ht.metrics()
    assert _delta(before, after, *COUNTERS) == dict(zip(COUNTERS, (2, 0, 0, 0), strict=True))
    assert expected.sharding is None  # the NumPy engine's result is a host value
    for got in (result, again):
        _check_layout(got, x, kept, mesh)
        assert_close(got.numpy(), expected.numpy(), tolerance_for(op, np.float32), what=f"{case} {kind}")
    assert x.sharding == dist.NamedSharding(mesh, spec)  # the input kept its placement
    if host is not None:
        assert host.sharding is None  # the unplaced operand stayed where it was


def test_the_executable_is_keyed_by_the_placement(devices):
    """One aval, replicated, split, and split on another mesh: an executable each (a shared
    one would re-place its argument, counted in spmd_replacements, and lay the result out
    as the first input was)."""
    value = np.arange(40, dtype=np.float32).reshape(8, 5)  # a shape no other test uses
    first = dist.Mesh((4,), ("data",), devices=devices[:4])
    second = dist.Mesh((4,), ("data",), devices=devices[4:8])
    inputs = [
        dist.shard(ht.tensor(value), first, dist.P()),
        dist.shard(ht.tensor(value), first, dist.P("data")),
        dist.shard(ht.tensor(value), second, dist.P("data")),
        dist.shard(ht.tensor(value), first, dist.P()),
    ]
    with ht.eager_engine("device"):
        for x in inputs:
            before = ht.metrics()
            y = F.tanh(x)
            after = ht.metrics()
            assert _delta(before, after, *COUNTERS) == dict(zip(COUNTERS, (1, 0, 0, 0), strict=True))
            assert y.sharding == x.sharding
            assert_close(y.numpy(), np.tanh(value), tolerance_for("tanh", np.float32))


def test_inputs_on_two_meshes_are_an_op_error(devices):
    a = dist.shard(ht.tensor(np.ones((4, 2), np.float32)), dist.Mesh((4,), ("data",), devices=devices[:4]), "data")
    b = dist.shard(ht.tensor(np.ones((4, 2), np.float32)), dist.Mesh((4,), ("data",), devices=devices[4:]), "data")
    with ht.eager_engine("device"), pytest.raises(OpError, match=r"add: one eager op runs on one mesh"):
        _ = a + b


def test_a_mesh_spanning_processes_keeps_the_numpy_engine(devices, monkeypatch):
    """Each eager op would need every process in step: there the op runs on its global value
    on the host (counted), never on a one-device executable fed a placed buffer."""
    mesh = _mesh(devices, "1d")
    value = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = dist.shard(ht.tensor(value), mesh, dist.P("data"))
    monkeypatch.setattr(spmd_hooks, "spans_processes", lambda tensors: True)
    before = ht.metrics()
    with ht.eager_engine("device"):
        y = x * 2.0  # falls back: a host result
        z = F.exp(y)  # unplaced: a one-device executable
    after = ht.metrics()
    assert _delta(before, after, *COUNTERS) == dict(zip(COUNTERS, (1, 1, 0, 0), strict=True))
    assert y.sharding is None and z.sharding is None
    assert_close(z.numpy(), np.exp(value * 2.0), tolerance_for("exp", np.float32))


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


# Megatron style on the 2-D mesh (fc1 by output features, fc2 by input features), data
# parallel (everything replicated) on the 1-D one.
PLANS = {
    "1d": {},
    "2d": {"fc1.weight": dist.P("model", None), "fc1.bias": dist.P("model"), "fc2.weight": dist.P(None, "model")},
}
OPTIMIZERS = {
    "sgd-momentum": lambda params: optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw": lambda params: optim.AdamW(params, lr=1e-2, weight_decay=1e-2),
}


def _train(engine, devices, kind, make_optimizer, steps=2):
    """Eager training steps of the MLP placed on ``kind``'s mesh (batch split over "data"):
    (losses, gradients of the first step, parameters after, the net, counters' change)."""
    nn.init.seed(3)
    net = _MLP()
    mesh = _mesh(devices, kind)
    dist.shard_module(net, mesh, PLANS[kind])
    opt = make_optimizer(net.parameters())
    gm = GradManager().attach(net.parameters())
    rng = _rng()
    losses, grads = [], None
    before = ht.metrics()
    with ht.eager_engine(engine):
        for _ in range(steps):
            x = dist.shard(ht.tensor(rng.standard_normal((16, 6)).astype(np.float32)), mesh, dist.P("data"))
            label = dist.shard(ht.tensor(rng.integers(0, 3, 16).astype(np.int32)), mesh, dist.P("data"))
            with gm:
                loss = F.cross_entropy(net(x), label)
                gm.backward(loss)
            if grads is None:
                grads = {name: p.grad for name, p in net.named_parameters()}
            opt.step().clear_grad()
            losses.append(loss)
    after = ht.metrics()
    return losses, grads, net, _delta(before, after, *COUNTERS)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("kind", sorted(MESHES))
def test_backward_and_optimizer_steps_through_placed_eager_ops(devices, kind, optimizer):
    tolerance = tolerance_for("matmul", np.float32)
    ref_losses, ref_grads, ref_net, _ = _train("numpy", devices, kind, OPTIMIZERS[optimizer])
    losses, grads, net, counted = _train("device", devices, kind, OPTIMIZERS[optimizer])
    assert counted["eager_host_fallbacks"] == 0 and counted["spmd_replacements"] == 0
    assert counted["eager_executions"] > 0
    for got, want in zip(losses, ref_losses, strict=True):
        assert got.sharding is not None  # computed on the mesh
        assert_close(got.numpy(), want.numpy(), tolerance, what="loss")
    for name, g in grads.items():
        assert g.sharding is not None, name
        assert_close(g.numpy(), ref_grads[name].numpy(), tolerance, what=f"grad of {name}")
    mesh = _mesh(devices, kind)
    for (name, p), (_, q) in zip(net.named_parameters(), ref_net.named_parameters(), strict=True):
        planned = PLANS[kind].get(name, dist.P())
        assert p.sharding == dist.NamedSharding(mesh, planned), name  # placement kept by the updates
        assert_close(p.numpy(), q.numpy(), tolerance, what=f"{name} after {optimizer}")
