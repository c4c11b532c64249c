"""check_op: one op, one sample — the compiled (PJRT) result must match the eager one; and
property_test: the seeded hypothesis test that tests/test_op_properties.py runs per op.
"""

from __future__ import annotations

import functools
import os
import zlib

import numpy as np
from hypothesis import Phase, given, seed, settings

import hlotrace.testing.strategies as strategies
from hlotrace import config
from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import FLOATING
from hlotrace.engines import eager_engine
from hlotrace.jit import xla_trace
from hlotrace.ops.registry import OpDef
from hlotrace.tensor import Tensor
from hlotrace.tensor import tensor as as_tensor
from hlotrace.testing.sampling import OpSample
from hlotrace.testing.tolerances import (
    RECIPROCAL_FLUSHED,
    RECIPROCAL_FLUSHED_UNCHECKED,
    SUBNORMAL_INPUTS_UNCHECKED,
    UNROUNDED_CASTS,
    assert_close,
    cast_sum_atol,
    tolerance_for,
)
from hlotrace.testing.values import flush_subnormals, subnormals

# Base of every op's example seed (see example_seed); the pytest header prints it.
SEED_ENV = "HLOTRACE_HYPOTHESIS_SEED"
# The ci profile's base seed, also the gpu profile's (make test-gpu).
CI_BASE_SEED = 0
DETERMINISTIC_PROFILES = ("ci", "gpu")
# Examples the strategy-coverage and wrong-rule tests draw from it: a stated rate is checked
# over enough draws that the result does not hinge on one seed's luck (25 did: TESTING.md).
STRATEGY_EXAMPLES = 100


def _as_operand(value):
    return Tensor._from_array(np.array(value)) if isinstance(value, np.ndarray) else value


def on_numpy_engine(fn):
    """``fn`` run with the NumPy eager engine, whatever engine the process uses: the
    references are the oracle, so the op's own NumPy reference computes every expected
    value (the device engine is checked against them, tests/test_engine_column.py)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with eager_engine("numpy"):
            return fn(*args, **kwargs)

    return wrapped


@on_numpy_engine
def run_eager(op: OpDef, sample: OpSample) -> np.ndarray:
    return apply(op, *[_as_operand(a) for a in sample.args], **sample.attrs).numpy()


def sample_program(op: OpDef, sample: OpSample, name: str):
    """``(program, inputs)``: a function applying ``op`` to the sample's operands, whose array
    operands are its arguments (``inputs``, fresh Tensors) except the ``captured`` ones,
    which it closes over (constants under ``capture_as_const``); Python scalars stay literals."""
    operands = [Tensor._from_array(np.array(a)) if i in sample.captured else a for i, a in enumerate(sample.args)]
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and i not in sample.captured]

    def program(*tensors):
        filled = list(operands)
        for position, tensor in zip(positions, tensors, strict=True):
            filled[position] = tensor
        return apply(op, *filled, **sample.attrs)

    program.__name__ = name
    return program, [Tensor._from_array(np.array(sample.args[i])) for i in positions]


def run_compiled(op: OpDef, sample: OpSample, platform: str | None = None) -> np.ndarray:
    """Record ``op`` applied to the sample's operands, compile it with xla_trace and return
    the second (compiled) call's result. Arrays are inputs, except the ``captured`` ones,
    which the program closes over (lowered as constants); Python scalars stay literals."""
    program, inputs = sample_program(op, sample, f"check_{op.name}")
    traced = xla_trace(program, platform=platform, capture_as_const=bool(sample.captured))
    traced(*inputs)
    assert traced.cache_size == 1
    return traced(*inputs).numpy()


def _flush(value):
    """``value`` with float subnormals flushed to signed zeros (the same object if none)."""
    if isinstance(value, np.ndarray):
        return flush_subnormals(value)
    if isinstance(value, float | np.floating) and value != 0 and abs(float(value)) < float(np.finfo(np.float32).tiny):
        return float(np.copysign(0.0, value))
    return value


def _flush_but(*kept_dtypes):
    """A flush that keeps arrays of ``kept_dtypes`` as they are. XLA:CPU computes float16 in
    float32, where its subnormals are normal (kept; a bfloat16 or float32 one is flushed), and
    tests a bfloat16 subnormal against zero without flushing it (see check_op)."""

    def flush(value):
        if isinstance(value, np.ndarray) and value.dtype in kept_dtypes:
            return value
        return _flush(value)

    return flush


def _flushed(sample: OpSample, positions=None, flush=_flush) -> OpSample | None:
    """The sample with float subnormals flushed to signed zeros (in the arguments at
    ``positions`` only, if given), or None if those have none."""
    flushed = tuple(flush(a) if positions is None or i in positions else a for i, a in enumerate(sample.args))
    if all(f is a for f, a in zip(flushed, sample.args, strict=True)):
        return None
    return OpSample(flushed, sample.attrs, sample.captured)


def reciprocal_not_normal(sample: OpSample, expected: np.ndarray) -> np.ndarray | None:
    """Mask of the elements of ``x / y`` where XLA multiplies by the reciprocal of ``y`` (a
    Python scalar, a captured constant or a broadcast divisor: XLA rewrites those) and that
    reciprocal, in the result's dtype, is subnormal (|y| > 2**126 in float32) or overflows
    (float16: |y| < 1.5e-5); None where there is no such element."""
    y = sample.args[1]
    if isinstance(y, np.ndarray) and 1 not in sample.captured and y.shape == expected.shape:
        return None  # a divisor of the result's own shape is divided, not multiplied
    if expected.dtype not in FLOATING:
        return None
    with np.errstate(all="ignore"):
        exact = 1.0 / np.asarray(y, np.float64)
        reciprocal = exact.astype(expected.dtype)
        mask = subnormals(reciprocal) | (np.isinf(reciprocal.astype(np.float64)) & np.isfinite(exact))
    return np.broadcast_to(mask, expected.shape) if mask.any() else None


def flushed_reciprocal_product(sample: OpSample, expected: np.ndarray) -> np.ndarray | None:
    """``expected`` with XLA's x * flush(1 / y) where :func:`reciprocal_not_normal`, else None."""
    mask = reciprocal_not_normal(sample, expected)
    if mask is None:
        return None
    x, y = sample.args
    with np.errstate(all="ignore"):
        reciprocal = (1.0 / np.asarray(y, np.float64)).astype(expected.dtype)
        product = np.asarray(x).astype(expected.dtype) * flush_subnormals(reciprocal)
    return np.where(mask, product, expected).astype(expected.dtype)


