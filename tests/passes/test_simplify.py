"""simplify's rules are exact (bitwise on special values) and fire; elide-guards keeps results;
the rewrite API runs the README's user pass verbatim."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.jit import xla_trace
from hlotrace.passes.simplify import GUARDS, RULES
from hlotrace.testing.differential import assert_bitwise_equal, run_lowered


def _special(dtype=np.float32, shape=(4, 6)) -> np.ndarray:
    """Every special float value, then random ones."""
    info = np.finfo(dtype)
    values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        np.inf,
        -np.inf,
        np.nan,
        info.tiny / 4,
        -info.tiny / 4,
        info.max,
        -info.max,
        info.tiny,
    ]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(int(np.prod(shape))).astype(dtype)
    x[: len(values)] = np.array(values, dtype)
    return x.reshape(shape)


@pytest.fixture(autouse=True, params=["native", "python"])
def driver(request, monkeypatch):
    """Every test here runs with MLIR's native greedy driver and with the Python one."""
    monkeypatch.setenv("HLOTRACE_REWRITE_DRIVER", request.param)
    return request.param


def _kinds(lowered) -> list[str]:
    return [op.operation.name for op in passes.main_function(lowered.module).regions[0].blocks[0].operations]


def _run(fn, arrays, pipeline="simplify", capture=False):
    traced = xla_trace(fn, passes="", capture_as_const=capture)
    traced(*[ht.tensor(a) for a in arrays])
    out = passes.run(traced.lowered, pipeline)
    assert_bitwise_equal(run_lowered(out, arrays), run_lowered(traced.lowered, arrays), f"{pipeline} on {fn}")
    return _kinds(traced.lowered), _kinds(out)


def _fired(fn, arrays, rules=RULES, capture=False) -> dict:
    traced = xla_trace(fn, passes="", capture_as_const=capture)
    traced(*[ht.tensor(a) for a in arrays])
    module = passes.run(traced.lowered, "").module
    return rules.apply(module)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_add_negative_zero_and_multiply_one_are_dropped_exactly(dtype):
    x = _special(dtype)
    minus0, one = ht.tensor(np.full(x.shape, -0.0, dtype)), ht.tensor(np.ones(x.shape, dtype))
    before, after = _run(lambda x: ((x + minus0) * one) / one - ht.tensor(np.zeros(x.shape, dtype)), [x], capture=True)
    arithmetic = ("stablehlo.add", "stablehlo.multiply", "stablehlo.divide", "stablehlo.subtract")
    assert sum(k in arithmetic for k in before) == 4 and not any(k in arithmetic for k in after)


def test_adding_positive_zero_is_kept():
    """x + (+0.0) turns -0.0 into +0.0: not an identity, so it must stay."""
    x = _special()
    zero = ht.tensor(np.zeros(x.shape, np.float32))
    fired = _fired(lambda x: x + zero, [x], capture=True)
    assert "add-zero" not in fired
    before, after = _run(lambda x: x + zero, [x], capture=True)
    # (the add rule spells x + 0.0 as select(x == 0, +0, x)); MLIR's driver may drop a dead constant
    assert [k for k in after if k != "stablehlo.constant"] == [k for k in before if k != "stablehlo.constant"]


def test_subtracting_negative_zero_is_kept():
    x = _special()
    minus0 = ht.tensor(np.full(x.shape, -0.0, np.float32))
    fired = _fired(lambda x: x - minus0, [x], capture=True)
    assert "subtract-zero" not in fired


def test_integer_identities():
    x = np.array([[0, -1, 2**31 - 1, -(2**31)], [5, 6, 7, 8]], np.int32)
    zero, one = ht.tensor(np.zeros(x.shape, np.int32)), ht.tensor(np.ones(x.shape, np.int32))
    fired = _fired(lambda x: (zero + x - zero) * one, [x], capture=True)
    assert fired.get("add-zero") == 1 and fired.get("subtract-zero") == 1 and fired.get("multiply-one") == 1
    _run(lambda x: (zero + x - zero) * one, [x], capture=True)


def test_transposes_and_reshapes_collapse():
    x = _special(shape=(2, 3, 4))
    fn = lambda x: F.reshape(F.reshape(F.transpose(F.transpose(x, (1, 0, 2)), (1, 0, 2)), (6, 4)), (24,))  # noqa: E731
    before, after = _run(fn, [x])
    assert before.count("stablehlo.transpose") == 2 and "stablehlo.transpose" not in after
    assert after.count("stablehlo.reshape") == 1
    fn2 = lambda x: F.transpose(F.transpose(x, (1, 2, 0)), (0, 2, 1))  # noqa: E731  (two different permutations)
    before, after = _run(fn2, [x])
    assert after.count("stablehlo.transpose") == 1


