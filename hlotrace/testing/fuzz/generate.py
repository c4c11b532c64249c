"""Random, valid programs built from the op registry.

Each step picks a registered op, draws one example from the op's own sample strategy (its
attributes, dtypes, special values and zero-size shapes come at the rates the op's property
test uses), then feeds the op live values of the program where they fit: an operand is
replaced by an earlier result of the same dtype, and the op's inference (run by ``apply``)
accepts or refuses the combination. Operands that stay are fresh program inputs (or the
constants the sample asked to capture). The program is recorded by hlotrace's own Recorder,
exactly as a user's function is.

Rules that keep results defined (a fuzzer whose reports are NaN noise is useless):
- integer operands after the first (indices, shift amounts, divisors, exponents, depths)
  keep the values the op's sample drew: their valid range depends on the op;
- a step fed with earlier results is undone when it makes a NaN or an infinity out of
  finite operands, or a magnitude beyond ``MAGNITUDE_LIMIT`` (the op's own sample may still
  produce both: that is the op's domain as its property test states it).

An op without a sample strategy (a user's op) is still generated: ``inferred.py`` offers
its inference operand sets of several dtypes, ranks and shapes (and live values) until one
is accepted; its attributes are the defaults. A program in which no op could be built is
not a program: ``generate`` raises GeneratorError, and a session counts it as not generated.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

import hlotrace.testing.strategies as strategies
from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import HlotraceError
from hlotrace.ops.registry import OPS, OpDef
from hlotrace.source import SourceLocation
from hlotrace.tensor import Tensor
from hlotrace.testing.fuzz.draw import Rejected, draw
from hlotrace.testing.fuzz.evaluate import is_float
from hlotrace.testing.fuzz.inferred import TRIES, inferred_sample, required_attributes
from hlotrace.testing.fuzz.program import Program, compact, slice_to
from hlotrace.testing.fuzz.regions import CONTROL_FLOW, P_MULTI_OUTPUT, region_step
from hlotrace.testing.sampling import OpSample
from hlotrace.trace import Recorder

MAX_OPS = 30
MEAN_OPS = 7.0  # program lengths: 1 + an exponential draw (mean ~8), capped at max_ops
P_LIVE = 0.8  # a step tries to feed earlier results to the op
P_LIVE_OPERAND = 0.9  # ... to each operand that can take one
MAX_OUTPUTS = 16
# A fresh float operand becomes a constant of the program (what users write: x * 0.5,
# x - 0.0, where(m, x, nan)): its sample's values, or a splat of a special value. Rules that
# look at constants (x - (-0.0), x * 1) meet them only this way.
P_CONSTANT = 0.08
P_SPECIAL_CONSTANT = 0.08
SPECIAL_CONSTANTS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.nan, np.inf, -np.inf)
SPECIAL_WEIGHTS = (3, 3, 2, 1, 1, 1, 1, 1, 1)
# Largest magnitude a step fed with earlier results may produce (beyond it, later ops
# amplify summation-order differences into reports that say nothing about a rule).
MAGNITUDE_LIMIT = {dt.float16: 1e3, dt.bfloat16: 1e3, dt.float32: 1e6, dt.float64: 1e8}
SAMPLE_DRAWS = 4  # samples drawn per step, to find one whose dtype matches the program's
# Each program has a main dtype (samples of it are preferred, so that values chain); the
# others still come in through samples of other dtypes and casts.
MAIN_DTYPES = {
    dt.float32: 0.5,
    dt.float16: 0.1,
    dt.bfloat16: 0.1,
    dt.float64: 0.1,
    dt.int32: 0.1,
    dt.int64: 0.05,
    dt.bool_: 0.05,
}


class GeneratorError(Exception):
    """An op's reference or sample failed in a way the op did not declare (not a refusal)."""


SAMPLE_POOL = 256  # examples per op: a step picks one of them (drawn once, on first use)

_STRATEGIES: dict[str, object] = {}
_SAMPLES: dict[tuple[str, int], OpSample | None] = {}


def _strategy(op: OpDef):
    if op.name not in _STRATEGIES:
        _STRATEGIES[op.name] = op.sample(strategies) if op.sample is not None else None
    return _STRATEGIES[op.name]


def select_ops(names=None) -> list[str]:
    """The ops a fuzz run draws from: ``names`` (checked), else every registered op."""
    if not names:
        return sorted(OPS)
    unknown = [n for n in names if n not in OPS]
    if unknown:
        raise KeyError(f"unknown op(s) {', '.join(unknown)}; registered ops: {', '.join(sorted(OPS))}")
    return sorted(set(names))


