"""Operands for an op without a sample strategy (a user's op), found by asking its inference.

How many operands: ``OpDef.arity`` when the op states it; else the required positional
parameters of its inference; else, when the inference takes ``*avals``, those of its NumPy
reference (a ufunc's ``nin``); else (both variadic) 1 to 4 operands are tried in turn.

Which operands: a step tries up to ``TRIES`` operand sets, each checked by the op's own
inference (no reference run), and takes the first one accepted: the program's main dtype,
then float32, then other float dtypes, int32, int64 and bool; ranks 0-3; one shape for all
operands, broadcast-compatible shapes (dims of 1, dropped leading dims), square shapes (a
matmul's), one operand of another dtype (a mask, indices), and copies of live values of the
program (the step then feeds the live values themselves where the inference accepts them).
Attributes are the op's defaults. An op none of whose sets is accepted is given up for that
step; one never accepted cannot be fuzzed (``hlotrace fuzz`` says so, and what to add).
"""

from __future__ import annotations

import inspect

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.registry import Aval, OpDef
from hlotrace.testing.sampling import OpSample

TRIES = 24  # operand sets tried per step
UNKNOWN_ARITIES = (1, 2, 3, 4)  # tried in turn when neither signature says
DTYPES = (dt.float32, dt.float64, dt.float16, dt.bfloat16, dt.int32, dt.int64, dt.bool_)
DTYPE_WEIGHTS = (3, 2, 1, 1, 2, 1, 1)
OTHER_DTYPES = (dt.bool_, dt.int32)  # the odd operand of a "mixed" set: a mask, indices
LAYOUTS = ("same", "broadcast", "square", "mixed", "live")
LAYOUT_WEIGHTS = (3, 2, 1, 2, 2)
P_ZERO_DIM = 0.05  # a dimension of size 0


def _positional(fn) -> int | None:
    """Required positional parameters of ``fn``; None when it takes ``*args`` or has no
    signature Python can read."""
    nin = getattr(fn, "nin", None)  # a NumPy ufunc: np.add has no Python signature
    if isinstance(nin, int):
        return nin
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def arity(op: OpDef) -> int | None:
    """How many tensor operands the fuzzer gives ``op`` (None: unknown, try several):
    ``op.arity``, else the inference's signature, else the reference's."""
    if op.arity is not None:
        return op.arity
    fixed = _positional(op.infer)
    if fixed is not None and not op.variadic:
        return fixed
    return _positional(op.reference)


def required_attributes(op: OpDef) -> list[str]:
    """Keyword-only parameters of the inference without a default: attributes the fuzzer
    cannot make up (only a sample strategy gives them)."""
    try:
        params = inspect.signature(op.infer).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]


def refusal(op: OpDef, args) -> str | None:
    """Why the op's inference refuses operands like ``args`` (None: it accepts them). Any
    exception counts as a refusal here: the generator is only asking."""
    avals = tuple(Aval(a.shape, a.dtype) for a in args)
    attrs: dict = {}
    try:
        if op.canonicalize is not None:
            attrs = op.canonicalize(avals, attrs)
        op.infer(*avals, **attrs)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _values(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    """An array (0-d ones too: a NumPy scalar would be a weak Python scalar operand)."""
    if dtype in dt.FLOATING:
        values = rng.standard_normal(shape)
    elif dtype == dt.bool_:
        values = rng.random(shape) < 0.5
    else:
        values = rng.integers(-2, 5, size=shape)  # small: indices, shifts, divisors
    return np.asarray(values).astype(dtype)


def _shape(rng: np.random.Generator, rank: int) -> tuple:
    return tuple(0 if rng.random() < P_ZERO_DIM else int(rng.integers(1, 5)) for _ in range(rank))


def _broadcast_to(rng: np.random.Generator, shape: tuple) -> tuple:
    """A shape that broadcasts with ``shape``: some dims 1, some leading dims dropped."""
    dims = [1 if rng.random() < 0.3 else n for n in shape]
    drop = int(rng.integers(0, len(dims) + 1)) if dims and rng.random() < 0.3 else 0
    return tuple(dims[drop:])


def _pick(rng: np.random.Generator, options, weights):
    p = np.asarray(weights, np.float64)
    return options[int(rng.choice(len(options), p=p / p.sum()))]


def operand_set(rng: np.random.Generator, n: int, try_index: int, live: list, main_dtype) -> list[np.ndarray]:
    """The ``try_index``-th operand set of ``n`` operands to offer an op."""
    if try_index == 0:
        dtype, layout = main_dtype, "same"
    elif try_index == 1:
        dtype, layout = dt.float32, "same"
    else:
        dtype, layout = _pick(rng, DTYPES, DTYPE_WEIGHTS), _pick(rng, LAYOUTS, LAYOUT_WEIGHTS)
    rank = int(rng.integers(0, 4))
    if layout == "live" and live:
        weights = np.arange(1, len(live) + 1, dtype=np.float64)  # recent results first
        source = live[int(rng.choice(len(live), p=weights / weights.sum()))].numpy()
        return [source.copy() if rng.random() < 0.7 else _values(rng, source.shape, source.dtype) for _ in range(n)]
    base = _shape(rng, rank)
    if layout == "square" and rank:
        base = (base[0],) * rank
    shapes = [base] * n
    if layout == "broadcast":
        shapes = [base if i == 0 else _broadcast_to(rng, base) for i in range(n)]
        rng.shuffle(shapes)
    dtypes = [dtype] * n
    if layout == "mixed" and n > 1:
        dtypes[int(rng.integers(n))] = OTHER_DTYPES[int(rng.integers(len(OTHER_DTYPES)))]
    return [_values(rng, shape, d) for shape, d in zip(shapes, dtypes, strict=True)]


def inferred_sample(op: OpDef, rng: np.random.Generator, live: list, main_dtype) -> tuple[OpSample | None, str]:
    """The first of ``TRIES`` operand sets the op's inference accepts, as a sample (default
    attributes), or None and the last refusal."""
    known = arity(op)
    counts = (known,) if known is not None else UNKNOWN_ARITIES
    why = "no operand set tried"
    for k in range(TRIES):
        args = operand_set(rng, counts[k % len(counts)], k, live, main_dtype)
        why = refusal(op, args)
        if why is None:
            return OpSample(tuple(args)), ""
    return None, why
