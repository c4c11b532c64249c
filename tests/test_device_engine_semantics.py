"""What the device engine (the default eager engine since the tenth session) keeps of the
NumPy engine's behaviour, and what it counts: values the references refuse when they are on
the host (OpDef.host_check), ops without a lowering rule (their reference, warned once),
programs' compiles apart from the engine's one-op executables."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, lowering
from hlotrace.engines import eager_engine
from hlotrace.errors import LoweringError, OpError
from hlotrace.jit import xla_trace
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


@pytest.mark.parametrize("engine", ["numpy", "device"])
def test_host_held_indices_out_of_range_are_refused_naming_the_op_and_line(engine):
    x = _t(np.zeros((3, 2)))
    with eager_engine(engine):
        with pytest.raises(
            OpError, match=r"take: index 3 is out of bounds for axis 0 with size 3.*test_device_engine_semantics"
        ):
            x[_t([0, 3], "int32")]
        with pytest.raises(OpError, match="take_along_axis: index -4 is out of bounds for axis 0 with size 3"):
            F.take_along_axis(x, _t([[-4, 0]], "int32"), axis=0)
        with pytest.raises(OpError, match="index_add: index 2 is out of bounds for axis 1 with size 2"):
            F.index_add(x, 1, _t([2], "int32"), _t(np.ones((3, 1))))
        with pytest.raises(OpError, match=r"power.*negative integer powers"):
            F.power(_t([2, 3], "int32"), _t([-1, 1], "int32"))
        with pytest.raises(OpError, match=r"power.*negative integer powers"):
            _t([2, 3], "int32") ** -1  # a Python scalar exponent is on the host too
        # in range (negative counted from the end): computed, on either engine alike
        np.testing.assert_array_equal(x[_t([0, -1], "int32")].numpy(), np.zeros((2, 2), np.float32))


def test_a_refused_host_check_does_not_poison_the_fast_path():
    """The check runs on every application of a checked op, cached executable or not."""
    x = ht.tensor(np.arange(4, dtype=np.int32))
    good = ht.tensor(np.array([1, 2, 1, 2], np.int32))
    bad = ht.tensor(np.array([1, 1, -1, 1], np.int32))  # on the host
    with eager_engine("device"):
        (bad * 1).numpy()  # now on the device too (the host copy kept): dispatch's fast path
        for _ in range(3):
            assert (x**good).numpy().tolist() == [0, 1, 2, 9]  # compiles int32 power, cached
            with pytest.raises(OpError, match="negative integer powers"):
                x**bad
        only_on_device = bad * 1
        assert only_on_device._host is None
        x**only_on_device  # XLA's integer power: not read back, not refused


def test_device_held_indices_are_xlas_clamped_reads():
    """Documented (README, "Eager engines"): reading them would wait for the device."""
    x = _t([[1.0], [2.0], [3.0]])
    with eager_engine("device"):
        idx = _t([0, 1], "int32") + 2  # [2, 3], computed on the device
        assert idx._host is None
        assert x[idx].numpy().ravel().tolist() == [3.0, 3.0]


@pytest.fixture
def unlowered_op():
    """A user's op registered without a lowering rule (removed again afterwards)."""
    op = register_op(
        OpDef(
            name="test_semantics_double_tanh",
            family="tests",
            reference=lambda x: np.tanh(x) * 2,
            infer=lambda x: Aval(x.shape, x.dtype),
            doc="2 tanh(x), without a lowering rule",
        )
    )
    yield op
    OPS.pop(op.name)


def test_an_op_without_a_lowering_rule_runs_its_reference_warned_once(unlowered_op, caplog):
    op = unlowered_op
    assert lowering.rule_for(op.name, "cpu") is None
    x = _t([0.0, 1.0])
    ht.reset_metrics()
    with eager_engine("device"), caplog.at_level(logging.WARNING, logger="hlotrace"):
        first = ht.dispatch.apply(op, x * 1.0)  # a device operand
        second = ht.dispatch.apply(op, x * 1.0)
    np.testing.assert_allclose(first.numpy(), np.tanh([0.0, 1.0]) * 2, rtol=1e-6)
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    assert ht.metrics()["eager_host_fallbacks"] == 2
    warned = [r for r in caplog.records if op.name in r.getMessage()]
    assert len(warned) == 1 and "no lowering rule" in warned[0].getMessage()
    # Compiling it still fails, naming the op and how to add its rule.
    with pytest.raises(LoweringError, match=r"no lowering rule for op 'test_semantics_double_tanh'.*lowering.rule"):
        xla_trace(lambda v: ht.dispatch.apply(op, v), first_call="compiled")(x)


