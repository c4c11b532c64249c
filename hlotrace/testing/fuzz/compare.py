"""Compare a program's results: the tolerance of each output and the masks of disagreeing elements.

The tolerance of a program output (the one tolerance table, widened by a stated rule):
  - per op: the table's entry of each record on the output's path, at the output's dtype
    (a control-flow record's: its own and those of every float record in its regions);
    the output gets the largest, times the number of float records on the path (to first
    order rounding errors add up along a chain);
  - widened per element by 4 x the larger of |eager - float64 judge| and |eager - eager
    with every record's result nudged by its own tolerance| (the furthest of six nudged
    runs): where either moves the result, the program is ill-conditioned there at its
    precision, and the compiled result may be off by as much;
  - an element may also match the eager result computed with float subnormals flushed to
    zero at every step (XLA:CPU flushes them, NumPy does not);
  - the widening never excuses the wrong sign of a zero that eager and the judge agree on
    (when every op on the path promises the sign of zero: the table's signed_zeros);
  - an element that the nudges move by more than ILL_CONDITIONED times its tolerance is
    not checked at all (the verdict lists it under skipped); so is an integer or bool
    element that any nudge changes (argsort of a near tie, a comparison of near-equal values).
"""

from __future__ import annotations

import numpy as np

from hlotrace.records import regions_of
from hlotrace.testing.fuzz.evaluate import is_float
from hlotrace.testing.fuzz.program import Program
from hlotrace.testing.tolerances import Tolerance, mismatches, tolerance_for

JUDGE_WIDENING = 4.0
PERTURBATIONS = 6  # all up, all down, four with random signs
# An element that the allowed per-op errors move by more than this many times its own
# tolerance is ill-conditioned (cos of 1e307, a cancellation): it is not checked.
ILL_CONDITIONED = 1000.0


def path_records(program: Program, var_id: int) -> list[int]:
    """Indices of the records ``var_id`` depends on."""
    producer = {out: i for i, r in enumerate(program.trace.records) for out in r.outputs}
    seen, stack = set(), [var_id]
    while stack:
        v = stack.pop()
        i = producer.get(v)
        if i is None or i in seen:
            continue
        seen.add(i)
        stack.extend(program.trace.records[i].inputs)
    return sorted(seen)


def record_tolerance(program: Program, index: int) -> Tolerance | None:
    record = program.trace.records[index]
    dtype = program.trace.vars[record.outputs[0]].dtype
    return tolerance_for(record.op, dtype) if is_float(dtype) else None


def region_tolerances(record) -> list[Tolerance]:
    """The table's entries of the float records inside ``record``'s regions (nested ones
    included): a ``maximum`` in a branch may return either zero, as it may outside one."""
    found = []
    for value in record.attrs.values():
        for region in regions_of(value):
            for inner in region.records:
                dtype = region.table.vars[inner.outputs[0]].dtype if inner.outputs else None
                if dtype is not None and is_float(dtype):
                    found.append(tolerance_for(inner.op, dtype))
                found.extend(region_tolerances(inner))
    return found


def output_tolerance(program: Program, var_id: int) -> Tolerance:
    dtype = program.trace.vars[var_id].dtype
    if not is_float(dtype):
        return tolerance_for("", dtype)
    path = path_records(program, var_id)
    table = [t for t in (record_tolerance(program, i) for i in path) if t is not None]
    table += [t for i in path for t in region_tolerances(program.trace.records[i])]
    table = table or [tolerance_for("", dtype)]
    # Each record's entry at its own dtype: a float32 op's error stays float32-sized when a
    # later astype widens its result.
    scale = max(1, len(table))
    return Tolerance(
        max(max(t.rtol for t in table), tolerance_for("", dtype).rtol) * scale,
        max(max(t.atol for t in table), tolerance_for("", dtype).atol) * scale,
        "the table's largest entry on the path, times its float records",
        all(t.signed_zeros for t in table),
    )


def disagreeing(actual, expected, tolerance: Tolerance, judge=None, alternative=None, perturbed=None) -> np.ndarray:
    """Mask of the elements of ``actual`` that match neither ``expected`` nor ``alternative``
    within ``tolerance`` widened by the distance of the judge (and of the perturbed eager
    result) to ``expected``."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return np.ones(expected.shape, bool)
    bad = mismatches(actual, expected, tolerance)
    if judge is not None and bad.any() and is_float(expected.dtype):
        with np.errstate(all="ignore"):
            slack = np.abs(expected.astype(np.float64) - np.asarray(judge, np.float64))
            if perturbed is not None:
                slack = np.maximum(slack, np.abs(expected.astype(np.float64) - np.asarray(perturbed, np.float64)))
            slack = JUDGE_WIDENING * np.where(np.isfinite(slack), slack, 0.0)
            a, e, j = actual.astype(np.float64), expected.astype(np.float64), np.asarray(judge, np.float64)
            wide = np.abs(a - e) <= slack
            excused = wide & np.isfinite(a) & np.isfinite(e)
            if tolerance.signed_zeros:
                # A zero whose sign eager and the float64 judge agree on is exact (x - (-0.0),
                # -x of +0.0): no widening excuses the other sign.
                exact_zero = (e == 0) & (j == 0) & (np.signbit(e) == np.signbit(j))
                excused &= ~(exact_zero & (a == 0) & (np.signbit(a) != np.signbit(e)))
        bad &= ~excused
    if alternative is not None and bad.any():
        bad &= mismatches(actual, np.asarray(alternative), tolerance)
    return bad


def bit_differences(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return np.ones(b.shape, bool)
    if not is_float(a.dtype):
        return a != b
    wa, wb = a.astype(np.float64), b.astype(np.float64)
    same = ((wa == wb) & (np.signbit(wa) == np.signbit(wb))) | (np.isnan(wa) & np.isnan(wb))
    return ~same


def only_subnormals(a, b, diff) -> bool:
    """Whether every differing element is a subnormal or a zero on both sides."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or not is_float(a.dtype):
        return False
    tiny = float(np.finfo(a.dtype if a.dtype.kind == "f" else np.float32).tiny)  # bfloat16: float32's range
    with np.errstate(all="ignore"):
        small = (np.abs(a.astype(np.float64)) < tiny) & (np.abs(b.astype(np.float64)) < tiny)
    return bool(small[diff].all())


def first_diff(actual, expected, bad) -> str:
    k = tuple(int(i) for i in np.argwhere(bad)[0])
    got, want = np.asarray(actual)[k], np.asarray(expected)[k]
    return f"{int(bad.sum())} of {bad.size} elements differ; first at {k}: got {got.item()!r}, eager {want.item()!r}"


def mismatches_or_shape(actual, expected, tolerance) -> np.ndarray:
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return np.ones(expected.shape, bool)
    return mismatches(actual, expected, tolerance)
