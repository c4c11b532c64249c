"""Trace: the recorded op sequence of one function call, and its (de)serialization.

A Trace is a flat SSA program: ``vars`` (id → shape/dtype), ``inputs`` and ``outputs``
(var ids), ``constants`` (var id → array) and ``records`` (one :class:`OpRecord` per op
application, in execution order, each with the user's source location).

File format (schema ``hlotrace.trace``, version 2; version 1 files, which have no regions,
still load): a JSON document

    {"schema": "hlotrace.trace", "version": 1, "name": "fused_softmax",
     "vars": [{"id": 0, "shape": [64, 1000], "dtype": "float32"}, ...],
     "inputs": [0], "outputs": [5],
     "constants": [{"id": 3, "value": 2.0} | {"id": 4, "npz_key": "c4"}],
     "records": [{"op": "max", "attrs": {"axis": [1], "keepdims": true},
                  "inputs": [0], "outputs": [1],
                  "location": {"file": "model.py", "line": 12, "function": "f"}}, ...]}

Scalar constants are stored inline; larger ones in a sibling ``.npz`` file whose keys the
JSON names. A dtype attribute is written as ``{"__dtype__": "float32"}``. A control-flow record's
region (:class:`Region`, see :mod:`hlotrace.regions`) is an attribute written as
``{"__region__": {"params": [7, 8], "records": [...], "results": [9]}}``: its vars are in the
trace's one ``vars`` list, its records have the records' format. Tuples in attributes are written as JSON lists and read back as tuples; NaN and
infinities use Python's JSON extensions (``NaN``, ``Infinity``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.avals import Aval
from hlotrace.errors import TraceError
from hlotrace.recording import BACKWARD_DEPTH, MODULE_PATH, RECORDER, SCOPES, is_implicit
from hlotrace.records import REGIONS_TAG, OpRecord, Region, Var, adopt_regions, regions_of
from hlotrace.source import SourceLocation

if TYPE_CHECKING:
    from hlotrace.ops.registry import OpDef

__all__ = [
    "REGIONS_TAG",
    "SCHEMA_VERSION",
    "OpRecord",
    "Recorder",
    "Region",
    "Trace",
    "Var",
    "adopt_regions",
    "scope",
]

SCHEMA = "hlotrace.trace"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass
class Trace:
    name: str = "main"
    vars: dict[int, Var] = field(default_factory=dict)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    constants: dict[int, np.ndarray] = field(default_factory=dict)
    records: list[OpRecord] = field(default_factory=list)
    # Indices of the records applied during a backward pass (Tape.backward): the remat pass
    # reads them back from the locations (``rec<i>:<op>:bwd``).
    backward: set[int] = field(default_factory=set)
    # Record index -> (scope name, instance) for records applied inside hlotrace.trace.scope()
    # (the outermost scope): read back from the locations (``rec<i>:<op>@<name>#<instance>``).
    scopes: dict[int, tuple[str, int]] = field(default_factory=dict)
    # Record index -> dotted path of the nn.Modules it was applied in ("MLP.fc1"): the lowering
    # prefixes location names with it, so Model Explorer groups the graph by module.
    paths: dict[int, str] = field(default_factory=dict)
    # Input position -> output position whose result reuses (aliases) that input's donated
    # buffer: the compiled step's in-place state updates (hlotrace.compiled.donation). Saved
    # with the trace, so a tool lowering the file (``hlotrace explain``) aliases as the call did.
    donate: dict[int, int] = field(default_factory=dict)

    def new_var(self, shape, dtype) -> int:
        var_id = len(self.vars)
        self.vars[var_id] = Var(var_id, tuple(shape), np.dtype(dtype))
        return var_id

    def aval(self, var_id: int) -> Aval:
        return self.vars[var_id].aval

    def __str__(self) -> str:
        lines = [f"trace {self.name}({', '.join(_var_str(self, v) for v in self.inputs)}):"]
        for var_id, value in self.constants.items():
            lines.append(f"  {_var_str(self, var_id)} = constant {_short_value(value)}")
        for index, rec in enumerate(self.records):
            outs = ", ".join(_var_str(self, v) for v in rec.outputs)
            ins = ", ".join(f"%{v}" for v in rec.inputs)
            attrs = ", ".join(f"{k}={v!r}" for k, v in rec.attrs.items())
            where = f"  # {rec.location.short()}" if rec.location else ""
            lines.append(f"  {outs} = {rec.op}({ins}{', ' if attrs and ins else ''}{attrs}){where}   [{index}]")
            lines.extend(_region_lines(self, rec, "    "))
        lines.append(f"  return {', '.join(f'%{v}' for v in self.outputs)}")
        return "\n".join(lines)

    # -- serialization ------------------------------------------------------------------
    def to_json(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Return (JSON document, arrays for the .npz file)."""
        arrays: dict[str, np.ndarray] = {}
        constants = []
        for var_id, value in self.constants.items():
            if value.ndim == 0:
                constants.append({"id": var_id, "value": value.item()})
            else:
                key = f"c{var_id}"
                # bfloat16 is not a NumPy dtype npz can name; store its bits.
                arrays[key] = value.view(np.uint16) if value.dtype == dt.bfloat16 else value
                constants.append({"id": var_id, "npz_key": key})
        doc = {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "name": self.name,
            "vars": [{"id": v.id, "shape": list(v.shape), "dtype": str(v.dtype)} for v in self.vars.values()],
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "constants": constants,
            "records": [_record_to_json(r) for r in self.records],
        }
        if self.backward:
            doc["backward"] = sorted(self.backward)
        if self.scopes:
            doc["scopes"] = [[i, name, n] for i, (name, n) in sorted(self.scopes.items())]
        if self.paths:
            doc["paths"] = [[i, path] for i, path in sorted(self.paths.items())]
        if self.donate:  # an optional key: readers of version 2 without it ignore it
            doc["donate"] = [[i, o] for i, o in sorted(self.donate.items())]
        return doc, arrays

    def save(self, path: str | os.PathLike) -> None:
        """Write ``path`` (JSON) and, if there are non-scalar constants, ``path`` + ``.npz``."""
        doc, arrays = self.to_json()
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        if arrays:
            with open(f"{os.fspath(path)}.npz", "wb") as f:
                np.savez(f, **arrays)

    @classmethod
    def from_json(cls, doc: dict, arrays: dict[str, np.ndarray] | None = None) -> Trace:
        if doc.get("schema") != SCHEMA:
            raise TraceError(f"not an hlotrace trace (schema {doc.get('schema')!r}, expected {SCHEMA!r})")
        if doc.get("version") not in READABLE_VERSIONS:
            raise TraceError(
                f"trace schema version {doc.get('version')} is not supported (this hlotrace reads "
                f"{', '.join(map(str, READABLE_VERSIONS))})"
            )
        trace = cls(name=doc["name"])
        for v in doc["vars"]:
            trace.vars[v["id"]] = Var(v["id"], tuple(v["shape"]), dt.canonicalize(v["dtype"]))
        trace.inputs = list(doc["inputs"])
        trace.outputs = list(doc["outputs"])
        for c in doc["constants"]:
            var = trace.vars[c["id"]]
            if "value" in c:
                value = np.asarray(c["value"], dtype=var.dtype)
            else:
                if arrays is None or c["npz_key"] not in arrays:
                    raise TraceError(f"constant %{c['id']} is stored in the .npz file, which is missing")
                value = np.asarray(arrays[c["npz_key"]])
                if var.dtype == dt.bfloat16:
                    value = value.view(dt.bfloat16)
            trace.constants[c["id"]] = value
        trace.backward = set(doc.get("backward", ()))
        trace.scopes = {int(i): (str(name), int(n)) for i, name, n in doc.get("scopes", ())}
        trace.paths = {int(i): str(path) for i, path in doc.get("paths", ())}
        trace.donate = {int(i): int(o) for i, o in doc.get("donate", ())}
        bad = {
            i: o for i, o in trace.donate.items() if not (0 <= i < len(trace.inputs) and 0 <= o < len(trace.outputs))
        }
        if bad:
            raise TraceError(f"trace {trace.name!r}: donated input -> output positions {bad} are out of range")
        trace.records.extend(_record_from_json(r, trace) for r in doc["records"])
        return trace

    @classmethod
    def load(cls, path: str | os.PathLike) -> Trace:
        """Read a trace written by :meth:`save`."""
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise TraceError(f"cannot read trace {os.fspath(path)!r}: {exc}") from None
        npz = f"{os.fspath(path)}.npz"
        arrays = None
        if os.path.exists(npz):
            with np.load(npz) as data:
                arrays = {k: data[k] for k in data.files}
        return cls.from_json(doc, arrays)


