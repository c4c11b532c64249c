"""The generated property tests reach what wrong rules get wrong.

Each test collects the examples one (op, dtype) property test draws under the deterministic
``ci`` seed, without compiling anything, and checks they contain the cases the issue that
introduced them names: distinct examples per op, int32 values float32 cannot tell apart,
the int32 extremes, every bool combination, signed zeros, long reductions with NaN, and
captured array constants that mix 0.0 and -0.0.
"""

import functools
import itertools

import numpy as np
import pytest

from hlotrace import dtypes as dt
from hlotrace.ops import OPS
from hlotrace.testing.check import CI_BASE_SEED, STRATEGY_EXAMPLES, admitted_dtypes, property_test
from hlotrace.testing.tolerances import UNSIGNED_ZEROS, mismatches, tolerance_for
from hlotrace.testing.values import INT32_MAX, INT32_MIN

COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


@functools.cache
def examples(name: str, dtype) -> tuple:
    """The first STRATEGY_EXAMPLES samples the property test of (name, dtype) draws from the
    ci base seed: what its strategy reaches, not only what the 25 examples of one ci run
    happen to hold (that depends on the seed; `make mutation` measures the ci run itself)."""
    drawn = []
    property_test(
        OPS[name], CI_BASE_SEED, dtype, checker=lambda op, sample: drawn.append(sample), max_examples=STRATEGY_EXAMPLES
    )()
    return tuple(drawn)


def aligned_pairs(sample):
    """The first two operands broadcast against each other (scalars as 0-d arrays)."""
    return np.broadcast_arrays(*(np.asarray(a) for a in sample.args[:2]))


def float_arrays(sample):
    return [a.astype(np.float32) for a in sample.args if isinstance(a, np.ndarray) and a.dtype in dt.FLOATING]


@pytest.mark.parametrize(
    "pair", [("add", "multiply"), ("less", "greater"), ("maximum", "minimum"), ("sin", "cos"), ("max", "min")]
)
def test_ops_with_the_same_strategy_draw_different_examples(pair):
    first, second = (examples(name, dt.float32) for name in pair)
    shared = {repr(s) for s in first} & {repr(s) for s in second}
    # Hypothesis starts every run from the simplest example; beyond that they must differ.
    assert len(shared) <= max(2, len(first) // 20), (
        f"{pair} share {len(shared)} of {len(first)} examples: {sorted(shared)[:3]}"
    )


def test_every_admitted_dtype_gets_its_own_test():
    assert admitted_dtypes(OPS["subtract"]) == (dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float32, dt.float64)
    assert set(admitted_dtypes(OPS["add"])) == set(dt.SUPPORTED)
    for dtype in admitted_dtypes(OPS["max"]):
        assert all(np.asarray(s.args[0]).dtype == dtype for s in examples("max", dtype))


@pytest.mark.parametrize("name", COMPARISONS)
def test_int32_comparisons_meet_values_that_float32_rounds_together(name):
    found = False
    for sample in examples(name, dt.int32):
        a, b = aligned_pairs(sample)
        if a.dtype == b.dtype == dt.int32:
            found |= bool(np.any((a != b) & (a.astype(np.float32) == b.astype(np.float32))))
    assert found, f"{name}: no int32 operands above 2**24 that differ by less than float32 resolves"


@pytest.mark.parametrize("name", [*COMPARISONS, "maximum", "minimum"])
def test_binary_ops_meet_ties(name):
    ties = sum(bool(np.any(a == b)) for a, b in map(aligned_pairs, examples(name, dt.float32)))
    assert ties >= 3, f"{name}: equal operands in only {ties} examples"


@pytest.mark.parametrize(("name", "dtype"), [("add", dt.int32), ("maximum", dt.int32), ("negative", dt.int32)])
def test_int32_extremes_are_drawn(name, dtype):
    values = np.concatenate(
        [np.ravel(a) for s in examples(name, dtype) for a in s.args if np.asarray(a).dtype == dtype]
    )
    assert INT32_MIN in values and INT32_MAX in values


