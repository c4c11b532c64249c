"""Shrinking: reduce a program that shows a disagreement to a small one that shows the same.

Steps, repeated while one of them makes progress, each kept only when the re-check finds the
same class of disagreement from the same oracle and no new NaN or infinity appeared:
  1. keep only the records on the failing output's path (then: on an earlier value's path,
     when the disagreement already shows there);
  2. delete a record: its result becomes a fresh input holding the value it had, or (when
     shapes and dtypes allow) one of its own operands;
  3. turn an input into a constant;
  4. shrink shapes (before turning inputs into constants, which XLA may fold): cut an input or constant along one dimension (to 1, then to half), the
     shapes of every later value inferred again;
  5. inside the regions of a switch or scan record (after step 2 failed to drop it whole):
     bypass a region record (its uses read one of its operands of the same shape and dtype),
     dropping what no region result needs. A while loop's regions are left alone: a
     bypassed step of its body or condition may keep it from ever ending.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hlotrace.testing.fuzz.evaluate import evaluate, is_float
from hlotrace.testing.fuzz.oracles import Finding, Oracles, check
from hlotrace.testing.fuzz.program import Program, compact, replace_by_value, replace_by_values, retyped, slice_to
from hlotrace.trace import Region

MAX_CHECKS = 400


def _nonfinite(program: Program) -> int:
    env = evaluate(program.trace, program.inputs)
    count = 0
    for value in env.values():
        if is_float(value.dtype) and value.size:
            count += int(np.sum(~np.isfinite(value.astype(np.float64))))
    return count


def _focused(oracles: Oracles, finding: Finding) -> Oracles:
    """Only the oracles the finding needs: re-checks are most of the shrinker's time."""
    interpreter = oracles.interpreter if "interpreter" in finding.oracle or finding.kind == "XLA disagreement" else None
    if finding.oracle.startswith("pass:"):
        passes = (finding.oracle.split(":", 1)[1],)
    elif finding.oracle.startswith("pipeline:"):
        return dataclasses.replace(oracles, passes=(), interpreter=interpreter)
    else:
        passes = ()
    return dataclasses.replace(
        oracles,
        passes=passes,
        pipeline=oracles.pipeline if finding.oracle.startswith("pipeline:") else None,
        interpreter=interpreter,
        # The spmd oracle only for its own findings (their layout is saved with the program).
        devices=oracles.devices if finding.oracle == "spmd" else None,
        # The eager-device oracle only for its own findings, on every size the shrinker tries.
        eager_device="all" if finding.oracle == "eager-device" else "off",
    )


