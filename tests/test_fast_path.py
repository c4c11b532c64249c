"""The hottest call path of ``xla_trace`` (issue 20): a stateless function called with
positional Tensors on the device is looked up by the identity of its buffers' avals and run
by one closure. Whatever changes between calls -- a shape, a dtype, a ``.grad``, the pass
pipeline, a lowering override, a value updated in place, host arrays -- must still be seen:
each test makes several fast calls first, then changes one thing."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.traced as jit_module
from hlotrace import lowering, nn
from hlotrace.jit import xla_trace
from hlotrace.metrics import metrics
from hlotrace.runtime.jaxlib_compat import stablehlo
from hlotrace.tensor import Parameter

FAST_CALLS = 5


def _t(shape, dtype="float32", seed=0):
    return ht.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _warm(f, *args):
    """Record, compile, then call until the aval-keyed path serves the calls."""
    for _ in range(FAST_CALLS):
        out = f(*args)
    assert f._fast, "the steady calls did not reach the aval-keyed path"
    return out


def _sub():
    @xla_trace
    def sub(a, b):
        return a - b

    return sub


def test_steady_calls_take_the_fast_path_and_are_counted():
    f = _sub()
    x, y = _t((3, 4)), _t((3, 4), seed=1)
    _warm(f, x, y)
    before = metrics()["executions"]
    out = f(x, y)
    assert metrics()["executions"] == before + 1
    assert out._device is not None and type(out) is ht.Tensor and out.grad is None
    np.testing.assert_allclose(out.numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    assert f.cache_size == 1


@pytest.mark.parametrize("arity", [0, 1, 2, 3, 5])
def test_every_arity_reaches_the_fast_path_and_computes_the_same(arity):
    @xla_trace
    def total(*xs):
        out = ht.tensor(np.float32(1.5))
        for x in xs:
            out = out + x * 2.0
        return out

    xs = [_t((2, 3), seed=i) for i in range(arity)]
    expected = 1.5 + sum((x.numpy() * 2.0 for x in xs), np.zeros((2, 3) if arity else (), np.float32))
    out = _warm(total, *xs)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(total(*xs).numpy(), expected, rtol=1e-6)
    assert total.cache_size == 1


def test_a_new_shape_or_dtype_after_fast_calls_recompiles():
    f = _sub()
    x, y = _t((3, 4)), _t((3, 4), seed=1)
    _warm(f, x, y)
    wide = _warm(f, _t((5, 4)), _t((5, 4), seed=2))  # records, compiles, then fast calls again
    assert wide.shape == (5, 4) and f.cache_size == 2
    x64, y64 = _t((3, 4), "float64"), _t((3, 4), "float64", seed=1)
    out = f(x64, y64)
    assert out.dtype == np.float64 and f.cache_size == 3
    np.testing.assert_array_equal(f(x64, y64).numpy(), x64.numpy() - y64.numpy())
    # ... and the first signature is still served, with the right executable.
    np.testing.assert_allclose(f(x, y).numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    assert f(x, y).shape == (3, 4) and f.cache_size == 3


def test_a_grad_set_on_an_argument_leaves_the_fast_path():
    @xla_trace
    def double(a):
        return a * 2.0

    x = _t((4,))
    _warm(double, x)
    x.grad = _t((4,), seed=3)  # a .grad is part of the signature: another program
    np.testing.assert_allclose(double(x).numpy(), x.numpy() * 2.0, rtol=1e-6)
    assert double.cache_size == 2
    x.grad = None
    np.testing.assert_allclose(double(x).numpy(), x.numpy() * 2.0, rtol=1e-6)
    assert double.cache_size == 2


def test_a_changed_pass_pipeline_after_fast_calls_recompiles(monkeypatch):
    f = _sub()
    x, y = _t((3, 4)), _t((3, 4), seed=1)
    _warm(f, x, y)
    monkeypatch.setenv("HLOTRACE_PASSES", "")
    np.testing.assert_allclose(f(x, y).numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    assert f.cache_size == 2
    _warm(f, x, y)
    monkeypatch.setenv("HLOTRACE_PASSES", "cse")
    f(x, y)
    assert f.cache_size == 3
    monkeypatch.delenv("HLOTRACE_PASSES")
    f(x, y)
    assert f.cache_size == 3  # the default pipeline's entry again


def test_a_lowering_override_after_fast_calls_is_not_bypassed():
    @xla_trace
    def exp(a):
        return ht.F.exp(a)

    x = _t((4,))
    _warm(exp, x)

    def negate_rule(ctx, operand):
        return stablehlo.NegOp(operand).result

    with lowering.override({"exp": negate_rule}):
        exp(x)  # recorded again (eagerly): the override is part of the signature
        for _ in range(FAST_CALLS):
            np.testing.assert_array_equal(exp(x).numpy(), -x.numpy())
    assert exp.cache_size == 2
    np.testing.assert_allclose(exp(x).numpy(), np.exp(x.numpy()), rtol=1e-6)


def test_values_updated_between_fast_calls_are_read_anew():
    f = _sub()
    x, y = _t((3,)), _t((3,), seed=1)
    _warm(f, x, y)
    x += 1.0  # eagerly: x now holds a host value only
    assert x._device is None
    np.testing.assert_allclose(f(x, y).numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    z = f(x, y)  # a device result of the same aval feeds the fast path
    np.testing.assert_allclose(f(z, y).numpy(), z.numpy() - y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(y, x).numpy(), y.numpy() - x.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(f(x, x).numpy(), np.zeros(3, np.float32))  # one tensor twice
    assert f.cache_size == 1


def test_host_arguments_are_copied_once_then_served_fast():
    f = _sub()
    _warm(f, _t((3,)), _t((3,), seed=1))
    x, y = _t((3,), seed=4), _t((3,), seed=5)  # fresh host values, same signature
    before = metrics()["host_to_device_bytes"]
    np.testing.assert_allclose(f(x, y).numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    assert metrics()["host_to_device_bytes"] == before + 2 * 3 * 4
    assert x._device is not None and y._device is not None
    f(x, y)
    assert metrics()["host_to_device_bytes"] == before + 2 * 3 * 4
    assert f.cache_size == 1


def test_the_fast_table_is_bounded(monkeypatch):
    monkeypatch.setattr(jit_module, "FAST_KEYS", 2)

    @xla_trace
    def neg(a):
        return -a

    for n in (2, 3, 4, 2, 3, 4):
        x = _t((n,), seed=n)
        for _ in range(3):
            np.testing.assert_array_equal(neg(x).numpy(), -x.numpy())
        assert len(neg._fast) <= 2 and neg._fast.keys() == neg._fast_avals.keys()
    assert neg.cache_size == 3


def test_steps_that_write_state_never_use_the_fast_table():
    @xla_trace
    def accumulate(total, x):
        total += x  # an argument updated in place: written back after every call
        return total * 1.0

    total, x = ht.tensor(np.zeros(3, np.float32)), _t((3,))
    for i in range(FAST_CALLS):
        out = accumulate(total, x)
        np.testing.assert_allclose(total.numpy(), (i + 1) * x.numpy(), rtol=1e-6)
        np.testing.assert_allclose(out.numpy(), total.numpy(), rtol=1e-6)
    assert not accumulate._fast

    nn.init.seed(0)
    layer = nn.Linear(3, 2)

    @xla_trace
    def forward(x, layer):
        return layer(x)

    for _ in range(FAST_CALLS):
        forward(x, layer)
    assert not forward._fast
    layer.weight = Parameter(np.ones((2, 3), np.float32))  # a structural change is still seen
    np.testing.assert_allclose(forward(x, layer).numpy(), x.numpy() @ np.ones((3, 2)) + layer.bias.numpy(), rtol=1e-6)


def test_tuple_results_and_keyword_calls_stay_correct():
    @xla_trace
    def both(a, b):
        return a + b, (a - b, {"prod": a * b})

    x, y = _t((2,)), _t((2,), seed=1)
    for _ in range(FAST_CALLS):
        s, (d, rest) = both(x, y)
    assert both._fast
    np.testing.assert_allclose(s.numpy(), x.numpy() + y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(rest["prod"].numpy(), x.numpy() * y.numpy(), rtol=1e-6)
    s2, _ = both(x, b=y)  # keywords: the general path, another signature
    np.testing.assert_allclose(s2.numpy(), s.numpy(), rtol=1e-6)


def test_the_executor_without_result_handlers_counts_and_wraps_alike(monkeypatch, caplog):
    """jaxlib_execute.make_executor falls back to disassembling the results where result
    handlers cannot be made (and says so once); the fused counting and wrapping must not
    change with it."""
    from hlotrace.runtime import jaxlib_execute
    from hlotrace.tensor import from_device_buffer

    f = _sub()
    x, y = _t((3,)), _t((3,), seed=1)
    _warm(f, x, y)
    exe = f._last.executable
    shapes = [(a.shape, a.dtype) for a in exe.out_avals]

    def no_handlers(shape, dtype):
        raise TypeError("this jaxlib has no array_result_handler")

    monkeypatch.setattr(jaxlib_execute, "_jax_aval", no_handlers)
    monkeypatch.setattr(jaxlib_execute, "_warned_slow_paths", set())
    counts = {"executions": 0}
    buffers = [x._device, y._device]
    plain = jaxlib_execute.make_executor(exe.loaded, shapes, exe.device, counts=counts)
    single = jaxlib_execute.make_executor(
        exe.loaded, shapes, exe.device, counts=counts, wrap=from_device_buffer, single=True
    )
    listed = jaxlib_execute.make_executor(exe.loaded, shapes, exe.device, counts=counts, wrap=from_device_buffer)
    expected = x.numpy() - y.numpy()
    np.testing.assert_allclose(np.asarray(plain(buffers)[0]), expected, rtol=1e-6)
    np.testing.assert_allclose(single(buffers).numpy(), expected, rtol=1e-6)
    (out,) = listed(buffers)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    assert counts["executions"] == 3
    slow = [r for r in caplog.records if r.name == "hlotrace" and "result handler" in r.getMessage()]
    assert len(slow) == 1 and "no array_result_handler" in slow[0].getMessage()


@pytest.mark.parametrize("skip_checks", [True, False], ids=["jax-0.10", "jax-0.11"])
def test_result_handlers_are_made_with_either_jax_signature(monkeypatch, caplog, skip_checks):
    """jax 0.10's ``array_result_handler`` takes ``_skip_checks``, jax 0.11's does not: both
    must give the handlers' path (on a GPU with jax 0.11 every compiled call fell back to
    disassembling its results unseen, a model step 1.4-2x jax.jit's time)."""
    from jax._src.lib import xla_client as xc

    from hlotrace.runtime import jaxlib_execute

    real = xc.array_result_handler
    made = []

    def handler(aval, sharding, committed, **kwargs):
        if kwargs and not skip_checks:
            raise TypeError("incompatible function arguments")
        made.append(kwargs)
        return real(aval, sharding, committed=committed, _skip_checks=True)  # 0.11 has no checks to skip

    monkeypatch.setattr(xc, "array_result_handler", handler)
    monkeypatch.setattr(jaxlib_execute, "_handler_kwargs", [])
    monkeypatch.setattr(jaxlib_execute, "_warned_slow_paths", set())
    f = xla_trace(lambda a, b: (a - b, a * b))
    x, y = _t((3,)), _t((3,), seed=1)
    f(x, y)
    d, p = f(x, y)
    np.testing.assert_allclose(d.numpy(), x.numpy() - y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), x.numpy() * y.numpy(), rtol=1e-6)
    assert len(made) >= 2 and all(kwargs == ({"_skip_checks": True} if skip_checks else {}) for kwargs in made)
    assert not [r for r in caplog.records if "result handler" in r.getMessage()]
