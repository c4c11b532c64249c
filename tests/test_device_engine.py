"""The device eager engine (issue 35) as users call it: keys, state, autodiff, recording,
random draws, training, placement errors and its counters. Every op against its reference:
tests/test_engine_column.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager, grad
from hlotrace.engines import current_eager_engine, eager_engine, set_eager_engine
from hlotrace.engines.device import DeviceEngine
from hlotrace.errors import HlotraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.testing.tolerances import Tolerance, assert_close

STEPS = Tolerance(2e-5, 2e-6, "a few steps, NumPy vs XLA summation order")


def _both(fn):
    """``fn()`` under each engine: (numpy result, device result), as NumPy arrays."""
    results = []
    for name in ("numpy", "device"):
        with eager_engine(name):
            out = fn()
        results.append(out)
    return results


def test_results_are_device_tensors_and_the_engine_is_restored():
    x = ht.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with eager_engine("device"):
        assert current_eager_engine() == "device"
        y = (x * 2.0).sum(axis=1)
        assert y._device is not None and y._host is None  # on the device until asked
    assert current_eager_engine() == "numpy"
    np.testing.assert_array_equal(y.numpy(), [6.0, 24.0])


def test_attributes_and_avals_select_the_executable():
    x = ht.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with eager_engine("device"):
        np.testing.assert_array_equal(F.sum(x, axis=0).numpy(), [3.0, 5.0, 7.0])
        np.testing.assert_array_equal(F.sum(x, axis=1).numpy(), [3.0, 12.0])  # same avals, other attribute
        np.testing.assert_array_equal(F.sum(x.astype("int32"), axis=1).numpy(), [3, 12])  # other dtype
        np.testing.assert_array_equal((x + 1).numpy(), np.arange(6).reshape(2, 3) + 1.0)  # weak int scalar
        xi = x.astype("int32")
        np.testing.assert_array_equal((x + x).numpy(), 2.0 * np.arange(6).reshape(2, 3))
        doubled = xi + xi  # the same op and shapes, another dtype (no attributes)
        assert doubled.dtype == np.int32
        np.testing.assert_array_equal(doubled.numpy(), 2 * np.arange(6).reshape(2, 3))
        assert (x + 1).dtype == np.float32


def test_cache_hits_compiles_and_eviction_are_counted():
    engine = DeviceEngine(capacity=2)
    x = ht.tensor(np.ones(4, np.float32))
    before = ht.metrics()
    from hlotrace import dispatch

    previous, dispatch.ENGINE[0] = dispatch.ENGINE[0], engine
    try:
        for _ in range(3):
            x + 1.0
        F.exp(x)
        F.tanh(x)  # a third key: the least recently used (add) goes
    finally:
        dispatch.ENGINE[0] = previous
    after = ht.metrics()
    assert after["eager_executions"] - before["eager_executions"] == 5
    assert after["eager_cache_hits"] - before["eager_cache_hits"] == 2
    assert after["eager_evictions"] - before["eager_evictions"] == 1
    assert len(engine) == 2


def test_in_place_updates_rebind_the_tensor_only():
    x = ht.tensor(np.zeros(3, np.float32))
    alias = x.detach()
    with eager_engine("device"):
        kept = x * 1.0
        x += 2.0
        x[1] = 7.0
    np.testing.assert_array_equal(x.numpy(), [2.0, 7.0, 2.0])
    np.testing.assert_array_equal(kept.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(alias.numpy(), [0.0, 0.0, 0.0])


def test_gradients_first_and_second_order_agree_with_the_numpy_engine():
    x = ht.tensor(np.array([0.5, -1.0, 2.0], np.float32))

    def f(x):
        return F.sum(F.tanh(x) * x)

    first, first_device = _both(lambda: grad(f)(x).numpy())
    second, second_device = _both(lambda: grad(lambda x: F.sum(grad(f)(x)))(x).numpy())
    assert_close(first_device, first, STEPS, what="grad")
    assert_close(second_device, second, STEPS, what="grad of grad")


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        # No bias before batch norm: its gradient is 0 up to rounding, and Adam turns rounding
        # noise into full-size steps (both engines and XLA alike round differently there).
        self.fc1, self.bn = nn.Linear(5, 8, bias=False), nn.BatchNorm1d(8)
        self.drop, self.fc2 = nn.Dropout(0.25), nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


def _train(mode: str, engine: str):
    ht.random.seed(0)
    net = _Net()
    gm = GradManager().attach(net.parameters())
    opt = optim.AdamW(net.parameters(), lr=0.01)
    backbone = partial_trace(lambda fc1, x: fc1(x)) if mode == "partial" else None

    def step(x, y, net, gm, opt):
        with gm:
            h = backbone(net.fc1, x) if backbone is not None else net.fc1(x)
            loss = F.cross_entropy(net.fc2(net.drop(F.relu(net.bn(h)))), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    step = xla_trace(step) if mode == "xla" else step
    rng = np.random.default_rng(3)
    losses = []
    with eager_engine(engine):
        for _ in range(3):
            x = ht.tensor(rng.standard_normal((6, 5)).astype(np.float32))
            y = ht.tensor(rng.integers(0, 3, 6).astype(np.int32))
            losses.append(float(step(x, y, net, gm, opt).numpy()))
    state = {k: np.asarray(t) for k, t in net.state_dict().items()}
    return state, losses


@pytest.mark.parametrize("mode", ["eager", "xla", "partial"])
def test_a_training_step_trains_alike_under_both_engines(mode):
    reference, reference_losses = _train(mode, "numpy")
    state, losses = _train(mode, "device")
    assert state.keys() == reference.keys()
    for k in reference:
        assert_close(state[k], reference[k], STEPS, what=f"{mode}: {k}")
    np.testing.assert_allclose(losses, reference_losses, rtol=1e-5)


def test_a_first_call_records_the_same_program_under_both_engines():
    def f(x, w):
        return F.softmax(F.matmul(x, w), axis=-1)

    x, w = ht.tensor(np.ones((2, 3), np.float32)), ht.tensor(np.full((3, 4), 0.5, np.float32))
    texts = []
    for engine in ("numpy", "device"):
        traced = xla_trace(f)
        with eager_engine(engine):
            traced(x, w)
        texts.append(re.sub(r"#\d+", "#", traced.stablehlo_text))  # scope instance numbers count up
    assert texts[0] == texts[1]


def test_random_draws_follow_the_same_threefry_stream():
    draws = []
    for engine in ("numpy", "device"):
        ht.random.seed(11)
        with eager_engine(engine):
            draws.append((ht.random.uniform((5,)).numpy(), ht.random.normal((3,)).numpy()))
    np.testing.assert_array_equal(draws[1][0], draws[0][0])
    assert_close(draws[1][1], draws[0][1], Tolerance(1e-6, 1e-6, "Box-Muller in XLA vs NumPy"), what="normal")


def test_save_load_and_dlpack_of_device_tensors(tmp_path):
    with eager_engine("device"):
        t = ht.tensor(np.arange(4, dtype=np.float32)) * 3.0
    ht.save({"t": t}, tmp_path / "s.npz")
    np.testing.assert_array_equal(np.asarray(ht.load(tmp_path / "s.npz")["t"]), [0.0, 3.0, 6.0, 9.0])
    np.testing.assert_array_equal(np.from_dlpack(t), [0.0, 3.0, 6.0, 9.0])


def test_unknown_engine_is_one_clear_error():
    with pytest.raises(HlotraceError, match="unknown eager engine 'gpu': expected one of numpy, device"):
        set_eager_engine("gpu")


def _moved(fn):
    """``fn()``'s change of the transfer and compile counters."""
    before = ht.metrics()
    fn()
    after = ht.metrics()
    names = ("host_to_device_bytes", "device_to_host_bytes", "eager_compiles", "eager_executions")
    return {name: after[name] - before[name] for name in names}


