"""A failed call on a mesh loses nothing either.

tests/test_fault_paths.py's faults x conventions with the model split FSDP-style over a
2-device mesh and the batch split over "data" (so parameters, AdamW state and the .grad left
set are all laid out across devices, and the old buffers are donated), plus a fault of its
own: an input placed on another mesh (a TraceError before anything runs). Each must leave
every parameter, optimizer state tensor, ``.grad`` (object and value) and the random key as
they were, with their placements; the next calls must train exactly as a run that never
saw the fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import hlotrace.distributed as dist
from hlotrace.errors import HlotraceError, TraceError
from hlotrace.jit import xla_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_fault_paths import (
    CONVENTIONS,
    FAULTS,
    World,
    _assert_same,
    _assert_same_values,
    _batch,
    failing_step,
    normal_body,
    rejected_by_xla,  # noqa: F401  (a fixture)
)


def _placed_world(mesh) -> World:
    world = World()
    dist.shard_module(world.net, mesh, {"*": dist.P("data")})
    return world


def _placements(world) -> dict:
    return {name: p.sharding for name, p in world.net.named_parameters()}


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("fault", [*FAULTS, "another-mesh"])
def test_a_failed_call_on_a_mesh_leaves_every_tensor_as_it_was(devices, fault, convention, request):
    mesh, other = dist.Mesh((2,), ("data",), devices=devices[:2]), dist.Mesh((2,), ("data",), devices=devices[2:4])

    def batch(i, on=mesh, **kwargs):
        return dist.shard(_batch(i, **kwargs), on, dist.P("data"))

    wrap = CONVENTIONS[convention]
    good, call = wrap(normal_body)
    good = xla_trace(good)
    warmup = (0, 1) if fault in ("bad-later-argument", "another-mesh") else ()
    world = _placed_world(mesh)
    for i in warmup:
        call(good, world, batch(i))
    before, placed = world.everything(), _placements(world)
    if fault == "bad-later-argument":
        with pytest.raises(HlotraceError, match="matmul"):
            call(good, world, batch(2, features=3, dtype="float64"))
    elif fault == "another-mesh":
        with pytest.raises(TraceError, match="one mesh"):
            call(good, world, batch(2, on=other))
    else:
        failing, expected = failing_step(fault, wrap, request)
        with pytest.raises(expected):
            call(failing, world, batch(0))
    _assert_same(world.everything(), before)
    assert _placements(world) == placed
    for i in (5, 6):
        call(good, world, batch(i))
    reference = _placed_world(mesh)
    reference_step = xla_trace(wrap(normal_body)[0])
    for i in (*warmup, 5, 6):
        call(reference_step, reference, batch(i))
    _assert_same_values(world.everything(), reference.everything())
    assert all(s is not None and s.mesh == mesh for s in _placements(world).values())
    np.testing.assert_array_equal(world.net.fc1.weight.numpy(), reference.net.fc1.weight.numpy())
