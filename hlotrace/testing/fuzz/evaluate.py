"""Eager evaluation of a Trace with the ops' NumPy references: at the recorded dtypes (the
eager oracle) and in float64 (the judge that decides which side of a disagreement is wrong)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.registry import OPS, Aval
from hlotrace.testing.values import flush_subnormals
from hlotrace.trace import Trace


def is_float(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == dt.bfloat16


def _cast(value, dtype) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype != dtype:
        with np.errstate(all="ignore"):
            value = value.astype(dtype)
    return value


def evaluate(trace: Trace, inputs, *, wide: bool = False, flush: bool = False, perturb=None) -> dict[int, np.ndarray]:
    """Every var's value. ``perturb(index, value) -> value`` rewrites each record's result
    (the oracles nudge results by their tolerance to see what the program amplifies). ``flush``: float subnormals become signed zeros in every constant
    and every op's result (what XLA:CPU does; the caller flushes the inputs). ``wide``: floats (and the integer operands of an op that computes
    with them as numbers) are carried in float64 through every op whose reference accepts it
    (an op that asks for a narrower dtype, ``astype`` say, still rounds there); an op whose reference refuses float64 operands, or answers with another shape,
    runs at its recorded dtypes on the rounded operands instead. A record of several
    outputs (a control-flow op's: a scan's carries and ys) sets each of them; its regions
    run inside its reference, at the dtypes they were recorded with."""
    env: dict[int, np.ndarray] = {}
    for var_id, value in zip(trace.inputs, inputs, strict=True):
        env[var_id] = _widen(value) if wide else np.asarray(value)
    for var_id, value in trace.constants.items():
        env[var_id] = _widen(value) if wide else np.asarray(value)
        if flush and is_float(env[var_id].dtype):
            env[var_id] = flush_subnormals(env[var_id])
    with np.errstate(all="ignore"):
        for index, record in enumerate(trace.records):
            op = OPS[record.op]
            out_vars = [trace.vars[v] for v in record.outputs]
            args = [env[v] for v in record.inputs]
            if not wide:
                results = _results(op.reference(*args, **record.attrs), len(out_vars))
                for out_id, var, result in zip(record.outputs, out_vars, results, strict=True):
                    env[out_id] = _cast(result, var.dtype)
                    if flush and is_float(var.dtype):
                        env[out_id] = flush_subnormals(env[out_id])
                    if perturb is not None:
                        env[out_id] = perturb(index, env[out_id])
                continue
            if any(is_float(var.dtype) for var in out_vars) and _reads_integers_as_numbers(op, args, record.attrs):
                args = [a if is_float(a.dtype) else a.astype(np.float64) for a in args]
            try:
                results = [np.asarray(r) for r in _results(op.reference(*args, **record.attrs), len(out_vars))]
            except Exception:  # a reference that insists on its recorded dtypes
                results = None
            if results is None or any(
                r.shape != var.shape or is_float(var.dtype) != is_float(r.dtype)
                for r, var in zip(results, out_vars, strict=True)
            ):
                narrow = [_cast(a, trace.vars[v].dtype) for a, v in zip(args, record.inputs, strict=True)]
                results = _results(op.reference(*narrow, **record.attrs), len(out_vars))
                results = [_cast(r, var.dtype) for r, var in zip(results, out_vars, strict=True)]
            for out_id, var, result in zip(record.outputs, out_vars, results, strict=True):
                env[out_id] = _widen(result) if is_float(var.dtype) else _cast(result, var.dtype)
    return env


def _results(value, count: int) -> list:
    """A reference's results as a list: one output as itself, several (control flow) as a
    tuple."""
    if count == 1:
        return [value]
    if not isinstance(value, tuple | list) or len(value) != count:
        raise ValueError(f"a reference returned {type(value).__name__} for a record of {count} outputs")
    return list(value)


def _reads_integers_as_numbers(op, args, attrs) -> bool:
    """Whether the op computes with its integer/bool operands as numbers (var of int32 in
    float32), so that the judge may give them float64 too: its inference accepts float64
    there (indices, labels and random keys are refused)."""
    if all(is_float(np.asarray(a).dtype) for a in args):
        return False
    avals = [Aval(np.shape(a), np.dtype(np.float64)) for a in args]
    try:
        return is_float(op.infer(*avals, **attrs).dtype)
    except Exception:
        return False


def _widen(value) -> np.ndarray:
    value = np.asarray(value)
    return value.astype(np.float64) if is_float(value.dtype) else value


def outputs(trace: Trace, inputs, *, wide: bool = False) -> list[np.ndarray]:
    env = evaluate(trace, inputs, wide=wide)
    return [env[v] for v in trace.outputs]
