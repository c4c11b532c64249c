"""layout: NCHW convolutions run as NHWC with the transposes at the edges, and the results
stay within the tolerance table.

Generated over the op registry, not hand-picked: every conv, pooling and normalization op
(the ops of those families with a sample strategy) is checked on its own samples twice --

- alone, with its gradient: by tests/passes/test_differential.py, whose pipelines include
  `layout` alone and the CPU's default (the same seeded samples this file ran until the
  eleventh session, one example fewer);
- behind 1x1 convolutions: each 4-D float operand of the sample is first the output of a
  conv2d with a random kernel, so the transposes the pass puts after those convolutions
  must move through the op under test (its reduce, reduce_window, pad, slice, broadcast,
  iota, elementwise ops, and its gradient's) -- with and without the pass, within the op's
  entry of the tolerance table (no row for the pass was needed: see the pass's docstring).

The examples' training steps are covered by test_examples_differential.py (every hlotrace
pass alone, the default pipeline and all together); a small residual network step is
checked here too, and the structure the pass leaves (NHWC inside, transposes at the edges).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, given, seed, settings

import hlotrace as ht
import hlotrace.lowering.rules
import hlotrace.testing.strategies as strategies
from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace import nn, optim, passes
from hlotrace.autodiff import GradManager, grad
from hlotrace.dispatch import apply
from hlotrace.errors import PassError
from hlotrace.jit import xla_trace
from hlotrace.ops import OPS
from hlotrace.ops.registry import is_differentiable
from hlotrace.passes.layout import HOIST, SINK, inverse, producer
from hlotrace.runtime.jaxlib_compat import ir
from hlotrace.tensor import Tensor
from hlotrace.testing.check import example_seed
from hlotrace.testing.differential import run_lowered
from hlotrace.testing.pass_check import pipelines_under_test
from hlotrace.testing.tolerances import assert_close, tolerance_for

PIPELINES = ["layout", passes.default_pipeline("cpu")]  # alone, and as the CPU runs it by default
FAMILIES = ("conv", "pooling", "normalization")
LAYOUT_OPS = sorted(name for name, op in OPS.items() if op.sample is not None and op.family in FAMILIES)
EXAMPLES = 4


def _ops(module) -> list:
    return [op.operation for op in passes.main_function(module).regions[0].blocks[0].operations]


def test_the_layout_families_have_ops():
    assert {"conv2d", "conv2d_weight_grad", "conv_transpose2d", "max_pool2d", "batch_norm_inference"} <= set(LAYOUT_OPS)
    assert inverse(SINK) == HOIST


def test_the_differential_suite_runs_the_layout_pipelines():
    assert set(PIPELINES) <= set(pipelines_under_test())


def _behind_convolutions(op, sample):
    """(function, host inputs): ``op`` on its sample, each 4-D (3-D) float operand the output
    of a 1x1 conv2d (size-1 conv1d) with a random kernel, an input too, with the gradient of
    sum(w * op) when the op is differentiable."""
    args = list(sample.args)
    rng = np.random.default_rng(len(args))
    fed = [i for i, a in enumerate(args) if _channels_first(a)]
    others = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and i not in fed]
    kernels = [
        rng.standard_normal((args[i].shape[1],) * 2 + (1,) * (args[i].ndim - 2)).astype(args[i].dtype) for i in fed
    ]

    def value(*tensors):
        xs, ks, rest = tensors[: len(fed)], tensors[len(fed) : 2 * len(fed)], tensors[2 * len(fed) :]
        filled = [Tensor._from_array(np.array(a)) if isinstance(a, np.ndarray) else a for a in args]
        for i, x, k in zip(fed, xs, ks, strict=True):
            filled[i] = F.conv2d(x, k) if len(x.shape) == 4 else F.conv1d(x, k)
        for i, t in zip(others, rest, strict=True):
            filled[i] = t
        return apply(op, *filled, **sample.attrs)

    inputs = [args[i] for i in fed] + kernels + [args[i] for i in others]
    probe = value(*[Tensor._from_array(np.array(a)) for a in inputs])
    if not (op.vjp is not None and is_differentiable(op) and dt.is_floating(probe.dtype)):
        return value, inputs
    weights = rng.standard_normal(probe.shape).astype(probe.dtype)
    count = 2 * len(fed)
    gradient = grad(lambda *xs: (value(*xs[:-1]) * xs[-1]).sum(), argnums=tuple(range(count)))
    return (lambda *xs: (value(*xs[:-1]), *gradient(*xs))), [*inputs, weights]


def _channels_first(a) -> bool:
    """A float operand a convolution can produce (only its batch may be empty)."""
    return isinstance(a, np.ndarray) and a.ndim in (3, 4) and dt.is_floating(a.dtype) and all(a.shape[1:])


CHANNELS_LAST = {3: "[b, 0, f]x[0, i, o]->[b, 0, f]", 4: "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"}


def _channels_last(convolution) -> bool:
    return CHANNELS_LAST[len(ir.RankedTensorType(convolution.operands[0].type).shape)] in str(convolution)


def _check_behind_convolutions(op, sample) -> None:
    if not any(_channels_first(a) for a in sample.args):
        return  # no NCHW (NCW) operand to put a convolution in front of
    fn, inputs = _behind_convolutions(op, sample)
    traced = xla_trace(fn, passes="", capture_as_const=True)
    traced(*[Tensor._from_array(np.array(a)) for a in inputs])
    expected = run_lowered(traced.lowered, inputs)
    for pipeline in PIPELINES:
        optimized = passes.run(traced.lowered, pipeline)
        convolutions = [o for o in _ops(optimized.module) if o.name == "stablehlo.convolution"]
        assert convolutions and all(_channels_last(c) for c in convolutions)
        actual = run_lowered(optimized, inputs)
        for a, e in zip(actual, expected, strict=True):
            assert_close(
                a,
                e,
                tolerance_for(op.name, e.dtype),
                what=f"{op.name} behind 1x1 convolutions, {pipeline!r}, {sample!r}",
            )


@pytest.mark.parametrize("name", LAYOUT_OPS)
def test_op_samples_behind_convolutions(name, hypothesis_base_seed):
    op = OPS[name]

    @settings(max_examples=EXAMPLES, phases=[Phase.explicit, Phase.generate], deadline=None)
    @seed(example_seed(f"{name}-layout", hypothesis_base_seed))
    @given(strategies.with_captures(op.sample(strategies)))
    def run(sample):
        _check_behind_convolutions(op, sample)

    run()


class Block(nn.Module):
    """conv BN ReLU conv BN + shortcut, ReLU (a ResNet basic block)."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + x)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 6, 3, padding=1, stride=2)
        self.blocks = nn.Sequential(Block(6), Block(6))
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        h = self.pool(self.blocks(self.stem(x)))
        return self.fc(F.mean(h, axis=(2, 3)))


