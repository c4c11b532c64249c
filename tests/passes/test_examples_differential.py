"""Generated: every example program's compiled training step gives the same losses and
parameters (bitwise for exact passes, within rtol 1e-5 for the others) with and without each pass (each of hlotrace's passes alone, the default
pipeline, all of them together; see hlotrace.testing.pass_check.pipelines_under_test).

Each case builds the example's model from the same seed, runs three steps (the first one
eager and recorded, then two compiled) and compares the compiled losses and every
parameter and buffer (batch-norm statistics, optimizer moments) afterwards.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import nn, optim, passes, state
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace
from hlotrace.testing.differential import assert_bitwise_equal
from hlotrace.testing.pass_check import pipelines_under_test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCH = 16


def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mlp():
    ex = _example("train_mlp")
    rng = np.random.default_rng(0)
    batches = [(rng.random((BATCH, 64), np.float32), rng.integers(0, 10, BATCH).astype(np.int32)) for _ in range(3)]
    return ex, ex.MLP(), batches


def _cnn():
    ex = _example("train_cnn")
    rng = np.random.default_rng(1)
    batches = [
        (rng.random((BATCH, 1, 8, 8), np.float32), rng.integers(0, 10, BATCH).astype(np.int32)) for _ in range(3)
    ]
    return ex, ex.ConvNet(), batches


def _transformer():
    ex = _example("train_transformer")
    rng = np.random.default_rng(2)
    batches = [(ex.sequences(rng, 8),) for _ in range(3)]
    return ex, ex.CopyLM(dim=32, heads=2, layers=2), batches


EXAMPLES = {"train_mlp": _mlp, "train_cnn": _cnn, "train_transformer": _transformer}


def _run(build, pipeline: str):
    nn.init.seed(0)
    ex, net, batches = build()
    opt = optim.AdamW(net.parameters(), lr=3e-3, weight_decay=1e-2)
    gm = GradManager().attach(net.parameters())
    step = xla_trace(ex.train_step, passes=pipeline)
    losses = [step(*[ht.tensor(a) for a in batch], net=net, opt=opt, gm=gm).numpy() for batch in batches]
    assert step.cache_size == 1
    _, tensors = state.collect([net, opt])  # parameters, buffers, optimizer moments
    return losses[1:], [t.numpy() for t in tensors]


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_steps_are_bitwise_equal_with_every_pipeline(example):
    losses, tensors = _run(EXAMPLES[example], "")
    assert len(tensors) > 2
    for pipeline in pipelines_under_test():
        got_losses, got_tensors = _run(EXAMPLES[example], pipeline)
        if all(passes.PASSES[s.name].exact for s in passes.parse_pipeline(pipeline)):
            assert_bitwise_equal(got_losses, losses, f"{example} losses with passes {pipeline!r}")
            assert_bitwise_equal(got_tensors, tensors, f"{example} parameters and state with passes {pipeline!r}")
        else:
            # XLA may pick other kernels (an ulp apart), or another zero for a max of +0.0 and
            # -0.0; AdamW's g / sqrt(v) turns an ulp in a near-zero gradient into up to one
            # learning-rate step (3e-3) in that parameter, so parameters get an absolute bound.
            for got, want in zip(got_losses, losses, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{example} loss with passes {pipeline!r}")
            for got, want in zip(got_tensors, tensors, strict=True):
                np.testing.assert_allclose(
                    got, want, rtol=1e-4, atol=1e-3, err_msg=f"{example} with passes {pipeline!r}"
                )
