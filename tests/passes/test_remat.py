"""remat: layers found, barriers placed, temp memory down, results bitwise, options checked;
F.optimization_barrier and the runtime keeping barriers on XLA:CPU."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import nn, optim, passes
from hlotrace.autodiff import GradManager, grad
from hlotrace.errors import PassError
from hlotrace.jit import xla_trace
from hlotrace.passes.remat import layer_count, parse_bytes
from hlotrace.testing.differential import assert_bitwise_equal


class DeepMLP(nn.Module):
    def __init__(self, layers: int, width: int):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = F.tanh(layer(x))
        return x


def train_step(x, *, net, opt, gm):
    with gm:
        loss = F.mean(net(x) ** 2)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _run(pipeline: str, layers=6, batch=64, width=32, steps=3):
    nn.init.seed(0)
    net = DeepMLP(layers, width)
    opt = optim.Adam(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    step = xla_trace(train_step, passes=pipeline)
    x = ht.tensor(np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32))
    params = list(net.parameters())
    ids = [id(p) for p in params]
    losses = [step(x, net=net, opt=opt, gm=gm).numpy() for _ in range(steps)]
    assert step.cache_size == 1 and [id(p) for p in net.parameters()] == ids  # updated in place
    return step, [*losses, *[p.numpy() for p in net.parameters()]]


@pytest.fixture(scope="module")
def baseline():
    return _run("")


@pytest.mark.parametrize("pipeline", ["remat{every=1}", "remat{every=2}", "remat{policy=sqrt}", "remat{every=3},cse"])
def test_remat_steps_are_bitwise_equal_to_no_remat(baseline, pipeline):
    step, values = _run(pipeline)
    assert_bitwise_equal(values, baseline[1], pipeline)
    if pipeline != "remat{every=1}":  # every=1 keeps every layer input: nothing to recompute here
        assert "stablehlo.optimization_barrier" in step.optimized_text


def test_the_layers_are_the_inputs_of_the_matmuls(baseline):
    assert layer_count(baseline[0].lowered.module) == 6


def _count(lowered, kind: str) -> int:
    return [op.operation.name for op in passes.main_function(lowered.module).regions[0].blocks[0].operations].count(
        kind
    )


def test_segments_get_one_barrier_each_and_only_unkept_layers_are_recomputed():
    step, _ = _run("remat{every=2}", layers=6)
    # 6 layers, boundaries b1..b5 (layer outputs), every 2nd kept (b2, b4): 3 segments, each
    # recomputed behind its own barrier. Recomputed: layers 1, 3, 5 and 6 (the kept
    # checkpoints b2 and b4 are not), one matmul each.
    assert step.optimized_text.count("stablehlo.optimization_barrier") == 3
    dots = "stablehlo.dot_general"
    assert _count(step.optimized, dots) - _count(step.lowered, dots) == 4


def test_temp_memory_goes_down_and_the_barriers_survive_xla():
    plain, _ = _run("", layers=8, batch=512, width=64, steps=1)
    remat, _ = _run("remat{policy=sqrt}", layers=8, batch=512, width=64, steps=1)
    assert remat.memory_stats()["temp"] < 0.8 * plain.memory_stats()["temp"]
    # The runtime disabled XLA:CPU's cse_barrier_expander: the recomputed matmuls are still there.
    assert remat.executable.hlo_text().count("dot(") > plain.executable.hlo_text().count("dot(")


def test_budget_picks_the_least_recomputation_that_fits():
    plain, _ = _run("", layers=8, batch=512, width=64, steps=1)
    temp = plain.memory_stats()["temp"]
    fitted, _ = _run(f"remat{{budget={int(0.8 * temp)}}}", layers=8, batch=512, width=64, steps=1)
    assert fitted.memory_stats()["temp"] <= 0.8 * temp
    generous, _ = _run(f"remat{{budget={2 * temp}}}", layers=8, batch=512, width=64, steps=1)
    assert "optimization_barrier" not in generous.optimized_text  # it already fits: nothing recomputed
    with pytest.raises(PassError, match="no candidate fits budget=1,000 bytes"):
        _run("remat{budget=1kB}", layers=8, batch=512, width=64, steps=1)


def test_a_module_without_a_backward_pass_is_left_unchanged():
    traced = xla_trace(lambda x: F.tanh(F.tanh(x @ x) @ x), passes="")
    traced(ht.tensor(np.eye(4, dtype=np.float32)))
    out = passes.run(traced.lowered, "remat{every=1}")
    assert out.text() == passes.run(traced.lowered, "").text()


def test_gradient_programs_without_an_optimizer_work_too():
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal((16, 16)).astype(np.float32) / 4 for _ in range(5)]
    x = rng.standard_normal((8, 16)).astype(np.float32)

    def loss(*ws):
        h = ht.tensor(x)
        for w in ws:
            h = F.tanh(h @ w)
        return F.sum(h * h)

    g = grad(loss, argnums=tuple(range(5)))
    plain, remat = xla_trace(g, passes=""), xla_trace(g, passes="remat{every=2}")
    tensors = [ht.tensor(w) for w in ws]
    plain(*tensors), remat(*tensors)
    assert "optimization_barrier" in remat.optimized_text
    assert_bitwise_equal([t.numpy() for t in remat(*tensors)], [t.numpy() for t in plain(*tensors)], "grad remat")


class _ScannedBlock(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return F.tanh(self.fc(x))


class ScannedMLP(nn.Module):
    """dense -> a loop of 3 dense layers (one F.scan) -> dense -> dense."""

    def __init__(self, width=16):
        super().__init__()
        self.first, self.last, self.head = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.stack = nn.Stacked(lambda: _ScannedBlock(width), 3)

    def forward(self, x):
        return self.head(F.tanh(self.last(self.stack(F.tanh(self.first(x))))))


def _run_scanned(pipeline: str, steps=3):
    nn.init.seed(3)
    net = ScannedMLP()
    opt = optim.Adam(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    step = xla_trace(train_step, passes=pipeline)
    x = ht.tensor(np.random.default_rng(3).standard_normal((32, 16)).astype(np.float32))
    losses = [step(x, net=net, opt=opt, gm=gm).numpy() for _ in range(steps)]
    return step, [*losses, *[p.numpy() for p in net.parameters()]]


def test_a_loop_of_layers_is_one_layer_and_one_segment():
    plain, expected = _run_scanned("")
    # first, the loop, last, head: the loop's three matmuls are one layer (its input a boundary).
    assert layer_count(plain.lowered.module) == 4
    whiles = _count(plain.lowered, "stablehlo.while")
    for pipeline in ("remat{every=1}", "remat{every=2}", "remat{every=3}"):
        step, values = _run_scanned(pipeline)
        assert_bitwise_equal(values, expected, pipeline)
        if pipeline == "remat{every=3}":
            # Kept: the loop's output (boundary 3). The segment before it holds the forward
            # loop, recomputed whole: one more while, cloned with its body.
            assert "stablehlo.optimization_barrier" in step.optimized_text
            assert _count(step.optimized, "stablehlo.while") == whiles + 1


@pytest.mark.parametrize(
    "pipeline, message",
    [
        ("remat{policy=foo}", "policy='foo' is not one of none, every, sqrt, budget"),
        ("remat{every=0}", "every=0 must be >= 1"),
        ("remat{every=two}", "every='two' is not an integer"),
        ("remat{budget=abc}", "budget='abc' is not a byte count"),
        ("remat{policy=budget}", "policy=budget needs budget=BYTES"),
    ],
)
def test_bad_options_are_named(pipeline, message):
    traced = xla_trace(lambda x: F.tanh(x), passes="")
    traced(ht.tensor(np.ones(3, np.float32)))
    with pytest.raises(PassError, match=message.replace("(", r"\(").replace(")", r"\)")):
        passes.run(traced.lowered, pipeline)


def test_parse_bytes_units():
    assert parse_bytes("200MB") == 200_000_000
    assert parse_bytes("1.5GiB") == int(1.5 * 2**30)
    assert parse_bytes("4096") == 4096 and parse_bytes("2 KiB") == 2048 and parse_bytes("3kb") == 3000


# -- F.optimization_barrier -------------------------------------------------------------------


def test_optimization_barrier_of_several_tensors_is_one_barrier_after_cse():
    @xla_trace(passes="cse")
    def f(a, b):
        a2, b2 = F.optimization_barrier(a * 2, b + 1)
        return a2 + b2

    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    f(ht.tensor(a), ht.tensor(b))
    np.testing.assert_array_equal(f(ht.tensor(a), ht.tensor(b)).numpy(), a * 2 + b + 1)
    assert f.optimized_text.count("stablehlo.optimization_barrier") == 1
    assert f.lowered.text().count("stablehlo.optimization_barrier") == 2


def test_optimization_barrier_gradient_flows_through():
    x = ht.tensor(np.array([1.0, -2.0, 3.0], np.float32))
    y = ht.tensor(np.array([0.5, 4.0, -1.0], np.float32))
    g = grad(lambda x: F.sum(F.optimization_barrier(x * x)))(x)
    np.testing.assert_array_equal(g.numpy(), 2 * x.numpy())

    def loss(x, y):
        a, b = F.optimization_barrier(x * 3.0, y * y)
        return F.sum(a + b)

    gx, gy = grad(loss, argnums=(0, 1))(x, y)  # each output's cotangent reaches its own operand
    np.testing.assert_array_equal(gx.numpy(), np.full(3, 3.0, np.float32))
    np.testing.assert_array_equal(gy.numpy(), 2 * y.numpy())


def test_optimization_barrier_needs_a_tensor():
    with pytest.raises(TypeError, match="at least one tensor"):
        F.optimization_barrier()
