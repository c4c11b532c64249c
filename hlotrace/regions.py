"""Closed regions: a Python callable recorded once into a :class:`~hlotrace.trace.Region`.

The control-flow ops (:mod:`hlotrace.ops.control_flow`) record each callable they are given
(a branch, a loop body) with a :class:`RegionRecorder`. It works outside any recording and
inside one (an ``xla_trace`` recording, or another region's):

- the callable runs on placeholder tensors (shapes and dtypes only, as
  ``first_call='compiled'`` records), so recording a branch that is not taken computes and
  changes nothing;
- its records go into the var table of the enclosing recording (a fresh one when there is
  none); a tensor it closes over becomes a trailing param of the region, and the record
  passes that tensor as an extra input. The enclosing recording resolves it by its own
  rules first (an input, a ``capture_as_const`` constant, or its TraceError naming where
  the tensor was created);
- an in-place update of a tensor from outside and a random draw are refused (TraceError),
  and autodiff tapes are paused: the control-flow op is one tape node.

:func:`evaluate` runs a region with the ops' NumPy references (the eager result of every
control-flow op, so eager and compiled run the same recorded ops); :func:`call_region`
applies a region's records as ops to Tensors (VJPs re-run regions this way under a tape).
"""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import OpError, TraceError
from hlotrace.ops.registry import OPS, Aval
from hlotrace.recording import RECORDER, TAPES, refusing_draws
from hlotrace.tensor import Tensor, tensor
from hlotrace.trace import REGIONS_TAG, OpRecord, Region, Trace, adopt_regions

# -- nested tuples/lists/dicts of tensors ------------------------------------------------

NONE = ("None",)  # the structure of None: no leaves (a scan's absent xs or ys)


def flatten(tree, path: str = "", leaves=None, paths=None):
    """``(leaves, structure, paths)`` of a nested tuple/list/dict (dict keys sorted); every
    other value is a leaf, ``paths`` names each leaf as ``[0]['w']``."""
    leaves = [] if leaves is None else leaves
    paths = [] if paths is None else paths
    if tree is None:
        return leaves, NONE, paths
    if isinstance(tree, tuple | list):
        children = tuple(flatten(t, f"{path}[{i}]", leaves, paths)[1] for i, t in enumerate(tree))
        return leaves, (type(tree), children), paths
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        children = tuple(flatten(tree[k], f"{path}[{k!r}]", leaves, paths)[1] for k in keys)
        return leaves, (dict, keys, children), paths
    leaves.append(tree)
    paths.append(path or "(the value itself)")
    return leaves, None, paths


def unflatten(structure, leaves):
    """The tree of ``structure`` (from :func:`flatten`) holding ``leaves`` in order."""
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        if s == NONE:
            return None
        if s[0] is dict:
            return {k: build(c) for k, c in zip(s[1], s[2], strict=True)}
        return s[0](build(c) for c in s[1])

    return build(structure)


def describe_structure(structure) -> str:
    """A short text of a structure for error messages (``(*, [*, *])``)."""
    if structure is None:
        return "*"
    if structure == NONE:
        return "None"
    if structure[0] is dict:
        return (
            "{"
            + ", ".join(f"{k!r}: {describe_structure(c)}" for k, c in zip(structure[1], structure[2], strict=True))
            + "}"
        )
    inner = ", ".join(describe_structure(c) for c in structure[1])
    return f"[{inner}]" if structure[0] is list else f"({inner}{',' if len(structure[1]) == 1 else ''})"


def as_tensors(leaves, what: str, location) -> list[Tensor]:
    """Leaves as Tensors (arrays and Python scalars are converted; anything else refused)."""
    out = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            out.append(leaf)
            continue
        try:
            out.append(tensor(leaf))
        except OpError:
            raise OpError(
                f"{what}: expected Tensors (or nested tuples/lists/dicts of them), got {type(leaf).__name__}"
                + (f" at {location}" if location else "")
            ) from None
    return out


def aval_of(t) -> Aval:
    return Aval(tuple(t.shape), np.dtype(t.dtype))


# -- recording ---------------------------------------------------------------------------


