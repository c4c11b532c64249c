"""A fuzzed program: a Trace plus the values of its inputs, and the edits the shrinker makes.

Saved as an ordinary trace file (``hlotrace show`` and ``hlotrace lower`` read it) whose JSON
document carries one extra key, ``"fuzz"``: the input values (in the trace's ``.npz``, keys
``input<k>``), the one-line description of the disagreement, and the seed that generated it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import TraceError
from hlotrace.ops.registry import OPS
from hlotrace.trace import OpRecord, Trace, Var, adopt_regions

FUZZ_KEY = "fuzz"


@dataclass
class Program:
    """``trace`` with concrete ``inputs`` (one array per ``trace.inputs`` entry, in order)."""

    trace: Trace
    inputs: list[np.ndarray]
    seed: int | None = None
    description: str = ""
    meta: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.trace.records)

    def ops(self) -> list[str]:
        return [r.op for r in self.trace.records]

    def __str__(self) -> str:
        return str(self.trace)

    # -- files -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write ``path`` (the trace's JSON, plus the ``fuzz`` key) and ``path.npz``."""
        doc, arrays = self.trace.to_json()
        keys = []
        for k, value in enumerate(self.inputs):
            key = f"input{k}"
            arrays[key] = value.view(np.uint16) if value.dtype == dt.bfloat16 else value
            keys.append(key)
        doc[FUZZ_KEY] = {"inputs": keys, "description": self.description, "seed": self.seed, **self.meta}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        with open(f"{os.fspath(path)}.npz", "wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Program:
        """Read a program written by :meth:`save` (or a plain trace file whose inputs are then
        drawn at random: a standard normal for floats, 0..9 for integers)."""
        trace = Trace.load(path)
        try:
            with open(path) as f:
                fuzz = json.load(f).get(FUZZ_KEY) or {}
        except (OSError, ValueError) as exc:  # Trace.load already read it: unlikely
            raise TraceError(f"cannot read {os.fspath(path)!r}: {exc}") from None
        npz = f"{os.fspath(path)}.npz"
        inputs = []
        if fuzz.get("inputs"):
            if not os.path.exists(npz):
                raise TraceError(f"{os.fspath(path)!r} names saved inputs but {npz!r} is missing")
            with np.load(npz) as data:
                for var_id, key in zip(trace.inputs, fuzz["inputs"], strict=True):
                    value = np.asarray(data[key])
                    if trace.vars[var_id].dtype == dt.bfloat16:
                        value = value.view(dt.bfloat16)
                    inputs.append(value)
        else:
            rng = np.random.default_rng(0)
            for var_id in trace.inputs:
                var = trace.vars[var_id]
                inputs.append(_random_value(rng, var.shape, var.dtype))
        meta = {k: v for k, v in fuzz.items() if k not in ("inputs", "description", "seed")}
        return cls(trace, inputs, fuzz.get("seed"), fuzz.get("description", ""), meta)


def _random_value(rng, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == dt.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# -- edits --------------------------------------------------------------------------------


def used_vars(trace: Trace) -> set[int]:
    used = set(trace.outputs)
    for record in trace.records:
        used.update(record.inputs)
    return used


def slice_to(trace: Trace, outputs: list[int]) -> Trace:
    """A copy of ``trace`` returning ``outputs``, without the records they do not depend on."""
    needed = set(outputs)
    kept = []
    for index in range(len(trace.records) - 1, -1, -1):
        record = trace.records[index]
        if needed.intersection(record.outputs):
            needed.update(record.inputs)
            kept.append(index)
    copy = dataclasses.replace(
        trace,
        outputs=list(outputs),
        records=[trace.records[i] for i in sorted(kept)],
        backward={i for i in trace.backward if i in kept},
        scopes={},
        paths={},
    )
    return copy


def compact(program: Program) -> Program:
    """Drop unused inputs and constants and renumber vars densely (``Trace.new_var`` relies on
    dense ids); record indices in ``backward``/``scopes`` are not kept (fuzzed programs have
    neither)."""
    trace = program.trace
    used = used_vars(trace)
    order = [v for v in trace.inputs if v in used]
    order += [v for v in trace.constants if v in used and v not in order]
    for record in trace.records:
        order += [v for v in record.outputs]
    renumber = {old: new for new, old in enumerate(dict.fromkeys(order))}
    new = Trace(name=trace.name)
    for old, new_id in renumber.items():
        var = trace.vars[old]
        new.vars[new_id] = Var(new_id, var.shape, var.dtype)
    values = dict(zip(trace.inputs, program.inputs, strict=True))
    new.inputs = [renumber[v] for v in trace.inputs if v in used]
    new.constants = {renumber[v]: c for v, c in trace.constants.items() if v in used}
    # A control-flow record's regions are copied into the new var table (their vars after
    # the top-level ones), so that the program saves and loads whole.
    new.records = [
        dataclasses.replace(
            r,
            attrs=adopt_regions(r.attrs, new),
            inputs=tuple(renumber[v] for v in r.inputs),
            outputs=tuple(renumber[v] for v in r.outputs),
        )
        for r in trace.records
    ]
    new.outputs = [renumber[v] for v in trace.outputs]
    inputs = [values[v] for v in trace.inputs if v in used]
    meta = program.meta
    if meta.get("spmd"):  # the spmd oracle's layout, by input var id, follows the renumbering
        from hlotrace.testing.fuzz.spmd import Layout  # lazy: loads testing.fuzz.spmd (1 module)

        meta = {**meta, "spmd": Layout.from_json(meta["spmd"]).renumbered(renumber).to_json()}
    return dataclasses.replace(program, trace=new, inputs=inputs, meta=meta)


def replace_by_value(program: Program, var_id: int, value: np.ndarray, as_constant: bool) -> Program:
    """``var_id`` (a record's output or an input) becomes a fresh input (or a constant)
    holding ``value``; the records that computed it become dead and are dropped."""
    return replace_by_values(program, {var_id: value}, as_constant)


def replace_by_values(program: Program, values_of: dict, as_constant: bool) -> Program:
    """The same for several vars at once (every output of a control-flow record: the
    record goes whole, its regions with it)."""
    trace = program.trace
    records = [r for r in trace.records if not set(values_of).intersection(r.outputs)]
    inputs, values = list(trace.inputs), list(program.inputs)
    constants = dict(trace.constants)
    for var_id, value in values_of.items():
        if var_id in inputs:
            k = inputs.index(var_id)
            del inputs[k], values[k]
        if as_constant:
            constants[var_id] = np.asarray(value)
        else:
            inputs.append(var_id)
            values.append(np.asarray(value))
    new = dataclasses.replace(
        trace, inputs=inputs, constants=constants, records=records, backward=set(), scopes={}, paths={}
    )
    new = slice_to(new, new.outputs)
    return compact(dataclasses.replace(program, trace=new, inputs=values))


def retyped(program: Program, inputs: list[np.ndarray], constants: dict[int, np.ndarray] | None = None) -> Program:
    """The same records applied to inputs (and constants) of other shapes: every var's shape
    and dtype is inferred again; raises ShapeDtypeError (or TypeError) where an op refuses."""
    trace = program.trace
    constants = dict(trace.constants if constants is None else constants)
    new = Trace(name=trace.name)
    for var_id, var in trace.vars.items():
        new.vars[var_id] = var
    for var_id, value in zip(trace.inputs, inputs, strict=True):
        new.vars[var_id] = Var(var_id, value.shape, value.dtype)
    for var_id, value in constants.items():
        new.vars[var_id] = Var(var_id, value.shape, value.dtype)
    records = []
    for record in trace.records:
        op = OPS[record.op]
        avals = tuple(new.aval(v) for v in record.inputs)
        # Attributes resolved against a shape (getitem's slices) are resolved again.
        attrs = op.canonicalize(avals, dict(record.attrs)) if op.canonicalize else record.attrs
        out = op.infer(*avals, **attrs)
        outs = tuple(out) if len(record.outputs) > 1 else (out,)  # several: a control-flow op's
        for out_id, aval in zip(record.outputs, outs, strict=True):
            new.vars[out_id] = Var(out_id, tuple(aval.shape), np.dtype(aval.dtype))
        records.append(OpRecord(record.op, attrs, record.inputs, record.outputs, record.location))
    new.inputs, new.outputs = list(trace.inputs), list(trace.outputs)
    new.constants = constants
    new.records = records
    return dataclasses.replace(program, trace=new, inputs=list(inputs))