def _record_to_json(r: OpRecord) -> dict:
    return {
        "op": r.op,
        "attrs": _attrs_to_json(r.attrs),
        "inputs": list(r.inputs),
        "outputs": list(r.outputs),
        "location": r.location._asdict() if r.location else None,
    }


def _record_from_json(r: dict, trace: Trace) -> OpRecord:
    loc = r.get("location")
    return OpRecord(
        op=r["op"],
        attrs=_attrs_from_json(r["attrs"], trace),
        inputs=tuple(r["inputs"]),
        outputs=tuple(r["outputs"]),
        location=SourceLocation(**loc) if loc else None,
    )


def _attrs_to_json(value):
    if isinstance(value, Region):
        region = {"params": list(value.params), "records": [_record_to_json(r) for r in value.records]}
        return {"__region__": {**region, "results": list(value.results)}}
    if isinstance(value, dict):
        return {k: _attrs_to_json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_attrs_to_json(v) for v in value]
    if isinstance(value, np.dtype):
        return {"__dtype__": str(value)}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _attrs_from_json(value, trace: Trace):
    if isinstance(value, dict):
        if set(value) == {"__dtype__"}:
            return dt.canonicalize(value["__dtype__"])
        if set(value) == {"__region__"}:
            region = value["__region__"]
            records = [_record_from_json(r, trace) for r in region["records"]]
            return Region(tuple(region["params"]), records, tuple(region["results"]), trace)
        return {k: _attrs_from_json(v, trace) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_attrs_from_json(v, trace) for v in value)
    return value