def test_convert_round_trips_only_when_widening():
    x = _special(np.float16)
    fired = _fired(lambda x: F.astype(F.astype(x, "float32"), "float16"), [x])
    assert fired.get("convert-round-trip") == 1
    _run(lambda x: F.astype(F.astype(x, "float32"), "float16"), [x])
    y = _special(np.float64)
    fired = _fired(lambda y: F.astype(F.astype(y, "float32"), "float64"), [y])
    assert "convert-round-trip" not in fired  # f64 -> f32 rounds: not an identity
    _run(lambda y: F.astype(F.astype(y, "float32"), "float64"), [y])


def test_softmax_guards_are_elided_and_results_keep_their_nans():
    x = _special(shape=(5, 9))
    x[1, 3], x[4, :] = np.nan, np.nan
    traced = xla_trace(lambda x: F.softmax(x, axis=-1), passes="")
    traced(ht.tensor(x))
    out = passes.run(traced.lowered, "elide-guards")
    kinds = _kinds(out)
    assert kinds.count("stablehlo.reduce") == 2 and "stablehlo.select" not in kinds
    got, want = run_lowered(out, [x])[0], run_lowered(traced.lowered, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.max(x, axis=-1),  # the max itself is an output: its NaN must stay
        lambda x: x - F.max(x, axis=-1, keepdims=True),  # no sum over the row
        lambda x: F.exp(x - F.max(x, axis=-1, keepdims=True)) / F.sum(F.exp(x), axis=-1, keepdims=True),  # another sum
        lambda x: (  # e's own row sum exists, but the division uses another sum
            F.exp(x - F.max(x, axis=-1, keepdims=True)) / F.sum(F.exp(x), axis=-1, keepdims=True),
            F.sum(F.exp(x - F.max(x, axis=-1, keepdims=True)), axis=-1),
        ),
        lambda x: (
            F.exp(x - F.max(x, axis=-1, keepdims=True))
            / F.sum(F.exp(x - F.max(x, axis=0, keepdims=True)), axis=-1, keepdims=True)
        ),
    ],
)
def test_nan_guards_that_matter_are_kept(fn):
    x = _special(shape=(5, 9))
    x[1, 3] = np.nan
    traced = xla_trace(fn, passes="cse")
    traced(ht.tensor(x))
    module = passes.run(traced.optimized, "").module  # after cse: one max, one exp
    assert "softmax-nan-guard" not in GUARDS.apply(module)
    out = passes.run(traced.optimized, "elide-guards")
    for got, want in zip(run_lowered(out, [x]), run_lowered(traced.optimized, [x]), strict=True):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_sum_zero_guard_is_kept_for_values_that_can_be_negative_zero():
    x = np.full((3, 1), -0.0, np.float32)
    fired = _fired(lambda x: F.sum(x, axis=-1), [x], rules=GUARDS)
    assert "sum-zero-guard" not in fired
    fired = _fired(lambda x: F.sum(F.exp(x), axis=-1), [x], rules=GUARDS)
    assert fired.get("sum-zero-guard") == 1


def test_readme_user_pass_runs_verbatim():
    # The README's example, as written there.
    from hlotrace import passes
    from hlotrace.passes.rewrite import RuleSet
    from hlotrace.runtime.jaxlib_compat import stablehlo

    rules = RuleSet("silu-composite")

    @rules.pattern("stablehlo.multiply")
    def silu(m):
        """x * logistic(x) becomes one composite, mylib.silu."""
        x, s = m.operands
        if not m.produced_by(s, "stablehlo.logistic") or m.producer(s).operands[0] != x:
            return None
        return m.composite("mylib.silu", [x], lambda a: stablehlo.MulOp(a, stablehlo.LogisticOp(a).result).result)

    passes.register_pass("silu-composite")(rules.as_pass())
    try:

        @xla_trace(passes="silu-composite")
        def swish(x):
            return x * F.sigmoid(x)

        x = _special()
        swish(ht.tensor(x))
        y = swish(ht.tensor(x))
        assert 'stablehlo.composite "mylib.silu"' in swish.optimized_text
        assert_bitwise_equal([y.numpy()], run_lowered(swish.lowered, [x]), "silu-composite")
    finally:
        passes.unregister_pass("silu-composite")


HAND_WRITTEN = """
func.func public @main(%x: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3xf32>) {
  %one = stablehlo.constant dense<1.0> : tensor<3x3xf32>
  %t = stablehlo.broadcast_in_dim %x, dims = [1, 0] : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %y = stablehlo.multiply %t, %one : tensor<3x3xf32>
  %lo = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %hi = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r:2 = stablehlo.reduce(%x init: %hi), (%x init: %lo) across dimensions = [1] : (tensor<3x3xf32>, tensor<3x3xf32>, tensor<f32>, tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<f32>, %d: tensor<f32>) {
    %m = stablehlo.maximum %a, %b : tensor<f32>
    %n = stablehlo.minimum %c, %d : tensor<f32>
    stablehlo.return %m, %n : tensor<f32>, tensor<f32>
  }
  return %y, %r#0 : tensor<3x3xf32>, tensor<3xf32>
}
"""