def _train(pipeline: str, batches):
    nn.init.seed(0)
    net = Residual()
    opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gm = GradManager().attach(net.parameters())

    def step(x, y, *, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    traced = xla_trace(step, passes=pipeline, first_call="compiled")
    losses = [float(traced(ht.tensor(x), ht.tensor(y), net=net, opt=opt, gm=gm)) for x, y in batches]
    return losses, [p.numpy() for p in net.parameters()] + [b.numpy() for b in net.buffers()]


def test_a_residual_training_step_matches_and_keeps_its_state_layout():
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((4, 3, 10, 10)).astype(np.float32), rng.integers(0, 5, 4).astype(np.int32))] * 3
    losses, tensors = _train("", batches)
    got_losses, got_tensors = _train("layout", batches)
    np.testing.assert_allclose(got_losses, losses, rtol=1e-5)
    for got, want in zip(got_tensors, tensors, strict=True):
        assert got.shape == want.shape  # parameters and buffers stay NCHW/OIHW
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _non_trivial_transposes(module) -> list:
    """Transposes that move data: more than one dimension of the operand is not 1."""
    return [
        o
        for o in _ops(module)
        if o.name == "stablehlo.transpose" and sum(d != 1 for d in ir.RankedTensorType(o.operands[0].type).shape) > 1
    ]


