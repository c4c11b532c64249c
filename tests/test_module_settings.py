"""A module setting assigned after a step compiled (``bn.momentum = 0.01``, ``ln.eps``,
``dropout.p``) reaches the compiled step: the settings are part of the holders' key, so the
step records again instead of silently running the value it baked in. Found by a helper
porting PyTorch's BatchNorm (tenth session): the key held the training flags only."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn
from hlotrace.jit import partial_trace, xla_trace


def _batch(seed=0):
    return ht.tensor(np.random.default_rng(seed).standard_normal((8, 4)).astype(np.float32))


def _forward(net, x):
    return net(x)


@pytest.mark.parametrize("wrap", ["xla_trace", "partial_trace"])
@pytest.mark.parametrize("holder", ["argument", "closure"])
def test_assigned_batch_norm_momentum_reaches_the_compiled_step(wrap, holder):
    decorate = xla_trace if wrap == "xla_trace" else partial_trace
    eager, compiled = nn.BatchNorm1d(4), nn.BatchNorm1d(4)
    if holder == "argument":
        step = decorate(_forward)
        run = lambda x: step(compiled, x)  # noqa: E731
    else:
        step = decorate(lambda x: compiled(x))
        run = step
    for i, momentum in enumerate([0.9, 0.9, 0.5, 0.5, 0.9]):
        eager.momentum = compiled.momentum = momentum
        x = _batch(i)
        expected = eager(x)
        np.testing.assert_allclose(run(x).numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(compiled.running_mean.numpy(), eager.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(compiled.running_var.numpy(), eager.running_var.numpy(), rtol=1e-5, atol=1e-6)


def test_layer_norm_eps_and_dropout_p_recompile_and_old_values_stay_cached():
    ln = nn.LayerNorm(4)
    step = xla_trace(_forward)
    x = ht.tensor(np.full((2, 4), [0.0, 0.0, 1e-3, 1e-3], np.float32))
    step(ln, x)  # the first call (eager)
    small = step(ln, x).numpy()  # compiled
    ln.eps = 1.0
    step(ln, x)
    big = step(ln, x).numpy()
    np.testing.assert_allclose(big, F.layer_norm(x, (4,), eps=1.0).numpy() if hasattr(F, "layer_norm") else big)
    assert not np.allclose(small, big)  # eps=1 shrinks the normalized values a lot
    assert step.cache_size == 2
    ln.eps = 1e-5
    np.testing.assert_array_equal(step(ln, x).numpy(), small)
    assert step.cache_size == 2  # the first program again

    drop = nn.Dropout(0.0)
    ones = ht.tensor(np.ones((64,), np.float32))
    dstep = xla_trace(_forward)
    assert dstep(drop, ones).numpy().min() == 1.0
    assert dstep(drop, ones).numpy().min() == 1.0
    drop.p = 0.5
    assert (dstep(drop, ones).numpy() == 0).any()  # not the p=0 program


def test_an_unchanged_or_new_attribute_does_not_recompile():
    ln = nn.LayerNorm(4)
    step = xla_trace(_forward)
    x = _batch()
    step(ln, x)
    step(ln, x)
    ln.eps = ln.eps  # the same value
    ln.note = "a new attribute"  # a first assignment: nothing compiled read it
    ln.note = "a new attribute"  # the same value
    step(ln, x)
    step(ln, x)
    assert step.cache_size == 1


def test_the_recompile_explanation_names_the_changed_setting(caplog):
    net = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    step = xla_trace(_forward, explain_recompiles=True)
    x = _batch()
    step(net, x)
    net[1].eps = 0.5
    with caplog.at_level("WARNING", logger="hlotrace"):
        step(net, x)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "settings of module 2 (LayerNorm)" in text and "eps=0.5" in text, text
    assert "structure" not in text  # the training flags did not change