def test_a_transposing_broadcast_stays_and_half_used_ops_survive_cleanup():
    from hlotrace.lowering import LoweredModule
    from hlotrace.ops.registry import Aval
    from hlotrace.runtime.jaxlib_compat import ir, shared_context

    with shared_context():
        module = ir.Module.parse(HAND_WRITTEN)
    lowered = LoweredModule(
        module, [Aval((3, 3), np.float32)], [Aval((3, 3), np.float32), Aval((3,), np.float32)], "hand"
    )
    out = passes.run(lowered, "simplify")  # x * 1 fires, so dead-op removal runs
    kinds = _kinds(out)
    assert "stablehlo.multiply" not in kinds and "stablehlo.broadcast_in_dim" in kinds and "stablehlo.reduce" in kinds
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    assert_bitwise_equal(run_lowered(out, [x]), run_lowered(lowered, [x]), "hand-written")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_every_simplify_rule_is_exact_on_drawn_values(dtype):
    """Property test: a program in which every arithmetic and shape rule fires, on arrays
    drawn by hypothesis (NaN, ±inf, ±0.0, subnormals, extremes), is bitwise unchanged."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.extra.numpy import arrays

    width = np.finfo(dtype).bits
    shape = (3, 4)
    minus0, zero, one = (ht.tensor(np.full(shape, v, dtype)) for v in (-0.0, 0.0, 1.0))

    def program(x):
        y = ((x + minus0) * one) / one - zero  # add-zero, multiply-one, divide-one, subtract-zero
        y = F.transpose(F.transpose(y, (1, 0)), (1, 0))  # transpose-of-transpose
        y = F.reshape(F.reshape(y, (12,)), shape)  # reshape-of-reshape
        wide = "float64" if dtype == np.float32 else "float32"
        return F.astype(F.astype(y, wide), np.dtype(dtype).name) if dtype != np.float64 else y

    traced = xla_trace(program, passes="", capture_as_const=True)
    traced(ht.tensor(np.zeros(shape, dtype)))
    out = passes.run(traced.lowered, "simplify")
    assert len(_kinds(out)) < len(_kinds(traced.lowered)) - 6

    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(
        arrays(dtype, shape, elements=st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True))
    )
    def exact(x):
        assert_bitwise_equal(run_lowered(out, [x]), run_lowered(traced.lowered, [x]), "simplify")

    exact()


ZERO_IDENTITIES = """
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %p = stablehlo.constant dense<0.0> : tensor<4xf32>
  %n = stablehlo.constant dense<-0.0> : tensor<4xf32>
  %a = stablehlo.add %x, %p : tensor<4xf32>
  %b = stablehlo.add %n, %x : tensor<4xf32>
  %c = stablehlo.subtract %x, %n : tensor<4xf32>
  %d = stablehlo.subtract %x, %p : tensor<4xf32>
  return %a, %b, %c, %d : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
"""


def test_only_the_exact_zero_identities_are_dropped():
    """x + (+0.0) and x - (-0.0) turn -0.0 into +0.0: kept. x + (-0.0), x - (+0.0): dropped."""
    from hlotrace.lowering import LoweredModule
    from hlotrace.ops.registry import Aval
    from hlotrace.runtime.jaxlib_compat import ir, shared_context

    with shared_context():
        module = ir.Module.parse(ZERO_IDENTITIES)
    lowered = LoweredModule(module, [Aval((4,), np.float32)], [Aval((4,), np.float32)] * 4, "zeros")
    out = passes.run(lowered, "simplify")
    assert _kinds(out).count("stablehlo.add") == 1 and _kinds(out).count("stablehlo.subtract") == 1
    x = np.array([-0.0, 0.0, np.nan, -1.5], np.float32)
    assert_bitwise_equal(run_lowered(out, [x]), run_lowered(lowered, [x]), "zero identities")


def test_a_pattern_that_raises_is_reported_by_either_driver(driver):
    from hlotrace.passes.rewrite import RuleSet

    rules = RuleSet("raising")

    @rules.pattern("stablehlo.exponential")
    def broken(m):
        """Raises."""
        raise ZeroDivisionError("inside the pattern")

    traced = xla_trace(lambda x: F.exp(x), passes="")
    traced(ht.tensor(np.ones(2, np.float32)))
    module = passes.run(traced.lowered, "").module
    with pytest.raises(ZeroDivisionError, match="inside the pattern"):
        rules.apply(module, driver=driver)