def check_op(op: OpDef, sample: OpSample, platform: str | None = None, run=None) -> None:
    """Assert that compiled and eager results agree within the tolerance table (``run``:
    what computes the result checked against the NumPy reference, ``run_compiled`` by
    default; the device eager engine's column passes its own).

    XLA:CPU flushes float subnormals to zero, on input and on output (FTZ/DAZ), where
    NumPy keeps them; when the sample holds subnormals, an element may instead match
    NumPy's result on the flushed inputs, itself flushed. XLA also flushes a subnormal
    captured constant (folded at compile time) where it keeps the same bfloat16 value given
    as an input, so an element may match NumPy's result with only the constants flushed
    (or, for a subnormal Python-scalar literal, with only the array inputs flushed),
    or with only the subnormals of float32 flushed (float16 is computed in float32, where its
    subnormals are normal: a float16 / bfloat16 division keeps the one, flushes the other).
    Ops in ``RECIPROCAL_FLUSHED`` may give x * 0 where 1 / y is subnormal. Every other
    difference counts.
    """
    expected = run_eager(op, sample)
    actual = (run or run_compiled)(op, sample, platform)
    flushed = _flushed(sample)
    alternatives = [flush_subnormals(run_eager(op, flushed))] if flushed is not None else []
    inputs = [i for i in range(len(sample.args)) if i not in sample.captured]
    constants_flushed = _flushed(sample, sample.captured) if sample.captured else None
    if constants_flushed is not None and _flushed(sample, inputs) is not None:  # else: the same as flushed
        alternatives.append(flush_subnormals(run_eager(op, constants_flushed)))
    # A subnormal Python-scalar operand is a literal XLA's constant folder keeps, while a
    # subnormal input is flushed at run time (seed 2550820504: logical_xor(1.4e-45 input,
    # 1.4e-45 literal) is True compiled, False in NumPy with both kept or both flushed).
    arrays = [i for i in inputs if isinstance(sample.args[i], np.ndarray)]
    if flushed is not None and len(arrays) < len(inputs) and (only_arrays := _flushed(sample, arrays)) is not None:
        if any(not isinstance(a, np.ndarray) and _flush(a) is not a for a in sample.args):
            alternatives.append(flush_subnormals(run_eager(op, only_arrays)))
    if flushed is not None and any(isinstance(a, np.ndarray) and a.dtype == np.float16 for a in sample.args):
        # float16 operands are computed in float32, where their subnormals are normal.
        widened = _flushed(sample, flush=_flush_but(dt.float16))
        alternatives.append(flush_subnormals(run_eager(op, widened if widened is not None else sample)))
    if flushed is not None and any(isinstance(a, np.ndarray) and a.dtype == dt.bfloat16 for a in sample.args):
        # XLA:CPU's test of a bfloat16 subnormal against zero keeps it (a compare, logical
        # ops' truth value), while a float32 operand's is flushed: seed 3659024819,
        # logical_xor(float32 1.1754942e-38, bfloat16 -9.18e-41) is True compiled, False in
        # NumPy with both kept or both flushed.
        kept = _flushed(sample, flush=_flush_but(dt.bfloat16))
        alternatives.append(flush_subnormals(run_eager(op, kept if kept is not None else sample)))
    if op.name in RECIPROCAL_FLUSHED and (product := flushed_reciprocal_product(sample, expected)) is not None:
        alternatives.append(product)  # only where 1 / y is subnormal (see the table)
    if op.name in RECIPROCAL_FLUSHED_UNCHECKED and (mask := reciprocal_not_normal(sample, expected)) is not None:
        actual = np.where(mask, expected, actual)  # not compared (see the table)
    if flushed is not None and op.name in SUBNORMAL_INPUTS_UNCHECKED:
        # Elements computed from a subnormal input take the expected value (see the table).
        fed = np.zeros(expected.shape, bool)
        for arg in sample.args:
            if isinstance(arg, np.ndarray):
                fed |= np.broadcast_to(subnormals(arg), expected.shape)
            elif isinstance(arg, float | np.floating) and subnormals(np.asarray(arg, expected.dtype)).any():
                # A Python scalar subnormal in the op's dtype feeds every element (dev seed
                # 4264486348: power(1.166e-38, -0.613) in bfloat16 is 4.9e27 compiled, 1.8e23
                # in NumPy: XLA:CPU's power of a subnormal base, literal or input alike).
                fed[...] = True
        actual = np.where(fed, expected, actual)
    tolerance = tolerance_for(op.name, expected.dtype)
    if op.name in UNROUNDED_CASTS and expected.dtype in (dt.float16, dt.bfloat16):
        x, attrs = np.asarray(sample.args[0]), sample.attrs
        if x.dtype != expected.dtype:  # the input is cast to the result's dtype first (see the table)
            extra = cast_sum_atol(x, attrs.get("axis"), attrs.get("reverse", False), expected.dtype)
            tolerance = tolerance._replace(atol=tolerance.atol + extra.reshape(expected.shape))
    assert_close(
        actual,
        expected,
        tolerance,
        what=f"{op.name} {sample!r}",
        alternatives=alternatives,
    )


