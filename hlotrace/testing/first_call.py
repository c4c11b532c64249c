"""The first-call equivalence check (``xla_trace(first_call='compiled')``, issue 20).

A recording from shapes and dtypes alone must produce the same trace as the eager
recording (same records, attributes, avals and constants), and the compiled-first
function's second call must equal, bitwise, what the eager-first function returns on its
second (compiled) call. Its first call does too when it ran the optimized executable; when
it ran the quickly compiled one of a tiered first call (hlotrace.runtime.tiered), it is held
to the tolerance table against the optimized result.
"""

from __future__ import annotations

import numpy as np

from hlotrace.ops.registry import OpDef
from hlotrace.testing.check import sample_program
from hlotrace.testing.sampling import OpSample
from hlotrace.testing.tolerances import assert_close, tolerance_for


def _records(trace) -> list:
    return [
        (r.op, repr(sorted(r.attrs.items())), [trace.aval(v) for v in r.inputs], [trace.aval(v) for v in r.outputs])
        for r in trace.records
    ]


def check_first_call(op: OpDef, sample: OpSample, platform: str | None = None) -> None:
    from hlotrace import metrics
    from hlotrace.jit import xla_trace

    program, inputs = sample_program(op, sample, f"first_call_{op.name}")
    capture = bool(sample.captured)
    eager_first = xla_trace(program, platform=platform, capture_as_const=capture)
    compiled_first = xla_trace(program, platform=platform, capture_as_const=capture, first_call="compiled")
    # The compiled-first function goes first: a module already compiled (in memory or on
    # disk) runs optimized at once, a new one on the CPU runs tiered (hlotrace.runtime.tiered).
    quick_before = metrics()["fast_compiles"]
    first = compiled_first(*inputs).numpy()
    tiered = metrics()["fast_compiles"] > quick_before
    eager_first(*inputs)
    expected = eager_first(*inputs).numpy()
    second = compiled_first(*inputs).numpy()
    a, b = eager_first.trace, compiled_first.trace
    assert _records(b) == _records(a), f"{op.name}: the shape-only recording differs from the eager one"
    assert sorted(b.constants) == sorted(a.constants)
    for var in a.constants:
        assert np.asarray(a.constants[var]).tobytes() == np.asarray(b.constants[var]).tobytes()
    for actual in (first, second):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # Every later call runs the optimized executable: bitwise the eager-first function's.
    assert second.tobytes() == expected.tobytes(), f"{op.name}: second call {second!r} vs compiled {expected!r}"
    if not tiered:
        assert first.tobytes() == expected.tobytes(), f"{op.name}: first call {first!r} vs compiled {expected!r}"
        return
    # The quickly compiled executable (LLVM -O0) may round differently: the tolerance table.
    assert_close(
        first,
        expected,
        tolerance_for(op.name, expected.dtype),
        what=f"{op.name}: the first call's quickly compiled result vs the optimized one",
    )
