"""hlotrace.distributed.inspect: the collectives XLA's partitioner inserted (kind, bytes per
device, mesh axes, the ops and source lines behind them), bytes held per device, and XLA's
memory plan per device."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.distributed.inspect import _groups, bytes_per_device, collectives, format_collectives
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))  # FORWARD-LINE


def _step(data, label, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        gm.backward(loss)  # BACKWARD-LINE
    opt.step().clear_grad()
    return loss


def _line(marker: str) -> str:
    with open(__file__) as f:
        number = next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_spmd_inspect.py:{number}"


def _batch(mesh, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = rng.integers(0, 4, 32).astype(np.int32)
    return dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data"))


@pytest.fixture(scope="module")
def fsdp(devices):
    """An FSDP-style step (parameters and AdamW state split over "data") after two calls."""
    mesh = dist.Mesh((4,), ("data",), devices=devices[:4])
    nn.init.seed(0)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    dist.shard_module(net, mesh, {"*": dist.P("data")})
    step = xla_trace(_step)
    x, y = _batch(mesh)
    step(x, y, net, opt, gm)
    step(x, y, net, opt, gm)
    return step, net, opt, (x, y)


def test_collectives_of_an_fsdp_step_name_kind_bytes_axes_ops_and_lines(fsdp):
    step, *_ = fsdp
    found = collectives(step)
    kinds = [c.kind for c in found]
    assert "all-gather" in kinds and "all-reduce" in kinds, kinds
    assert all(c.axes == ("data",) and c.group_size == 4 for c in found), found
    gathers = {c.ops[0]: c for c in found if c.kind == "all-gather"}
    # fc1.weight (16x8 float32) is gathered whole before the forward matmul: 512 bytes.
    weight = next(c for op, c in gathers.items() if op.endswith(":matmul") and c.bytes == 16 * 8 * 4)
    assert weight.result_bytes == 512 and weight.operand_bytes == 128 and weight.shape.startswith("f32[16,8]")
    assert _line("FORWARD-LINE") in weight.lines
    # The gradient all-reduce names backward records and the lines that made them.
    reduces = [c for c in found if c.kind == "all-reduce"]
    assert any(op.endswith(":bwd") for c in reduces for op in c.ops)
    assert any(_line("BACKWARD-LINE") in c.lines or _line("FORWARD-LINE") in c.lines for c in reduces)
    table = format_collectives(found)
    assert "all-gather" in table and "over data (4 devices)" in table and "512 B" in table
    # The same list from the executable (no trace: lines from XLA's stack-frame table).
    assert [c.kind for c in collectives(step.executable)] == kinds
    assert [c.kind for c in collectives(step.executable.hlo_text())] == kinds


def test_bytes_per_device_and_memory_stats_are_per_device(fsdp):
    step, net, opt, (x, y) = fsdp
    params = list(net.parameters())
    total = sum(p.numpy().nbytes for p in params)
    held = bytes_per_device(params)
    assert sorted(held) == [int(d.id) for d in net.fc1.weight.sharding.mesh.devices]
    assert set(held.values()) == {total // 4}
    state = [t for t in opt._trace_state()[1] if t.ndim > 0 and all(t is not p for p in params)]
    assert set(bytes_per_device(state).values()) == {2 * total // 4}  # exp_avg, exp_avg_sq: split too
    # XLA's memory plan is one device's: its arguments are each input's shard on that device.
    inputs = [x, y, *opt._trace_state()[1]]  # (the parameters are among the optimizer's tensors)
    device0 = int(net.fc1.weight.sharding.mesh.devices[0].id)
    assert step.memory_stats()["argument"] == bytes_per_device(inputs)[device0]


def test_a_one_device_program_has_no_collectives_and_bad_targets_are_named():
    f = xla_trace(lambda x: F.exp(x).sum())
    f(ht.tensor(np.ones((4, 4), np.float32)))
    assert collectives(f) == []
    assert "none" in format_collectives([])
    assert bytes_per_device([ht.tensor(np.ones(3, np.float32))]) == {}  # on the host only
    with pytest.raises(HlotraceError, match="not int"):
        collectives(3)


def test_tensor_parallel_reductions_run_over_the_model_axis(devices):
    mesh = dist.Mesh((4, 2), ("data", "model"), devices=devices)
    rng = np.random.default_rng(0)
    x = dist.shard(ht.tensor(rng.standard_normal((16, 8)).astype(np.float32)), mesh, dist.P("data"))
    w1 = dist.shard(ht.tensor(rng.standard_normal((8, 32)).astype(np.float32)), mesh, dist.P(None, "model"))
    w2 = dist.shard(ht.tensor(rng.standard_normal((32, 8)).astype(np.float32)), mesh, dist.P("model"))

    @xla_trace
    def mlp(x, w1, w2):
        return F.relu(x @ w1) @ w2  # ROW-PARALLEL

    mlp(x, w1, w2)
    mlp(x, w1, w2)
    (reduce,) = collectives(mlp)
    assert (reduce.kind, reduce.axes, reduce.group_size) == ("all-reduce", ("model",), 2)
    assert reduce.bytes == 4 * 8 * 4 and reduce.lines == (_line("ROW-PARALLEL"),)
    assert set(bytes_per_device([w1]).values()) == {8 * 16 * 4}


@pytest.mark.parametrize(
    "attributes, axes",
    [
        ("replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true", ("model",)),
        ("replica_groups={{0,2,4,6},{1,3,5,7}}", ("data",)),
        ("replica_groups=[2,4]<=[4,2]T(1,0), use_global_device_ids=true", ("data",)),
        ("replica_groups=[4,2]<=[8], use_global_device_ids=true", ("model",)),
        ("replica_groups=[1,8]<=[8]", ("data", "model")),
        ("replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_1'}, use_global_device_ids=true", ("model",)),
        ("replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}", ("data",)),
        ("replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}", ("data", "model")),
        ("replica_groups={{0,3}}", None),  # no product of whole mesh axes
    ],
)
def test_replica_groups_in_every_spelling_map_to_the_mesh_axes(attributes, axes):
    size, found = _groups(attributes, (("data", 4), ("model", 2)))
    assert found == axes
    assert size == {None: 2, ("model",): 2, ("data",): 4, ("data", "model"): 8}[axes]


def test_the_spmd_example_trains_both_ways_and_reports_collectives(capsys):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_spmd.py")
    spec = importlib.util.spec_from_file_location("example_train_spmd", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.main(["--epochs", "1"])
    out = capsys.readouterr().out
    assert results["data-parallel"]["accuracy"] > 0.6 and results["fsdp"]["accuracy"] > 0.6
    # Data-parallel: all-reduces only -- the gradients in one, and the cross-entropy's sum of
    # (loss, rows not ignored) pairs in one of 8 bytes (its divisor counts the rows whose label
    # is not ignore_index, which the backward needs first, so XLA cannot merge the two).
    parallel = results["data-parallel"]["collectives"]
    assert {c.kind for c in parallel} == {"all-reduce"}
    assert sum(any(op.endswith(":bwd") for op in c.ops) for c in parallel) == 1
    assert [c.bytes for c in parallel if not any(op.endswith(":bwd") for op in c.ops)] == [8]
    assert "all-gather" in {c.kind for c in results["fsdp"]["collectives"]}
    assert "(0.126 of the total)" in out and "train_mlp.py:" in out  # the step is train_mlp.py's