def base_seed(profile: str) -> int:
    """$HLOTRACE_HYPOTHESIS_SEED, else 0 for the deterministic ``ci`` and ``gpu`` profiles,
    else a fresh random base (printed in the pytest header, so a failing run can be repeated)."""
    if (seed := config.get(SEED_ENV)) is not None:
        return seed
    return CI_BASE_SEED if profile in DETERMINISTIC_PROFILES else int.from_bytes(os.urandom(4), "little")


def example_seed(test_name: str, base: int) -> int:
    """Each op's (and dtype's) own seed: ops with the same strategy see different examples."""
    return zlib.crc32(f"{base}:{test_name}".encode())


def admitted_dtypes(op: OpDef) -> tuple:
    """The primary dtypes ``op``'s strategy draws from (what its property test is split by),
    or ``(None,)`` when the strategy draws no dtype through ``strategies.dtypes``."""

    @settings(max_examples=1, database=None, phases=[Phase.generate])
    @given(op.sample(strategies))
    def draw_one(sample):
        pass

    with strategies.pinned_dtype(None) as pin:
        draw_one()
    return pin.offered[0] if pin.offered else (None,)


# Share of the profile's examples that a 64-bit primary dtype gets (10 of ci's 25): its
# rules differ from the 32-bit ones only in element types, constants and converts, which
# every example exercises; the full count would add ~1.5 min to `make test` on 2 cores.
WIDE_DTYPE_EXAMPLE_SHARE = 0.4


def property_test(op: OpDef, base: int, dtype=None, checker=check_op, shrink=True, max_examples=None):
    """The property test of ``op`` with primary dtype ``dtype`` (None: any): ``checker(op,
    sample)`` on samples drawn from the op's strategy (array operands sometimes captured as
    constants), seeded by op and dtype. ``shrink=False`` reports the first failing example
    as found (tests that only need to know whether something fails)."""
    name = op.name if dtype is None else f"{op.name}-{np.dtype(dtype).name}"

    @seed(example_seed(name, base))
    @given(strategies.with_captures(op.sample(strategies)))
    def run(sample):
        checker(op, sample)

    overrides = {} if max_examples is None else {"max_examples": max_examples}
    if not shrink:
        overrides["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    if max_examples is None and dtype is not None and np.dtype(dtype).itemsize == 8:
        overrides["max_examples"] = max(1, round(settings.default.max_examples * WIDE_DTYPE_EXAMPLE_SHARE))
    if overrides:
        run = settings(**overrides)(run)

    def pinned():
        with strategies.pinned_dtype(dtype):
            run()

    return pinned


def eager_then_compiled(fn, *arrays, rtol=1e-6, atol=1e-6):
    """``fn`` on tensors of ``arrays``: its eager result as NumPy (a list of them for several
    results), after asserting that the compiled call -- the second call of ``xla_trace(fn)``,
    which runs the executable -- gives the same dtypes, shapes and values (``rtol``/``atol``).
    For the hand-written module and API tests; the generated op tests use :func:`check_op`."""
    eager = fn(*[as_tensor(a) for a in arrays])
    step = xla_trace(fn)
    step(*[as_tensor(a) for a in arrays])  # the recording call
    compiled = step(*[as_tensor(a) for a in arrays])
    several = isinstance(eager, tuple | list)
    eager_list = list(eager) if several else [eager]
    compiled_list = list(compiled) if isinstance(compiled, tuple | list) else [compiled]
    for e, c in zip(eager_list, compiled_list, strict=True):
        assert c.dtype == e.dtype and c.shape == e.shape, (c.dtype, c.shape, e.dtype, e.shape)
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=rtol, atol=atol)
    return [e.numpy() for e in eager_list] if several else eager.numpy()