def test_a_conv_bn_relu_chain_keeps_nhwc_inside():
    """conv -> batch norm -> ReLU -> conv -> ReLU: transposes only on the input, the two
    weights and the result (XLA would otherwise copy around each convolution)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)

    def chain(x, w1, w2):
        h = F.conv2d(x, w1, padding=1)
        mean = F.mean(h, axis=(0, 2, 3), keepdims=True)
        var = F.mean((h - mean) ** 2, axis=(0, 2, 3), keepdims=True)
        h = F.relu((h - mean) / F.sqrt(var + 1e-5))
        return F.relu(F.conv2d(h, w2, padding=1))

    traced = xla_trace(chain, passes="")
    traced(*[ht.tensor(a) for a in (x, w1, w2)])
    out = passes.run(traced.lowered, "layout")
    assert len(_non_trivial_transposes(out.module)) == 4
    assert str(passes.main_function(out.module).type) == str(passes.main_function(traced.lowered.module).type)
    expected, actual = run_lowered(traced.lowered, [x, w1, w2]), run_lowered(out, [x, w1, w2])
    assert_close(actual[0], expected[0], tolerance_for("conv2d", np.float32))
    only_convs = passes.run(traced.lowered, "layout{move=false}")
    assert len(_non_trivial_transposes(only_convs.module)) == 6


def test_a_conv1d_chain_keeps_nwc_inside():
    """The 1-D form: conv1d -> centering -> ReLU -> conv1d runs NWC/WIO between transposes of
    the input, the two weights and the result."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    w1 = rng.standard_normal((4, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((5, 4, 3)).astype(np.float32)

    def chain(x, w1, w2):
        h = F.conv1d(x, w1, padding=1)
        h = F.relu(h - F.mean(h, axis=(0, 2), keepdims=True))
        return F.relu(F.conv1d(h, w2, padding=1, stride=2))

    traced = xla_trace(chain, passes="")
    traced(*[ht.tensor(a) for a in (x, w1, w2)])
    out = passes.run(traced.lowered, "layout")
    convolutions = [o for o in _ops(out.module) if o.name == "stablehlo.convolution"]
    assert len(convolutions) == 2 and all(_channels_last(c) for c in convolutions)
    assert len(_non_trivial_transposes(out.module)) == 4
    expected, actual = run_lowered(traced.lowered, [x, w1, w2]), run_lowered(out, [x, w1, w2])
    assert_close(actual[0], expected[0], tolerance_for("conv1d", np.float32))


def test_a_dilated_input_stays_apart_from_its_convolution():
    """conv_transpose2d's rule dilates a small input with an interior pad, as XLA:CPU's
    simplifier aborts the process on a base-dilated convolution whose kernel reaches past
    its input; next to an NHWC convolution XLA folded that pad back into one (the spmd
    differential's sample: x (1, 2, 3, 1), w (2, 2, 2, 3), stride 2, dilation (1, 2)), so
    an interior pad stays where it is."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 3, 1)).astype(np.float32)
    w = rng.standard_normal((2, 2, 2, 3)).astype(np.float32)
    traced = xla_trace(
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=(0, 1), dilation=(1, 2)), passes=""
    )
    traced(ht.tensor(x), ht.tensor(w))
    out = passes.run(traced.lowered, passes.default_pipeline("cpu"))
    convolutions = [o for o in _ops(out.module) if o.name == "stablehlo.convolution"]
    assert convolutions and "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" in str(convolutions[0])
    assert producer(convolutions[0].operands[0]).name == "stablehlo.transpose"  # not the pad
    expected, actual = run_lowered(traced.lowered, [x, w]), run_lowered(out, [x, w])  # this compile aborted
    assert_close(actual[0], expected[0], tolerance_for("conv_transpose2d", np.float32))


def test_a_program_without_convolutions_is_untouched():
    traced = xla_trace(lambda x: F.max_pool2d(F.relu(x), 2), passes="")
    traced(ht.tensor(np.ones((1, 2, 4, 4), np.float32)))
    assert passes.run(traced.lowered, "layout").text() == traced.lowered.text()


def test_the_move_option_is_checked():
    passes.parse_pipeline("layout{move=false}")
    with pytest.raises(PassError, match="move='maybe'"):
        passes.parse_pipeline("layout{move=maybe}")
