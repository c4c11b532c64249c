"""xla_trace: first call eager + record + compile, later calls compiled, one entry per signature."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.errors import TraceError
from hlotrace.jit import xla_trace


def _t(shape, dtype="float32", seed=0):
    return ht.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def test_first_call_eager_then_compiled():
    calls = []

    @xla_trace
    def f(x):
        calls.append(1)  # Python side effects run only while recording
        return F.exp(x) * 2.0

    x = _t((3, 4))
    eager = f(x)
    assert eager._host is not None  # eager result computed by NumPy
    compiled = f(x)
    assert compiled._host is None and compiled._device is not None  # stays on device
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-6)
    assert len(calls) == 1
    assert f.cache_size == 1


def test_same_signature_does_not_recompile_new_shapes_do():
    @xla_trace
    def f(x):
        return x + 1.0

    f(_t((2, 3)))
    f(_t((2, 3), seed=1))
    assert f.cache_size == 1
    f(_t((4, 3)))
    assert f.cache_size == 2
    f(_t((4, 3), dtype="float16"))
    assert f.cache_size == 3
    out = f(_t((4, 3), dtype="float16"))
    assert out.dtype == np.float16 and f.cache_size == 3


def test_static_python_values_are_part_of_the_key():
    @xla_trace
    def f(x, scale, mode="add"):
        return x + scale if mode == "add" else x * scale

    x = _t((3,))
    f(x, 2.0)
    np.testing.assert_allclose(f(x, 2.0).numpy(), x.numpy() + 2.0, rtol=1e-6)
    np.testing.assert_allclose(f(x, 3.0).numpy(), x.numpy() + 3.0, rtol=1e-6)
    f(x, 3.0, mode="mul")
    np.testing.assert_allclose(f(x, 3.0, mode="mul").numpy(), x.numpy() * 3.0, rtol=1e-6)
    assert f.cache_size == 3


def test_nested_arguments_and_outputs():
    @xla_trace
    def f(params, batch):
        h = batch["x"] @ params[0] + params[1]
        return {"h": h, "stats": (F.sum(h), F.max(h))}, None

    params = (_t((4, 5)), _t((5,), seed=1))
    batch = {"x": _t((2, 4), seed=2)}
    first, none = f(params, batch)
    second, _ = f(params, batch)
    assert none is None
    np.testing.assert_allclose(second["h"].numpy(), first["h"].numpy(), rtol=1e-5)
    np.testing.assert_allclose(second["stats"][0].numpy(), first["stats"][0].numpy(), rtol=1e-5)
    assert f.cache_size == 1


def test_same_tensor_twice_records_two_inputs():
    @xla_trace
    def f(a, b):
        return a - b

    x, y = _t((3,)), _t((3,), seed=1)
    f(x, x)
    np.testing.assert_allclose(f(x, y).numpy(), x.numpy() - y.numpy(), rtol=1e-6)


def test_numpy_arrays_are_accepted_as_arguments():
    @xla_trace
    def f(x):
        return x * 2

    a = np.arange(3, dtype=np.int32)
    f(a)
    np.testing.assert_array_equal(f(a).numpy(), a * 2)


def test_outputs_feed_the_next_call_without_host_copies():
    @xla_trace
    def step(x):
        return x * 0.5 + 1.0

    x = _t((8,))
    expected = x.numpy()
    for _ in range(4):
        x = step(x)
        expected = expected * 0.5 + 1.0
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6)


def test_closed_over_tensor_is_an_error_naming_where_it_was_created():
    weight = _t((3,))  # the error must point at this line

    @xla_trace
    def f(x):
        return x * weight

    with pytest.raises(TraceError) as info:
        f(_t((3,), seed=1))
    message = str(info.value)
    assert "test_jit.py" in message and "capture_as_const=True" in message
    assert "op multiply" in message and "shape (3,)" in message


def test_capture_as_const_bakes_the_value():
    weight = _t((3,))

    @xla_trace(capture_as_const=True)
    def f(x):
        return x * weight

    x = _t((3,), seed=1)
    f(x)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * weight.numpy(), rtol=1e-6)
    assert len(f.trace.constants) == 1


def test_tensor_created_inside_is_a_constant_not_a_capture():
    @xla_trace
    def f(x):
        return x + ht.tensor([1.0, 2.0, 3.0])

    x = _t((3,))
    f(x)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() + np.array([1.0, 2.0, 3.0]), rtol=1e-6)


def test_data_dependent_python_control_flow_is_refused():
    @xla_trace
    def f(x):
        if F.sum(x) > 0:
            return x
        return -x

    with pytest.raises(TraceError, match="bool"):
        f(_t((3,)))


def test_unhashable_static_argument_is_refused():
    @xla_trace
    def f(x, options):
        return x

    with pytest.raises(TraceError, match="hashable"):
        f(_t((3,)), {"a": bytearray(b"mutable")})


def test_inspection_before_any_call_says_so():
    @xla_trace
    def f(x):
        return x

    with pytest.raises(TraceError, match="not been called"):
        _ = f.stablehlo_text


def test_issue_example_softmax():
    @xla_trace
    def fused_softmax(inp):
        offset = inp.max(axis=-1, keepdims=True).detach()
        cached = F.exp(inp - offset)
        down = F.sum(cached, axis=-1, keepdims=True)
        return cached / down

    x = _t((4, 10, 100))
    fused_softmax(x)
    y = fused_softmax(x)
    assert y.shape == (4, 10, 100)
    np.testing.assert_allclose(y.numpy(), F.softmax(x, axis=-1).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.numpy().sum(-1), 1.0, rtol=1e-5)
    assert "stablehlo.reduce" in fused_softmax.stablehlo_text


def test_dump_to_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_DUMP_TO", str(tmp_path))

    @xla_trace
    def dumped(x):
        return F.tanh(x)

    dumped(_t((2,)))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "dumped.1.compiled.hlo.txt",
        "dumped.1.optimized.mlir",  # after the default pass pipeline
        "dumped.1.passes",  # the module after each pass
        "dumped.1.stablehlo.mlir",
        "dumped.1.trace.json",
    ]
    assert "stablehlo.tanh" in (tmp_path / "dumped.1.stablehlo.mlir").read_text()
    assert "stablehlo.tanh" in (tmp_path / "dumped.1.optimized.mlir").read_text()


def test_traced_function_called_while_recording_is_inlined():
    @xla_trace
    def inner(x):
        return F.tanh(x) * 2.0

    @xla_trace
    def outer(x):
        return inner(x) + 1.0

    x = _t((3,))
    inner(x)
    inner(x)  # inner now has a compiled entry; outer must still record inner's ops
    outer(x)
    np.testing.assert_allclose(outer(x).numpy(), np.tanh(x.numpy()) * 2.0 + 1.0, rtol=1e-6)
    assert [r.op for r in outer.trace.records] == ["tanh", "multiply", "add"]
