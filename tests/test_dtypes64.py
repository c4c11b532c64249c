"""float64 and int64: promotion, tensor() defaults, compiled round trips, trace files, CLI.

The per-op coverage (every op that admits them, compiled vs eager) comes from the
generated property tests; these pin down the rules and the PJRT transfer in a few lines.
"""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
import hlotrace.lowering.rules.reduction.basic as reduction_rules
from hlotrace import dtypes as dt
from hlotrace.jit import xla_trace
from hlotrace.lowering import hlo, lower_trace
from hlotrace.lowering.registry import RULES
from hlotrace.ops import OPS
from hlotrace.runtime.jaxlib_compat import stablehlo
from hlotrace.testing.check import CI_BASE_SEED, STRATEGY_EXAMPLES, property_test
from hlotrace.tools.cli import parse_input_spec
from hlotrace.trace import Trace

# Pairs where hlotrace's promotion is NumPy's own (the 32-bit deviations are listed below).
SAME_AS_NUMPY = [
    (dt.int64, dt.int32),
    (dt.int64, dt.bool_),
    (dt.int64, dt.float16),
    (dt.int64, dt.float32),
    (dt.int64, dt.float64),
    (dt.float64, dt.int32),
    (dt.float64, dt.float16),
    (dt.float64, dt.bfloat16),
    (dt.float64, dt.float32),
    (dt.float64, dt.bool_),
]


@pytest.mark.parametrize(("a", "b"), SAME_AS_NUMPY)
def test_promotion_of_64_bit_types_follows_numpy(a, b):
    expected = np.result_type(a, b)
    assert dt.promote(a, b) == expected and dt.promote(b, a) == expected


def test_32_bit_deviations_are_kept():
    assert dt.promote(dt.int32, dt.float32) == dt.float32  # NumPy: float64
    assert dt.promote(dt.int32, dt.float16) == dt.float32
    assert dt.promote(dt.int64, dt.bfloat16) == dt.float64  # ml_dtypes would refuse the mix


@pytest.mark.parametrize(
    ("dtype", "scalar", "expected"),
    [
        (dt.int64, 1, dt.int64),
        (dt.int64, 1.0, dt.float64),  # NumPy 2: int64 array + 1.0 is float64
        (dt.int32, 1.0, dt.float32),  # hlotrace's 32-bit rule (NumPy: float64)
        (dt.float64, 1, dt.float64),
        (dt.float64, 1.0, dt.float64),
    ],
)
def test_weak_python_scalars(dtype, scalar, expected):
    assert (ht.tensor(np.ones(2, dtype)) + scalar).dtype == expected
    if dtype != dt.int32:
        assert (np.ones(2, dtype) + scalar).dtype == expected  # NumPy agrees


def test_division_and_reductions_of_int64():
    x = ht.tensor(np.array([1, 2, 2**40], np.int64))
    assert (x / 2).dtype == dt.float64
    assert F.sum(x).dtype == dt.int64 and int(F.sum(x).numpy()) == 3 + 2**40
    assert F.mean(x).dtype == dt.float64
    assert F.exp(ht.tensor(np.zeros(1, np.int64))).dtype == dt.float64
    assert F.mean(ht.tensor(np.ones(2, np.int32))).dtype == dt.float32


def test_tensor_defaults_python_data_to_32_bits_and_keeps_numpy_64_bits():
    assert ht.tensor([1.0, 2.0]).dtype == dt.float32
    assert ht.tensor([1, 2]).dtype == dt.int32
    assert ht.tensor(3.5).dtype == dt.float32
    assert ht.tensor(np.zeros(2)).dtype == dt.float64
    assert ht.tensor(np.zeros(2, np.int64)).dtype == dt.int64
    assert ht.tensor([1.0], dtype="f64").dtype == dt.float64
    assert ht.tensor(np.zeros(2, np.int16)).dtype == dt.int32
    assert ht.tensor(np.zeros(2), dtype=np.float32).dtype == dt.float32


def _compiled(fn, *args):
    traced = xla_trace(fn)
    eager = traced(*args)  # first call: eager, recorded
    compiled = traced(*args)
    assert traced.cache_size == 1
    return traced, eager, compiled


def test_compiled_64_bit_function_equals_eager():
    def f(x, i):
        return F.tanh(x) * 3 + i, F.sum(i * 2**33, axis=0), F.mean(i), F.matmul(x, x)

    x = np.linspace(-2, 2, 9).reshape(3, 3)
    i = np.array([[2**40 + 1, -3, 7]] * 3, np.int64)
    _, eager, compiled = _compiled(f, x, i)
    for e, c, dtype in zip(eager, compiled, (dt.float64, dt.int64, dt.float64, dt.float64), strict=True):
        assert e.dtype == c.dtype == dtype
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-14, atol=0)