class RegionRecorder:
    """The active recorder while a callable is recorded into a region (see module doc)."""

    abstract = True  # ops apply their inference only

    def __init__(self, what: str, location):
        self.parent = RECORDER.get()
        # The enclosing recording's var table (a fresh one when there is none).
        self.table = Trace(name="region") if self.parent is None else self.parent.table
        self.what = what  # "the body of F.scan": for messages
        self.location = location  # where the control-flow function was called
        self.records: list[OpRecord] = []
        self.params: list[int] = []
        self.captures: list[Tensor] = []  # closed-over tensors, in order of first use
        self.capture_params: dict[int, int] = {}  # id(tensor) -> its param
        # nn modules called in the body: the enclosing recording's (hlotrace.captures)
        self.called_modules: dict[int, object] = {} if self.parent is None else self.parent.called_modules
        self._var_of: dict[int, int] = {}
        self._alive: list = []
        self._tokens = None

    def __enter__(self) -> RegionRecorder:
        paused = TAPES[:]
        TAPES.clear()
        draws = refusing_draws(
            f"inside {self.what} (called at {self.location}) yet: draw outside and pass the numbers in"
        )
        draws.__enter__()
        self._tokens = (RECORDER.set(self), paused, draws)
        return self

    def __exit__(self, *exc) -> None:
        token, paused, draws = self._tokens
        draws.__exit__(*exc)
        TAPES[:] = paused
        RECORDER.reset(token)

    def _bind(self, t, var_id: int) -> int:
        self._var_of[id(t)] = var_id
        self._alive.append(t)
        return var_id

    def param(self, aval: Aval) -> Tensor:
        t = Tensor._abstract(aval.shape, aval.dtype)
        self.params.append(self._bind(t, self.table.new_var(aval.shape, aval.dtype)))
        return t

    def add_constant(self, t) -> int:
        var_id = self.table.new_var(t.shape, t.dtype)
        self.table.constants[var_id] = t.numpy()
        return self._bind(t, var_id)

    def add_input(self, t) -> int:
        raise TraceError(f"{self.what} cannot add inputs")

    def var_of(self, t, used_by: str, location) -> int:
        var_id = self._var_of.get(id(t))
        if var_id is not None:
            return var_id
        if self.parent is not None:
            self.parent.var_of(t, used_by, location)  # the enclosing recording's rules first
        var_id = self._bind(t, self.table.new_var(t.shape, t.dtype))
        self.captures.append(t)
        self.capture_params[id(t)] = var_id
        return var_id

    def alias(self, t, same_as) -> None:
        self._bind(t, self.var_of(same_as, "detach()", None))

    def assign(self, t, value, location) -> None:
        if id(t) not in self._var_of or id(t) in self.capture_params:
            where = f" at {location}" if location else ""
            raise TraceError(
                f"in-place update{where} of a tensor of shape {t.shape} and dtype {t.dtype} from outside "
                f"{self.what} (called at {self.location}): not supported inside a control-flow body yet. "
                f"Return the new value from the body instead."
            )
        self._bind(t, self.var_of(value, "an in-place update", location))

    def record(self, op, attrs: dict, inputs, outputs, location) -> None:
        if REGIONS_TAG in op.tags:
            attrs = adopt_regions(attrs, self.table)
        in_ids = tuple(self.var_of(t, f"op {op.name}", location) for t in inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        out_ids = tuple(self._bind(t, self.table.new_var(t.shape, t.dtype)) for t in outputs)
        self.records.append(OpRecord(op.name, dict(attrs), in_ids, out_ids, location))


class Recorded:
    """A callable recorded by :func:`record`, before its captures are closed."""

    def __init__(self, recorder: RegionRecorder, results: list[int], out_avals, structure, paths):
        self.recorder = recorder
        self.results = results
        self.out_avals = out_avals
        self.structure = structure
        self.paths = paths


def record(fn, args_structure, in_avals, what: str, location) -> Recorded:
    """Record ``fn(*unflatten(args_structure, params))`` with params of ``in_avals``."""
    recorder = RegionRecorder(what, location)
    with recorder:
        params = [recorder.param(a) for a in in_avals]
        out = fn(*unflatten(args_structure, params))
        leaves, structure, paths = flatten(out)
        outs = as_tensors(leaves, f"the value {what} returns", location)
        results = [recorder.var_of(t, f"the value {what} returns", location) for t in outs]
    return Recorded(recorder, results, [aval_of(t) for t in outs], structure, paths)


def close(recorded: list[Recorded]) -> tuple[list[Region], list[Tensor]]:
    """Regions whose params end with the same captures (the union of all of theirs, in
    order), and those captured tensors: the record's trailing inputs."""
    captures: list[Tensor] = []
    seen: set[int] = set()
    for r in recorded:
        for t in r.recorder.captures:
            if id(t) not in seen:
                seen.add(id(t))
                captures.append(t)
    regions = []
    for r in recorded:
        table, own = r.recorder.table, r.recorder.capture_params
        tail = [own[id(t)] if id(t) in own else table.new_var(t.shape, t.dtype) for t in captures]
        regions.append(Region(tuple(r.recorder.params + tail), r.recorder.records, tuple(r.results), table))
    return regions, captures


# -- running regions -----------------------------------------------------------------------


def evaluate(region: Region, arrays) -> list[np.ndarray]:
    """``region``'s results on ``arrays`` (one per param), each op by its NumPy reference and
    each result cast to its recorded dtype, as :func:`hlotrace.ops.apply` does."""
    table = region.table
    env = dict(zip(region.params, arrays, strict=True))
    constants = table.constants
    for rec in region.records:
        op = OPS[rec.op]
        ins = [env[v] if v in env else constants[v] for v in rec.inputs]
        try:
            with np.errstate(all="ignore"):
                result = op.reference(*ins, **rec.attrs)
        except (ValueError, ArithmeticError, IndexError) as exc:
            where = f" at {rec.location}" if rec.location else ""
            raise OpError(f"{rec.op}: {exc}{where}") from None
        results = result if len(rec.outputs) > 1 else (result,)
        for var_id, value in zip(rec.outputs, results, strict=True):
            env[var_id] = _as_dtype(value, table.vars[var_id].dtype)
    return [env[v] if v in env else constants[v] for v in region.results]


def _as_dtype(value, dtype) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype != dtype:
        with np.errstate(over="ignore", invalid="ignore"):
            array = array.astype(dtype)
    return array


def results(out) -> tuple:
    """What :func:`hlotrace.dispatch.apply` returned, as a tuple of every result (an op of
    one result returns its Tensor, an op of any other number a tuple)."""
    return out if type(out) is tuple else (out,)


def call_region(region: Region, tensors) -> list[Tensor]:
    """Apply ``region``'s records as ops to ``tensors`` (one per param): recorded, taped and
    computed like any op applications (what VJPs use to re-run a body under a tape)."""
    env = dict(zip(region.params, tensors, strict=True))

    def value(var_id):
        t = env.get(var_id)
        if t is None:
            t = env[var_id] = Tensor._from_array(region.table.constants[var_id])
            recorder = RECORDER.get()
            if recorder is not None:
                recorder.add_constant(t)
        return t

    for rec in region.records:
        outs = results(apply(OPS[rec.op], *[value(v) for v in rec.inputs], **rec.attrs))
        env.update(zip(rec.outputs, outs, strict=True))
    return [value(v) for v in region.results]