def _draw_sample(op: OpDef, rng: np.random.Generator, live: list, main_dtype) -> tuple[OpSample | None, str]:
    """A sample for one step of ``op`` (None, and why, when none could be drawn)."""
    strategy = _strategy(op)
    if strategy is None:
        return inferred_sample(op, rng, live, main_dtype)
    live_dtypes = {t.dtype for t in live} | {main_dtype}
    first = None
    for _ in range(SAMPLE_DRAWS):
        sample = _pooled_sample(op, strategy, int(rng.integers(SAMPLE_POOL)))
        if sample is None:
            continue
        first = first or sample
        arrays = [a for a in sample.args if isinstance(a, np.ndarray)]
        if arrays and arrays[0].dtype in live_dtypes and (arrays[0].dtype == main_dtype or rng.random() < 0.3):
            return sample, ""
    return first, "" if first is not None else f"its sample strategy rejected {SAMPLE_DRAWS} draws"


def _pooled_sample(op: OpDef, strategy, k: int) -> OpSample | None:
    """Example ``k`` of the op's pool: hypothesis draws cost ~5 ms, a program needs dozens."""
    key = (op.name, k)
    if key not in _SAMPLES:
        try:
            _SAMPLES[key] = draw(strategy, zlib.crc32(f"{op.name}:{k}".encode()))
        except Rejected:
            _SAMPLES[key] = None
    return _SAMPLES[key]


def _substitutable(index: int, value: np.ndarray) -> bool:
    """Integer operands after the first keep the op's own values (indices, shifts, ...)."""
    return index == 0 or is_float(value.dtype) or value.dtype == dt.bool_


def _broadcastable(a: tuple, b: tuple) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b), strict=False))


def _fitting(live: list, arg: np.ndarray, attempt: int) -> list:
    """Live values that may replace ``arg``: of its dtype, and in the first attempt of its
    shape (the sample's attributes were drawn for it), in the second broadcastable to it."""
    same = [t for t in live if t.dtype == arg.dtype]
    if attempt == 0:
        return [t for t in same if t.shape == arg.shape] or [t for t in same if _broadcastable(t.shape, arg.shape)]
    if attempt == 1:
        return [t for t in same if _broadcastable(t.shape, arg.shape) and len(t.shape) == arg.ndim] or same
    return same


def _pick_live(rng: np.random.Generator, candidates: list):
    weights = np.arange(1, len(candidates) + 1, dtype=np.float64)  # recent results first
    return candidates[int(rng.choice(len(candidates), p=weights / weights.sum()))]


def _undefined(out: Tensor, operands) -> bool:
    """Whether ``out`` left the domain: non-finite (or huge) from finite (moderate) operands."""
    if not is_float(out.dtype) or out.size == 0:
        return False
    limit = MAGNITUDE_LIMIT.get(out.dtype, 1e6)
    for operand in operands:
        if isinstance(operand, Tensor) and is_float(operand.dtype) and operand.size:
            values = operand.numpy().astype(np.float64)
            if not np.isfinite(values).all() or np.abs(values).max() > limit:
                return False  # the operands were already outside: the op's sample decided
    values = out.numpy().astype(np.float64)
    return not np.isfinite(values).all() or bool(np.abs(values).max() > limit)


def outside_domain(op: OpDef, operands, attrs) -> str | None:
    """The op's own word (OpDef.domain) on whether these operands are inside its domain."""
    if op.domain is None:
        return None
    arrays = [t.numpy() if isinstance(t, Tensor) else np.asarray(t) for t in operands]
    return op.domain(*arrays, **attrs)