def test_values_32_bits_cannot_hold_survive_a_compiled_round_trip():
    x = np.array([1.0 + 2.0**-40, -(2.0**-1060)], np.float64)  # a float64 subnormal too
    i = np.array([2**40 + 1, -(2**63), 2**63 - 1], np.int64)
    traced, _, (y, j) = _compiled(lambda a, b: (a + 0.0, b + 0), x, i)
    np.testing.assert_array_equal(j.numpy(), i)
    assert y.numpy()[0] == x[0]
    assert "tensor<2xf64>" in traced.stablehlo_text and "tensor<3xi64>" in traced.stablehlo_text


def test_jax_global_x64_flag_is_untouched():
    import jax

    before = jax.config.jax_enable_x64
    _compiled(lambda a: a * 2, np.ones(3))
    assert jax.config.jax_enable_x64 == before
    assert jax.numpy.asarray(np.ones(2)).dtype == (np.float64 if before else np.float32)


def test_trace_file_round_trips_64_bit_vars_and_constants(tmp_path):
    table = ht.tensor(np.array([1.0 + 2.0**-40, 2.0], np.float64))
    big = ht.tensor(np.array(2**40 + 1, np.int64))

    def f(x, i):
        return x * table + (1.0 + 2.0**-41), i + big

    traced, _, _ = _compiled_capturing(f, np.ones(2), np.array([1, 2], np.int64))
    trace = traced.trace
    trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.vars == trace.vars
    assert {v.dtype for v in loaded.vars.values()} == {dt.float64, dt.int64}
    for k, v in trace.constants.items():
        assert loaded.constants[k].dtype == v.dtype
        np.testing.assert_array_equal(loaded.constants[k], v)
    assert lower_trace(loaded).text() == lower_trace(trace).text()


def _compiled_capturing(fn, *args):
    traced = xla_trace(fn, capture_as_const=True)
    eager = traced(*args)
    return traced, eager, traced(*args)


def test_names_and_cli_signatures():
    assert dt.canonicalize("f64") == dt.float64 and dt.canonicalize("i64") == dt.int64
    assert dt.canonicalize(np.float64) == dt.float64 and dt.canonicalize(np.uint8) == dt.int32
    assert dt.short_name(dt.float64) == "f64" and dt.short_name(dt.int64) == "i64"
    assert parse_input_spec("f64[2,3]") == ((2, 3), dt.float64)
    assert parse_input_spec("i64[]") == ((), dt.int64)


def test_astype_accepts_64_bit_targets():
    x = ht.tensor(np.array([1.5, -2.5], np.float32))
    assert F.astype(x, "float64").dtype == dt.float64
    assert F.astype(x, np.int64).numpy().tolist() == [1, -2]


# The 64-bit property tests (fewer examples than the 32-bit ones, see check.py) must still
# catch the mistakes a 64-bit rule is prone to: computing in the 32-bit (or float64) type.


def _assert_property_test_fails(name, dtype):
    with pytest.raises(AssertionError):
        property_test(OPS[name], CI_BASE_SEED, dtype, shrink=False, max_examples=STRATEGY_EXAMPLES)()


def test_int64_comparison_done_in_float64_is_caught(monkeypatch):
    def in_float64(ctx, x, y):
        out = ctx.out_aval.shape
        lhs, rhs = (hlo.to_aval(v, a, type(a)(out, dt.float64)) for v, a in zip((x, y), ctx.in_avals, strict=True))
        return hlo.compare(lhs, rhs, "LT", dt.float64)

    monkeypatch.setitem(RULES, "less", in_float64)
    _assert_property_test_fails("less", dt.int64)


def test_float64_add_done_in_float32_is_caught(monkeypatch):
    def in_float32(ctx, x, y):
        out = ctx.out_aval
        narrow = type(out)(out.shape, dt.float32)
        lhs, rhs = (hlo.to_aval(v, a, narrow) for v, a in zip((x, y), ctx.in_avals, strict=True))
        return hlo.convert(stablehlo.AddOp(lhs, rhs).result, narrow, out.dtype)

    monkeypatch.setitem(RULES, "add", in_float32)
    _assert_property_test_fails("add", dt.float64)


def test_int64_sum_accumulated_in_int32_is_caught(monkeypatch):
    original = reduction_rules.accumulation_dtype

    def narrow(op, dtype):
        return dt.int32 if dtype == dt.int64 else original(op, dtype)

    monkeypatch.setattr(reduction_rules, "accumulation_dtype", narrow)
    _assert_property_test_fails("sum", dt.int64)


def test_int64_max_started_at_the_int32_minimum_is_caught(monkeypatch):
    original = reduction_rules._identity

    def int32_start(op_name, dtype):
        return -(2**31) if dtype == dt.int64 and op_name == "max" else original(op_name, dtype)

    monkeypatch.setattr(reduction_rules, "_identity", int32_start)
    _assert_property_test_fails("max", dt.int64)