def test_programs_compiles_are_counted_apart_from_the_engines():
    @xla_trace
    def step(x):
        return F.tanh(x * 3.0 - 1.0).sum()

    x = _t(np.linspace(0, 1, 7))
    ht.reset_metrics()
    with eager_engine("device"):
        F.exp(x * 0.5).numpy()  # eager: two one-op executables
        step(x)  # the eager first call (its ops one by one), records
        step(x)  # compiles the program once
    counts = ht.metrics()
    assert counts["compiles"] == 1 and counts["compile_seconds"] > 0
    assert counts["eager_compiles"] >= 5 and counts["eager_compile_seconds"] > 0


def test_the_report_has_a_line_for_the_device_engine():
    ht.reset_metrics()
    x = _t([1.0, 2.0])
    assert "eager ops on the device" not in ht.metrics_report()  # this suite's NumPy engine
    with eager_engine("device"):
        (x * 2.0 + 1.0).numpy()
    line = [ln for ln in ht.metrics_report().splitlines() if "eager ops on the device" in ln]
    assert len(line) == 1 and line[0].split()[5] == "2", line  # two executions


# XLA:CPU's quickly compiled (LLVM -O0) tanh rounds 577 of these 4096 values differently
# from the optimized one (matmuls differ too): which executable ran must never depend on
# how fast the machine compiled.
ROUNDS_APART = np.random.default_rng(0).standard_normal(4096).astype(np.float32)


def _tanh_twice(engine, monkeypatch):
    from hlotrace import engines

    monkeypatch.setitem(engines._device_engines, None, engine)
    with eager_engine("device"):
        x = ht.tensor(ROUNDS_APART)
        return F.tanh(x).numpy(), F.tanh(x).numpy()


def test_eager_results_are_the_optimized_executables_from_the_first_application(monkeypatch):
    """Found in the eleventh session: the engine ran each op's quickly compiled executable
    until the optimized one happened to be ready, so the same SGD steps run twice in one
    process differed by 3e-8. Tiering is opt-in now, as for programs."""
    from hlotrace.engines.device import DeviceEngine

    monkeypatch.delenv("HLOTRACE_TIERED_COMPILE", raising=False)
    first, second = _tanh_twice(DeviceEngine(platform="cpu"), monkeypatch)
    optimized, _ = _tanh_twice(DeviceEngine(platform="cpu", quick_first=False), monkeypatch)
    np.testing.assert_array_equal(first, optimized)
    np.testing.assert_array_equal(second, optimized)


def test_tiered_eager_runs_quick_once_then_optimized_however_slow_the_compile(monkeypatch):
    """HLOTRACE_TIERED_COMPILE=1: the first application of an op runs the quick executable,
    every later one the optimized executable, waited for when its compile is still running."""
    import time

    from hlotrace.engines.device import DeviceEngine
    from hlotrace.runtime import tiered

    monkeypatch.setenv("HLOTRACE_TIERED_COMPILE", "1")
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", "off")
    compile_after = tiered._compile_after

    def slowly(*args):
        time.sleep(0.5)
        return compile_after(*args)

    monkeypatch.setattr(tiered, "_compile_after", slowly)
    quick, second = _tanh_twice(DeviceEngine(platform="cpu"), monkeypatch)
    optimized, _ = _tanh_twice(DeviceEngine(platform="cpu", quick_first=False), monkeypatch)
    np.testing.assert_array_equal(second, optimized)
    assert (quick != optimized).any()  # the first did run the quick executable
    np.testing.assert_allclose(quick, optimized, rtol=1e-6, atol=1e-7)