def _region_lines(trace: Trace, rec: OpRecord, indent: str) -> list[str]:
    """The regions of a control-flow record, indented below it (``Trace.__str__``)."""
    lines = []
    for name, value in rec.attrs.items():
        for k, region in enumerate(regions_of(value)):
            label = name if isinstance(value, Region) else f"{name}[{k}]"
            lines.append(f"{indent}{label}({', '.join(_var_str(trace, v) for v in region.params)}):")
            for index, inner in enumerate(region.records):
                outs = ", ".join(_var_str(trace, v) for v in inner.outputs)
                ins = ", ".join(f"%{v}" for v in inner.inputs)
                where = f"  # {inner.location.short()}" if inner.location else ""
                lines.append(f"{indent}  {outs} = {inner.op}({ins}){where}   [{index}]")
                lines.extend(_region_lines(trace, inner, indent + "    "))
            lines.append(f"{indent}  return {', '.join(f'%{v}' for v in region.results)}")
    return lines


def _var_str(trace: Trace, var_id: int) -> str:
    return f"%{var_id}:{trace.vars[var_id].aval}"


def _short_value(value: np.ndarray) -> str:
    return repr(value.item()) if value.ndim == 0 else f"<{value.shape} array>"


_scope_instances = itertools.count(1)


@contextlib.contextmanager
def scope(name: str):
    """Tag the ops recorded inside with ``name`` (a composite's name, e.g. ``hlotrace.softmax``).

    Each entry is a new instance; only the outermost scope is kept on a record. The lowering
    puts it into the location (``rec<i>:<op>@<name>#<instance>``), where the fuse-elementwise
    pass finds it. Costs nothing when no recording is active.

    >>> with scope("mylib.swish"):
    ...     y = x * F.sigmoid(x)
    """
    if RECORDER.get() is None:
        yield
        return
    SCOPES.append((name, next(_scope_instances)))
    try:
        yield
    finally:
        SCOPES.pop()