class Shrinker:
    def __init__(self, finding: Finding, oracles: Oracles, max_checks: int = MAX_CHECKS):
        self.finding = finding
        self.oracles = _focused(oracles, finding)
        self.max_checks = max_checks
        self.checks = 0
        self.nonfinite = None

    def reproduces(self, candidate: Program, output: int | None) -> Finding | None:
        if self.checks >= self.max_checks or not candidate.trace.outputs:
            return None
        try:
            if _nonfinite(candidate) > self.nonfinite:
                return None
        except Exception:  # a shrunk shape an op's reference refuses
            return None
        self.checks += 1
        for found in check(candidate, self.oracles).findings:
            if (found.kind, found.oracle) == (self.finding.kind, self.finding.oracle) and (
                output is None or found.output == output
            ):
                return found
        return None

    def shrink(self, program: Program) -> tuple[Program, Finding]:
        self.nonfinite = _nonfinite(program)
        best, finding = program, self.finding
        if finding.output is not None:
            sliced = compact(
                dataclasses.replace(program, trace=slice_to(program.trace, [program.trace.outputs[finding.output]]))
            )
            found = self.reproduces(sliced, 0)
            if found:
                best, finding = sliced, found
        else:
            for var_id in program.trace.outputs:
                sliced = compact(dataclasses.replace(program, trace=slice_to(program.trace, [var_id])))
                found = self.reproduces(sliced, None)
                if found:
                    best, finding = sliced, found
                    break
        output = 0 if len(best.trace.outputs) == 1 and finding.output is not None else None
        progress = True
        while progress and self.checks < self.max_checks:
            progress = False
            steps = (
                self._earlier_outputs,
                self._delete_records,
                self._smaller_regions,
                self._smaller_shapes,
                self._inputs_to_constants,
            )
            for step in steps:
                result = step(best, output)
                if result is not None:
                    best, finding = result
                    progress = True
        return best, finding

    def _try(self, candidates, output):
        for candidate in candidates:
            found = self.reproduces(candidate, output)
            if found:
                return candidate, found
        return None

    def _earlier_outputs(self, program: Program, output):
        """The disagreement may show already in an operand of the record computing the output."""
        producer = {out: r for r in program.trace.records for out in r.outputs}
        candidates = []
        for var_id in program.trace.outputs:
            record = producer.get(var_id)
            for operand in record.inputs if record else ():
                if operand in producer:
                    outputs = [operand if v == var_id else v for v in program.trace.outputs]
                    candidates.append(compact(dataclasses.replace(program, trace=slice_to(program.trace, outputs))))
        return self._try(candidates, output)

    def _delete_records(self, program: Program, output):
        env = evaluate(program.trace, program.inputs)
        for record in program.trace.records:
            candidates = []
            if len(record.outputs) == 1:
                (out_id,) = record.outputs
                aval = program.trace.aval(out_id)
                for operand in record.inputs:
                    if program.trace.aval(operand) == aval:  # bypass the record
                        candidates.append(_bypass(program, out_id, operand))
            # A control-flow record (several outputs) goes whole; its regions are not shrunk.
            candidates.append(replace_by_values(program, {v: env[v] for v in record.outputs}, as_constant=False))
            result = self._try(candidates, output)
            if result:
                return result
        return None

    def _smaller_regions(self, program: Program, output):
        for index, record in enumerate(program.trace.records):
            if record.op not in SHRUNK_REGIONS:
                continue
            for key, path, region in _region_slots(record.attrs):
                candidates = (
                    _with_record(program, index, _with_region(record, key, path, smaller))
                    for smaller in _bypassed(region)
                )
                result = self._try(candidates, output)
                if result:
                    return result
        return None

    def _inputs_to_constants(self, program: Program, output):
        for var_id, value in zip(program.trace.inputs, program.inputs, strict=True):
            result = self._try([replace_by_value(program, var_id, value, as_constant=True)], output)
            if result:
                return result
        return None

    def _smaller_shapes(self, program: Program, output):
        values = [("input", k, v) for k, v in enumerate(program.inputs)]
        values += [("constant", var_id, v) for var_id, v in program.trace.constants.items()]
        for where, key, value in values:
            for axis, size in enumerate(value.shape):
                for new_size in sorted({1, size // 2} - {0, size}):
                    cut = np.ascontiguousarray(value[(slice(None),) * axis + (slice(0, new_size),)])
                    inputs, constants = list(program.inputs), dict(program.trace.constants)
                    if where == "input":
                        inputs[key] = cut
                    else:
                        constants[key] = cut
                    try:
                        candidate = retyped(program, inputs, constants)
                    except Exception:  # an op refuses the new shape
                        continue
                    result = self._try([candidate], output)
                    if result:
                        return result
        return None


def _bypass(program: Program, out_id: int, operand: int) -> Program:
    """``program`` with every use of ``out_id`` reading ``operand`` instead."""
    trace = program.trace
    records = [
        dataclasses.replace(r, inputs=tuple(operand if v == out_id else v for v in r.inputs))
        for r in trace.records
        if out_id not in r.outputs
    ]
    outputs = [operand if v == out_id else v for v in trace.outputs]
    new = dataclasses.replace(trace, records=records, outputs=outputs, backward=set(), scopes={}, paths={})
    return compact(dataclasses.replace(program, trace=slice_to(new, outputs)))


# Control-flow ops whose regions the shrinker edits (they run a bounded number of times).
SHRUNK_REGIONS = ("switch", "scan")


def _region_slots(attrs: dict):
    """``(key, position in the tuple or None, Region)`` for every region among ``attrs``."""
    for key in sorted(attrs):
        value = attrs[key]
        if isinstance(value, Region):
            yield key, None, value
        elif isinstance(value, tuple):
            for position, item in enumerate(value):
                if isinstance(item, Region):
                    yield key, position, item


def _with_region(record, key: str, position: int | None, region: Region):
    value = (
        region if position is None else tuple(region if i == position else v for i, v in enumerate(record.attrs[key]))
    )
    return dataclasses.replace(record, attrs={**record.attrs, key: value})


def _with_record(program: Program, index: int, record) -> Program:
    trace = program.trace
    records = [record if i == index else r for i, r in enumerate(trace.records)]
    new = dataclasses.replace(trace, records=records, backward=set(), scopes={}, paths={})
    return compact(dataclasses.replace(program, trace=new))


def _bypassed(region: Region):
    """The regions with one of ``region``'s one-output records bypassed (its uses read an
    operand of the same aval instead), and what then feeds no result dropped."""
    table = region.table
    for record in region.records:
        if len(record.outputs) != 1:
            continue
        (out,) = record.outputs
        for operand in dict.fromkeys(record.inputs):
            if table.aval(operand) != table.aval(out):
                continue
            swap = lambda v: operand if v == out else v  # noqa: E731
            records = [
                dataclasses.replace(r, inputs=tuple(map(swap, r.inputs))) for r in region.records if r is not record
            ]
            results = tuple(map(swap, region.results))
            needed, kept = set(results), []
            for r in reversed(records):
                if needed.intersection(r.outputs):
                    needed.update(r.inputs)
                    kept.append(r)
            yield Region(region.params, kept[::-1], results, table)


def describe(program: Program, finding: Finding) -> str:
    """One line: the class, the oracle and the ops of the shrunk program."""
    ops = " -> ".join(program.ops()) or "no ops"
    return f"{finding.kind} [{finding.oracle}] in {ops}: {finding.evidence}"


def shrink(program: Program, finding: Finding, oracles: Oracles | None = None, max_checks: int = MAX_CHECKS):
    """The smallest program found that shows ``finding``'s disagreement, with its finding and
    the number of re-checks it took."""
    shrinker = Shrinker(finding, oracles or Oracles(), max_checks)
    small, found = shrinker.shrink(program)
    meta = {"class": found.kind, "oracle": found.oracle}
    if found.oracle == "spmd" and small.meta.get("spmd"):
        meta["spmd"] = small.meta["spmd"]  # the layout it shows on
    small = dataclasses.replace(small, description=describe(small, found), meta=meta)
    return small, found, shrinker.checks
