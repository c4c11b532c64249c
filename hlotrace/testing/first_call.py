"""The first-call equivalence check (``xla_trace(first_call='compiled')``, issue 20).

A recording from shapes and dtypes alone must produce the same trace as the eager
recording (same records, attributes, avals and constants), and the first call's result --
the compiled program's -- must equal, bitwise, what the eager-first function returns on its
second (compiled) call. With tiered compilation (hlotrace.runtime.tiered, opt-in) the first
call runs a quickly compiled executable: it is held to the tolerance table against the
optimized result, and the second call to bitwise equality.
"""

from __future__ import annotations

import numpy as np

from hlotrace.jit import xla_trace
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
    program, inputs = sample_program(op, sample, f"first_call_{op.name}")
    capture = bool(sample.captured)
    eager_first = xla_trace(program, platform=platform, capture_as_const=capture)
    compiled_first = xla_trace(program, platform=platform, capture_as_const=capture, first_call="compiled")
    # Tiered (hlotrace.runtime.tiered): it goes first, so that on the CPU its first call runs
    # the quickly compiled executable (unless the disk cache has it), the others wait for
    # the optimized one it compiles in the background.
    tiered_first = xla_trace(
        program, platform=platform, capture_as_const=capture, first_call="compiled", tiered_compile=True
    )
    tiered_result = tiered_first(*inputs).numpy()
    quick = tiered_first.entries()[0].upgrade is not None  # it ran a quick executable
    eager_first(*inputs)
    expected = eager_first(*inputs).numpy()
    actual = compiled_first(*inputs).numpy()
    second = tiered_first(*inputs).numpy()
    a, b = eager_first.trace, compiled_first.trace
    assert _records(b) == _records(a), f"{op.name}: the shape-only recording differs from the eager one"
    assert _records(tiered_first.trace) == _records(a)
    assert sorted(b.constants) == sorted(a.constants)
    for var in a.constants:
        assert np.asarray(a.constants[var]).tobytes() == np.asarray(b.constants[var]).tobytes()
    for result in (actual, tiered_result, second):
        assert result.dtype == expected.dtype and result.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), f"{op.name}: first call {actual!r} vs compiled {expected!r}"
    # After a tiered first call every call runs the optimized executable: bitwise the same.
    assert second.tobytes() == expected.tobytes(), f"{op.name}: tiered second call {second!r} vs {expected!r}"
    if not quick:  # another platform: no quick executable
        assert tiered_result.tobytes() == expected.tobytes()
        return
    # The quickly compiled executable (LLVM -O0) may round differently: the tolerance table.
    assert_close(
        tiered_result,
        expected,
        tolerance_for(op.name, expected.dtype),
        what=f"{op.name}: the tiered first call's quickly compiled result vs the optimized one",
    )
