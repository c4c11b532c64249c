"""Fixtures of the fuzzer tests: planted bugs (a wrong lowering rule, a pass that claims to
be exact and is not, shards placed on the wrong devices) and a user op without a sample
strategy, each removed afterwards."""

from __future__ import annotations

import pytest

import hlotrace.lowering.rules  # noqa: F401  (fills RULES)
from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.lowering.registry import RULES
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op
from hlotrace.passes import registry as pass_registry


@pytest.fixture
def wrong_minimum():
    """minimum lowered as maximum."""
    saved = RULES["minimum"]
    RULES["minimum"] = RULES["maximum"]
    yield
    RULES["minimum"] = saved


@pytest.fixture
def inexact_pass():
    """An 'exact' pass that turns every stablehlo.multiply into an add."""
    from hlotrace.runtime.jaxlib_compat import ir, stablehlo

    @pass_registry.register_pass("test-multiply-to-add")
    def multiply_to_add(module, options):
        """Planted bug: multiply becomes add."""
        for op in list(module.body.operations[0].regions[0].blocks[0].operations):
            if op.operation.name == "stablehlo.multiply":
                with ir.InsertionPoint(op), op.location:
                    new = stablehlo.AddOp(op.operands[0], op.operands[1])
                op.result.replace_all_uses_with(new.result)
                op.operation.erase()

    yield "test-multiply-to-add"
    pass_registry.unregister_pass("test-multiply-to-add")


@pytest.fixture
def user_op_without_sample():
    """``triple``: a user's op with a rule and no sample strategy."""
    from hlotrace.lowering.registry import rule
    from hlotrace.runtime.jaxlib_compat import stablehlo

    def infer(x):
        if x.dtype not in dt.FLOATING:
            raise ShapeDtypeError(f"test_triple takes floats, not {x.dtype}")
        return Aval(x.shape, x.dtype)

    register_op(OpDef(name="test_triple", family="user", reference=lambda x: x * 3, infer=infer))

    @rule("test_triple")
    def _triple(ctx, x):
        return stablehlo.AddOp(stablehlo.AddOp(x, x).result, x).result

    yield "test_triple"
    OPS.pop("test_triple")
    RULES.pop("test_triple")


@pytest.fixture
def rotated_shards(monkeypatch):
    """A partitioning bug: ``dist.shard`` hands each device its neighbour's slice (the
    shards rotated by one device), so a split input's values arrive permuted."""
    import numpy as np

    from hlotrace.runtime import jaxlib_spmd

    def put_rotated(array, sharding):
        from jax._src import core
        from jax._src.lib import xla_client as xc

        indices = jaxlib_spmd.index_map(sharding, array.shape)
        shards = [np.ascontiguousarray(array[i]) for i in indices.values()]
        shards = shards[1:] + shards[:1]
        kwargs = {"enable_x64": True} if array.dtype.itemsize == 8 else {}
        aval = core.ShapedArray(array.shape, array.dtype)
        return xc.batched_device_put(aval, sharding, shards, list(indices.keys()), **kwargs)

    monkeypatch.setattr(jaxlib_spmd, "put_sharded", put_rotated)  # monkeypatch.undo() fixes it