def test_a_steady_partial_trace_step_moves_only_the_loss():
    """The issue's target: a partial_trace loop (compiled backbone; eager loss, backward,
    optimizer step) moves nothing but the loss scalar per steady step and compiles nothing."""
    ht.random.seed(0)
    net = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    gm = GradManager().attach(net.parameters())
    opt = optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    backbone = partial_trace(lambda net, x: net(x))
    rng = np.random.default_rng(3)
    losses = []

    def step():
        with gm:
            loss = F.cross_entropy(backbone(net, x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        losses.append(float(loss))

    with eager_engine("device"):
        x = ht.tensor(rng.standard_normal((6, 5)).astype(np.float32)) * 1.0  # on the device
        y = ht.tensor(rng.integers(0, 3, 6).astype(np.int32)) + 0
        for _ in range(3):
            step()
        moved = _moved(step)
    assert moved["host_to_device_bytes"] == 0, moved
    assert moved["device_to_host_bytes"] == 4, moved  # float(loss)
    assert moved["eager_compiles"] == 0, moved
    assert losses[-1] < losses[0]


def test_python_scalars_are_copied_once_per_dtype_and_value():
    x32 = ht.tensor(np.arange(4, dtype=np.float32)) * 1.0
    x16 = x32.astype("float16")
    xi = x32.astype("int32")
    with eager_engine("device"):
        x32 * 2.0
        moved = _moved(lambda: (x32 * 2.0, x32 * 2.0, x32 + 2.0))
        assert moved["host_to_device_bytes"] == 0, moved  # 2.0 as f32 is on the device already
        results = [x16 * 2.0, xi * 2, x32 * -0.0, x32 * 0.0, x32 + True, xi + True, xi * 0]
    np.testing.assert_array_equal(results[0].numpy(), np.arange(4, dtype=np.float16) * 2)
    assert results[0].dtype == np.float16
    np.testing.assert_array_equal(results[1].numpy(), np.arange(4) * 2)
    assert np.signbit(results[2].numpy()).all()  # x * -0.0 is -0.0 for x >= 0: not 0.0's buffer
    assert not np.signbit(results[3].numpy()).any()
    np.testing.assert_array_equal(results[4].numpy(), np.arange(4) + 1.0)
    np.testing.assert_array_equal(results[5].numpy(), np.arange(4) + 1)
    assert results[6].dtype == np.int32  # int32 0 after float32 0.0: the same bytes, another buffer
    np.testing.assert_array_equal(results[6].numpy(), [0, 0, 0, 0])


def test_slicing_is_compiled_once_per_index():
    x = ht.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    with eager_engine("device"):
        x[1:3, ::2]
        moved = _moved(lambda: (x[1:3, ::2], x[1:3, ::2]))
        other = x[0:3, ::2]  # another slice: another executable
    assert moved["eager_compiles"] == 0, moved
    np.testing.assert_array_equal(other.numpy(), np.arange(12).reshape(3, 4)[0:3, ::2])


def test_detach_and_fresh_gradients_copy_on_the_device():
    with eager_engine("device"):
        x = ht.tensor(np.arange(4, dtype=np.float32)) * 2.0
        moved = _moved(lambda: x.detach())
        y = x.detach()
        a = ht.tensor(np.ones(3, np.float32)) * 1.0
        b = ht.tensor(np.ones(3, np.float32)) * 1.0
        gm = GradManager().attach([a, b])
        with gm:
            gm.backward((a + b).sum())
    assert moved["device_to_host_bytes"] == 0, moved
    assert y._device is not None and y._device is not x._device
    x._device.delete()  # what a compiled step's donation does to x's buffer
    np.testing.assert_array_equal(y.numpy(), [0.0, 2.0, 4.0, 6.0])
    assert a.grad is not b.grad and a.grad._device is not b.grad._device
    a.grad._device.delete()
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("mask_shape", [(4,), (4, 3), (0,)])
def test_a_bool_mask_read_waits_once_for_a_count(mask_shape):
    """x[mask] has a value-dependent shape: with the mask on the device it costs one wait
    for a 4-byte count (``shape_syncs``), never a copy of the mask or of x."""
    rng = np.random.default_rng(len(mask_shape))
    x_np = rng.standard_normal((*mask_shape, 2)[: max(len(mask_shape), 1) + 1]).astype(np.float32)
    if mask_shape == (0,):
        x_np = np.zeros((0, 2), np.float32)
    mask_np = rng.random(mask_shape) < 0.5
    expected = x_np[mask_np]
    x0 = ht.tensor(x_np)
    gm = GradManager().attach([x0])
    with eager_engine("device"):
        mask = ht.tensor(mask_np) & True  # a device tensor
        with gm:
            x = x0 * 1.0
            y = x[mask]
            moved = _moved(lambda: x[mask])
            gm.backward((y * 2.0).sum())
    assert moved["device_to_host_bytes"] == 4, moved
    np.testing.assert_array_equal(y.numpy(), expected)
    expected_grad = np.zeros_like(x_np)
    expected_grad[mask_np] = 2.0
    np.testing.assert_array_equal(x0.grad.numpy(), expected_grad)


def test_a_hundred_thousand_eager_ops_hold_no_more_buffers_or_executables():
    """Issue 35's leak check: 100k eager ops (arithmetic, a unary op, an in-place item
    write) keep the device's live arrays flat; many keys keep the LRU at its capacity."""
    from hlotrace import dispatch, runtime

    def loop(n):
        nonlocal x
        for i in range(n):
            x = x * 0.999 + w
            if i % 3 == 0:
                x = F.tanh(x)
            x[3] = 1.0

    with eager_engine("device"):
        x = ht.tensor(np.ones(256, np.float32)) * 1.0
        w = ht.tensor(np.full(256, 0.5, np.float32)) * 1.0
        loop(1000)
        live = runtime.live_buffer_count()
        loop(25_000)  # 4 ops an iteration (setitem included)
        assert runtime.live_buffer_count() <= live
    engine = DeviceEngine(capacity=8)
    previous, dispatch.ENGINE[0] = dispatch.ENGINE[0], engine
    try:
        before = ht.metrics()["eager_evictions"]
        for n in range(1, 21):  # 20 shapes: 20 keys through 8 slots
            (ht.tensor(np.ones(n, np.float32)) + 1.0).numpy()
    finally:
        dispatch.ENGINE[0] = previous
    assert len(engine) == 8
    assert ht.metrics()["eager_evictions"] - before == 12


def test_selecting_the_device_engine_at_import_loads_nothing_until_the_first_op():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, hlotrace as ht\n"
        "assert ht.engines.current_eager_engine() == 'device'\n"
        "assert 'jaxlib' not in sys.modules, 'jaxlib loaded by import hlotrace'\n"
        "y = ht.tensor(np.ones(3, np.float32)) * 2.0\n"
        "assert y._device is not None and y.numpy().tolist() == [2.0, 2.0, 2.0]\n"
        "assert type(ht.dispatch.ENGINE[0]).__name__ == 'DeviceEngine'\n"
    )
    env = {**__import__("os").environ, "HLOTRACE_EAGER": "device"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
