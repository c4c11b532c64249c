"""The device eager engine as a column of the generated property tests (tests/test_engine_column.py).

For a sample of an op, the result of the op applied eagerly on the device engine (a one-op
executable built from the op's lowering rule) is checked against the op's NumPy reference
exactly as the compiled result is (:func:`hlotrace.testing.check.check_op`: the tolerance
table, NaN/inf positions, signed zeros, XLA's subnormal flushing as the named alternatives).
"""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.engines import eager_engine
from hlotrace.ops.registry import OpDef
from hlotrace.testing.check import _as_operand, check_op
from hlotrace.testing.sampling import OpSample


def run_device(op: OpDef, sample: OpSample, platform: str | None = None) -> np.ndarray:
    """``op`` on the sample's operands with the device engine, copied to the host."""
    with eager_engine("device"):
        out = apply(op, *[_as_operand(a) for a in sample.args], **sample.attrs)
    return out.numpy()


def check_device_engine(op: OpDef, sample: OpSample) -> None:
    check_op(op, sample, run=run_device)
