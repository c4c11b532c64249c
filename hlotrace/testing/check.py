"""check_op: one op, one sample — the compiled (PJRT) result must match the eager one."""

from __future__ import annotations

import numpy as np

from hlotrace.ops.registry import OpDef, apply
from hlotrace.tensor import Tensor
from hlotrace.testing.strategies import OpSample
from hlotrace.testing.tolerances import assert_close, tolerance_for


def _as_operand(value):
    return Tensor._from_array(np.array(value)) if isinstance(value, np.ndarray) else value


def run_eager(op: OpDef, sample: OpSample) -> np.ndarray:
    return apply(op, *[_as_operand(a) for a in sample.args], **sample.attrs).numpy()


def run_compiled(op: OpDef, sample: OpSample, platform: str | None = None) -> np.ndarray:
    """Record ``op`` applied to the sample's arrays (scalars stay Python literals), compile it
    with xla_trace and return the second (compiled) call's result."""
    from hlotrace.jit import xla_trace

    tensor_positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]

    def program(*tensors):
        operands = list(sample.args)
        for position, tensor in zip(tensor_positions, tensors, strict=True):
            operands[position] = tensor
        return apply(op, *operands, **sample.attrs)

    program.__name__ = f"check_{op.name}"
    traced = xla_trace(program, platform=platform)
    inputs = [Tensor._from_array(np.array(sample.args[i])) for i in tensor_positions]
    traced(*inputs)
    assert traced.cache_size == 1
    return traced(*inputs).numpy()


def check_op(op: OpDef, sample: OpSample, platform: str | None = None) -> None:
    """Assert that compiled and eager results agree within the tolerance table."""
    expected = run_eager(op, sample)
    actual = run_compiled(op, sample, platform)
    assert_close(actual, expected, tolerance_for(op.name, expected.dtype), what=f"{op.name} {sample!r}")