@pytest.mark.parametrize(("name", "extreme"), [("max", INT32_MIN), ("min", INT32_MAX)])
def test_int32_reductions_see_slices_of_only_the_extreme(name, extreme):
    """A max started at -(2**31 - 1) instead of -2**31 is wrong only on such a slice."""
    reduce = np.max if name == "max" else np.min
    hit = any(np.any(reduce(s.args[0], axis=s.attrs["axis"]) == extreme) for s in examples(name, dt.int32))
    assert hit


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "add", "equal", "maximum"])
def test_bool_operands_meet_in_every_combination(name):
    seen = set()
    for a, b in map(aligned_pairs, examples(name, dt.bool_)):
        if a.dtype == b.dtype == dt.bool_:
            seen |= set(zip(a.ravel().tolist(), b.ravel().tolist(), strict=True))
    assert seen == set(itertools.product((False, True), repeat=2))


@pytest.mark.parametrize("name", ["max", "min", "sum"])
def test_reductions_see_long_axes(name):
    """XLA:CPU reduces 4096+ element slices on other code paths (YNNPACK skips NaN there)."""
    long = [s for s in examples(name, dt.float32) if s.args[0].size >= 4096]
    assert long
    if name in ("max", "min"):
        assert any(np.isnan(s.args[0]).any() for s in long)


@pytest.mark.parametrize("name", ["add", "negative", "multiply", "sqrt"])
def test_float_boundaries_and_specials_are_drawn(name):
    values = np.concatenate([np.ravel(a) for s in examples(name, dt.float32) for a in float_arrays(s)])
    finite = values[np.isfinite(values)]
    assert np.isnan(values).any() and np.isposinf(values).any() and np.isneginf(values).any()
    assert ((values == 0) & np.signbit(values)).any() and ((values == 0) & ~np.signbit(values)).any()
    assert ((finite != 0) & (np.abs(finite) < np.finfo(np.float32).tiny)).any(), "no subnormals"
    assert (np.abs(finite) > 1e38).any(), "no large magnitudes"


def test_shapes_include_zero_size_and_size_one_broadcasting():
    samples = examples("add", dt.float32)
    assert any(np.asarray(a).size == 0 for s in samples for a in s.args)
    shapes = [[np.shape(a) for a in s.args] for s in samples]
    rank_deficient = any(len(x) != len(y) and len(x) and len(y) for x, y in shapes)
    stretched = any(
        len(x) == len(y) and any(dx == 1 and dy > 1 for dx, dy in zip(x, y, strict=True)) for x, y in shapes
    )
    assert rank_deficient and stretched


def test_captured_constants_include_arrays_mixing_signed_zeros():
    """A constant stored as a splat because 0.0 == -0.0 is only visible on such arrays."""
    captured = [
        s.args[i] for name in ("add", "multiply", "subtract") for s in examples(name, dt.float32) for i in s.captured
    ]
    mixed = [a for a in captured if a.size > 1 and (a == 0).all() and len(set(np.signbit(a).ravel())) == 2]
    assert len(captured) >= 10 and mixed


def test_python_scalars_and_arrays_both_appear_as_operands():
    samples = examples("add", dt.float32)
    assert any(isinstance(a, float) for s in samples for a in s.args)
    assert all(isinstance(a, np.ndarray | bool | int | float) for s in samples for a in s.args)


def test_the_sign_of_zero_is_compared():
    tolerance = tolerance_for("negative", dt.float32)
    assert mismatches(np.float32(0.0), np.float32(-0.0), tolerance)
    assert not mismatches(np.float32(-0.0), np.float32(-0.0), tolerance)
    assert tolerance_for("maximum", dt.float32).signed_zeros is False
    assert all(reason for reason in UNSIGNED_ZEROS.values())