class Recorder:
    """Records op applications into a Trace while active (``with recorder: ...``).

    Tensors are identified by object identity; the recorder keeps every tensor it has seen
    alive until it is closed so that ids are never reused during a recording.

    Implicit state (:func:`hlotrace.recording.register_implicit`: a random generator's key) that
    the function reads without having it as an input is bound as a *late input*: appended to
    ``trace.inputs`` and to ``late_inputs`` when first used (never captured as a constant),
    after ``on_late_input(tensor)`` is told (xla_trace saves its value there).

    The modules, optimizers, GradManagers and Parameters a function closes over are not late
    inputs: the call path finds them before recording (:func:`hlotrace.captures.closed_over`)
    and binds their tensors as ordinary inputs, so a later call can tell a rebound closure
    variable by the key. A Parameter from outside that is neither is refused here.
    """

    def __init__(self, name: str = "main", capture_as_const: bool = False, on_late_input=None, abstract=False):
        self.trace = Trace(name=name)
        self.capture_as_const = capture_as_const
        # Record from shapes and dtypes only (ops run their inference, not their reference).
        self.abstract = abstract
        self.on_late_input = on_late_input
        self.late_inputs: list = []  # implicit state tensors bound as inputs, in order
        self._var_of: dict[int, int] = {}
        self._alive: list = []
        self._token = None
        # Tensors updated in place (Tensor._assign) while recording: id -> tensor.
        self.assigned: dict[int, object] = {}
        self.captured: set[int] = set()  # var ids of tensors captured from outside as constants
        self.captured_tensors: list = []  # those tensors (hlotrace.captures checks them later)
        self.called_modules: dict[int, object] = {}  # nn modules whose __call__ ran, by id

    @property
    def table(self) -> Trace:
        """The var table records go into (hlotrace.recording.Recorder): the trace."""
        return self.trace

    def __enter__(self) -> Recorder:
        if RECORDER.get() is not None:
            raise TraceError("nested recording is not supported: a traced function called another while recording")
        self._token = RECORDER.set(self)
        return self

    def __exit__(self, *exc) -> None:
        RECORDER.reset(self._token)
        self._token = None

    def _bind(self, tensor, var_id: int) -> int:
        self._var_of[id(tensor)] = var_id
        self._alive.append(tensor)
        return var_id

    def add_input(self, tensor) -> int:
        return self._bind(tensor, self.trace.new_var(tensor.shape, tensor.dtype))

    def add_constant(self, tensor) -> int:
        var_id = self.trace.new_var(tensor.shape, tensor.dtype)
        self.trace.constants[var_id] = tensor.numpy()
        return self._bind(tensor, var_id)

    def var_of(self, tensor, used_by: str, location: SourceLocation | None) -> int:
        """Var id of ``tensor``; a tensor from outside the recording is captured or refused."""
        var_id = self._var_of.get(id(tensor))
        if var_id is not None:
            return var_id
        if is_implicit(tensor):
            if self.on_late_input is not None:
                self.on_late_input(tensor)
            self.late_inputs.append(tensor)
            var_id = self.add_input(tensor)
            self.trace.inputs.append(var_id)
            return var_id
        if self.capture_as_const:
            var_id = self.add_constant(tensor)
            self.captured.add(var_id)
            self.captured_tensors.append(tensor)
            return var_id
        origin = f"created at {tensor._origin}" if tensor._origin else "created outside the traced function"
        where = f" at {location}" if location else ""
        if type(tensor).__name__ == "Parameter":
            # A parameter the call path did not find among the arguments nor in what the
            # function closes over (hlotrace.captures.closed_over: too deep, or reached through
            # hlotrace's own objects): baking it in would silently stop training.
            remedy = (
                "A compiled step reads and updates parameters only through its arguments and the "
                "modules, optimizers, GradManagers and Parameters it closes over (its closure cells and "
                "the globals it names, a few attributes deep), and this one was reached another way: "
                "pass the parameter, or the module, optimizer and GradManager that use it, as arguments."
            )
        else:
            remedy = (
                "Pass it as an argument, or decorate with xla_trace(capture_as_const=True) to bake its "
                "current value into the compiled program."
            )
        raise TraceError(
            f"{used_by}{where} uses a {type(tensor).__name__.lower()} of shape {tensor.shape} and dtype "
            f"{tensor.dtype} that is not an input of the traced function ({origin}). {remedy}"
        )

    def alias(self, tensor, same_as) -> None:
        """Make ``tensor`` name the same recorded value as ``same_as`` (detach, no op)."""
        self._bind(tensor, self.var_of(same_as, "detach()", None))

    def assign(self, tensor, value, location: SourceLocation | None) -> None:
        """``tensor`` now holds ``value`` (an in-place update, see Tensor._assign)."""
        if self.var_of(tensor, "an in-place update", location) in self.captured:
            where = f" at {location}" if location else ""
            raise TraceError(
                f"in-place update{where} of a tensor of shape {tensor.shape} and dtype {tensor.dtype} that the "
                f"recording captured as a constant (capture_as_const): a compiled step cannot write it back. "
                f"Pass the tensor (or the module/optimizer that owns it) as an argument instead."
            )
        self._bind(tensor, self.var_of(value, "an in-place update", location))
        self.assigned[id(tensor)] = tensor

    def record(self, op: OpDef, attrs: dict, inputs, outputs, location) -> None:
        """``outputs``: the output Tensor, or a tuple of them (a control-flow op's)."""
        if REGIONS_TAG in op.tags:
            attrs = adopt_regions(attrs, self.trace)
        in_ids = tuple(self.var_of(t, f"op {op.name}", location) for t in inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        out_ids = tuple(self._bind(t, self.trace.new_var(t.shape, t.dtype)) for t in outputs)
        if BACKWARD_DEPTH[0]:
            self.trace.backward.add(len(self.trace.records))
        if SCOPES:
            self.trace.scopes[len(self.trace.records)] = SCOPES[0]
        if MODULE_PATH:
            self.trace.paths[len(self.trace.records)] = ".".join(MODULE_PATH)
        self.trace.records.append(OpRecord(op.name, dict(attrs), in_ids, out_ids, location))

    def set_outputs(self, tensors) -> None:
        self.trace.outputs = [self.var_of(t, "the function's return value", None) for t in tensors]
