"""A training step on a mesh trains as it does eagerly, however its state reaches it.

tests/test_calling_conventions.py's cross product, on a mesh: every way of passing the
state (its ``CONVENTIONS``: arguments, keywords, lists, dicts, holders, a module and its own
parameter, tied weights, optimizers and GradManagers made inside the step, two optimizers,
an optimizer over a subset, parameter groups) x two layouts on 3 CPU devices:

- ``dp``: parameters replicated, the batch split over "data";
- ``fsdp``: every parameter (and so its optimizer state) split over "data", the batch whole;
- ``dp-first-compiled``: ``dp`` with ``xla_trace(first_call="compiled")``;
- ``fsdp-partial``: ``fsdp`` with the forward under ``partial_trace`` (the backward and the
  optimizer eager).

AdamW (step counts, two moments and hyper tensors per group: the most state), three
``xla_trace`` steps against three eager ones from the same initial values: every parameter,
optimizer state tensor and ``.grad`` within the tolerance table's three-step row, and the
parameters and moments left laid out as placed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace.jit import partial_trace, xla_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_calling_conventions import CONVENTIONS, NAMES, OPTIMIZERS, REFUSED, STEPS, World, assert_same_values, forward

BATCH = 6  # divisible by the 3-device data axis (the one-device matrix uses 5)


def _batch(i):
    rng = np.random.default_rng(200 + i)
    return rng.standard_normal((BATCH, 3)).astype(np.float32)


def _run(convention: str, layout: str | None, mesh):
    options, build = CONVENTIONS[convention]
    world = World(OPTIMIZERS["adamw"], **options)
    partial = layout is not None and layout.endswith("partial")
    step, call = build(world, partial_trace(forward) if partial else forward)
    if layout is None:
        losses = [float(call(step, ht.tensor(_batch(i))).numpy()) for i in range(STEPS)]
        return world, losses, step
    fsdp = layout.startswith("fsdp")
    dist.shard_module(world.net, mesh, {"*": dist.P("data")} if fsdp else {})
    spec = dist.P() if fsdp else dist.P("data")
    if not partial:
        step = xla_trace(step, first_call="compiled" if layout.endswith("compiled") else "eager")
    losses = [float(call(step, dist.shard(ht.tensor(_batch(i)), mesh, spec)).numpy()) for i in range(STEPS)]
    return world, losses, step


@pytest.mark.parametrize("layout", ["dp", "fsdp", "dp-first-compiled", "fsdp-partial"])
@pytest.mark.parametrize("convention", sorted(c for c in CONVENTIONS if (c, "xla") not in REFUSED))
def test_a_step_on_a_mesh_matches_eager(devices, convention, layout):
    mesh = dist.Mesh((3,), ("data",), devices=devices[:3])
    eager, eager_losses, _ = _run(convention, None, mesh)
    world, losses, step = _run(convention, layout, mesh)
    assert_same_values(world.values(), eager.values(), f"{convention}/{layout}")
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    want = dist.P("data") if layout.startswith("fsdp") else dist.P()
    for name, p in zip(NAMES, world.params, strict=True):
        assert p.sharding is not None and p.sharding.mesh == mesh and p.sharding.spec == want, (name, p.sharding)
    # The optimizer state takes its parameters' placement where it enters a compiled step; with
    # partial_trace the optimizer runs eagerly (NumPy, on the host) and its state stays there.
    # Under opt-inside and closure-params (SGD written out), world.opts is never stepped.
    stepped_compiled = convention not in ("opt-inside", "closure-params") and not layout.endswith("partial")
    for opt in world.opts if stepped_compiled else ():
        for entries in opt.state.values():
            for key in ("exp_avg", "exp_avg_sq"):
                assert entries[key].sharding is not None and entries[key].sharding.spec == want, key
    if not layout.endswith("partial"):
        assert step.cache_size == (2 if convention.endswith("opt-subset") else 1), "a call recompiled"
