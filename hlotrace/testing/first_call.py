"""The first-call equivalence check (``xla_trace(first_call='compiled')``, issue 20).

A recording from shapes and dtypes alone must produce the same trace as the eager
recording (same records, attributes, avals and constants), and the first call's result --
the compiled program's -- must equal, bitwise, what the eager-first function returns on
its second (compiled) call.
"""

from __future__ import annotations

import numpy as np

from hlotrace.ops.registry import OpDef
from hlotrace.testing.check import sample_program
from hlotrace.testing.sampling import OpSample


def _records(trace) -> list:
    return [
        (r.op, repr(sorted(r.attrs.items())), [trace.aval(v) for v in r.inputs], [trace.aval(v) for v in r.outputs])
        for r in trace.records
    ]


def check_first_call(op: OpDef, sample: OpSample, platform: str | None = None) -> None:
    from hlotrace.jit import xla_trace

    program, inputs = sample_program(op, sample, f"first_call_{op.name}")
    capture = bool(sample.captured)
    eager_first = xla_trace(program, platform=platform, capture_as_const=capture)
    compiled_first = xla_trace(program, platform=platform, capture_as_const=capture, first_call="compiled")
    eager_first(*inputs)
    expected = eager_first(*inputs).numpy()
    actual = compiled_first(*inputs).numpy()
    a, b = eager_first.trace, compiled_first.trace
    assert _records(b) == _records(a), f"{op.name}: the shape-only recording differs from the eager one"
    assert sorted(b.constants) == sorted(a.constants)
    for var in a.constants:
        assert np.asarray(a.constants[var]).tobytes() == np.asarray(b.constants[var]).tobytes()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), f"{op.name}: first call {actual!r} vs compiled {expected!r}"