class _Builder:
    def __init__(self, recorder: Recorder, rng: np.random.Generator, selected=()):
        self.recorder = recorder
        self.rng = rng
        self.selected = list(selected)  # the run's ops (region bodies draw from them)
        choices = list(MAIN_DTYPES)
        weights = np.array(list(MAIN_DTYPES.values()))
        self.main_dtype = choices[int(rng.choice(len(choices), p=weights / weights.sum()))]
        self.live: list[Tensor] = []
        self.values: dict[int, np.ndarray] = {}  # input var id -> value
        self.refusal = ""  # why the last step that failed did

    def _add_inputs(self, tensors) -> list[int]:
        ids = []
        for tensor in tensors:
            var_id = self.recorder.add_input(tensor)
            self.recorder.trace.inputs.append(var_id)
            self.values[var_id] = tensor.numpy()
            ids.append(var_id)
        return ids

    def _drop_inputs(self, ids) -> None:
        for var_id in ids:
            self.recorder.trace.inputs.remove(var_id)
            del self.values[var_id]

    def _constant(self, arg: np.ndarray) -> np.ndarray | None:
        """A constant in place of a fresh float operand (None: keep it an input)."""
        if not is_float(arg.dtype):
            return None
        u = self.rng.random()
        if u < P_CONSTANT:
            return np.array(arg)
        if u < P_CONSTANT + P_SPECIAL_CONSTANT:
            weights = np.array(SPECIAL_WEIGHTS, np.float64)
            value = SPECIAL_CONSTANTS[int(self.rng.choice(len(weights), p=weights / weights.sum()))]
            return np.full(arg.shape, value, dtype=arg.dtype)
        return None

    def step(self, op: OpDef) -> bool:
        """Add one record of ``op`` (False, and ``self.refusal`` says why, when none fits)."""
        if op.name in CONTROL_FLOW and self.rng.random() < P_MULTI_OUTPUT:
            return region_step(self, op.name, self.selected)
        sample, self.refusal = _draw_sample(op, self.rng, self.live, self.main_dtype)
        if sample is None:
            return False
        for attempt in range(4):
            use_live = attempt < 3 and bool(self.live) and self.rng.random() < P_LIVE
            if attempt < 3 and not use_live and attempt > 0:
                continue
            operands, fresh, from_live = [], [], False
            for i, arg in enumerate(sample.args):
                if not isinstance(arg, np.ndarray) or i in sample.captured:
                    operands.append(arg)  # a Python scalar, or an array captured as a constant
                    continue
                if use_live and _substitutable(i, arg) and self.rng.random() < P_LIVE_OPERAND:
                    candidates = _fitting(self.live, arg, attempt)
                    if candidates:
                        operands.append(_pick_live(self.rng, candidates))
                        from_live = True
                        continue
                constant = self._constant(arg)
                if constant is not None:
                    operands.append(constant)
                    continue
                tensor = Tensor._from_array(np.array(arg))
                fresh.append(tensor)
                operands.append(tensor)
            if use_live and not from_live:
                continue
            ids = self._add_inputs(fresh)
            try:
                out = apply(op, *operands, **sample.attrs)
            except HlotraceError as exc:
                self._drop_inputs(ids)
                self.refusal = str(exc)
                continue
            except Exception as exc:
                self._drop_inputs(ids)
                self.refusal = f"its reference raised {type(exc).__name__}: {exc}"
                if op.sample is None:  # operands the inference accepted, made up: a refusal too
                    continue
                raise GeneratorError(f"{op.name}: {type(exc).__name__}: {exc} on {sample!r}") from exc
            if (from_live and _undefined(out, operands)) or outside_domain(op, operands, sample.attrs):
                self.recorder.trace.records.pop()
                self._drop_inputs(ids)
                self.refusal = "its result left the op's domain or became NaN/inf"
                continue
            self.live.append(out)
            return True
        return False


def generate(seed: int, ops=None, max_ops: int = MAX_OPS) -> Program:
    """The program of ``seed``: 1..``max_ops`` records drawn from ``ops`` (default: all)."""
    names = select_ops(ops)
    rng = np.random.default_rng(seed)
    target = 1 + min(int(rng.exponential(MEAN_OPS)), max_ops - 1)
    recorder = Recorder(name=f"fuzz_{seed}")
    builder = _Builder(recorder, rng, names)
    with recorder:
        for _ in range(12 * target):
            if len(recorder.trace.records) >= target:
                break
            builder.step(OPS[names[int(rng.integers(len(names)))]])
        if not recorder.trace.records:
            raise GeneratorError(f"no op of {', '.join(names)} could be built ({_short(builder.refusal)})")
        consumed = {v for r in recorder.trace.records for v in r.inputs}
        leaves = [t for t in builder.live if recorder._var_of[id(t)] not in consumed]
        recorder.set_outputs(leaves[-MAX_OUTPUTS:])
    trace = recorder.trace
    trace.records = [
        dataclasses.replace(r, location=SourceLocation(f"fuzz-seed-{seed}", i + 1, r.op))
        for i, r in enumerate(trace.records)
    ]
    program = Program(slice_to(trace, trace.outputs), [builder.values[v] for v in trace.inputs], seed=seed)
    return compact(program)


PREFLIGHT_STEPS = 8  # steps of an op alone that ``cannot_generate`` tries


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cannot_generate(name: str, steps: int = PREFLIGHT_STEPS) -> str | None:
    """Why op ``name`` cannot be generated (None: it can): ``steps`` steps of it alone, each
    with a fresh program, all failed. The message names what the op needs."""
    op = OPS[name]
    why = ""
    for k in range(steps):
        rng = np.random.default_rng([zlib.crc32(name.encode()), k])
        recorder = Recorder(name=f"preflight_{name}")
        builder = _Builder(recorder, rng)
        try:
            with recorder:
                if builder.step(op):
                    return None
            why = builder.refusal
        except GeneratorError as exc:
            why = str(exc)
    tried = f"{steps} steps of {TRIES} operand sets each" if op.sample is None else f"{steps} steps"
    needs = "a sample strategy (OpDef(sample=...))"
    if op.sample is None:
        needs += " or its number of operands (OpDef(arity=N))"
        attrs = required_attributes(op)
        if attrs:
            needs += f"; its inference requires attribute(s) {', '.join(attrs)}, which only a sample strategy gives"
    return f"cannot generate op {name!r}: none of {tried} built it (last: {_short(why)}); give it {needs}"
