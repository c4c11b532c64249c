"""The compiled training step: modules, optimizers and GradManagers passed to xla_trace,
state written back in place (identity kept, old buffers donated), hyper-parameters as
inputs, nothing lost on failure; partial_trace joined into eager autodiff."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError, TraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.runtime import jaxlib_compat


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _setup(opt_class=optim.AdamW, **opt_kwargs):
    nn.init.seed(0)
    net = MLP()
    opt = opt_class(net.parameters(), **({"lr": 1e-2} | opt_kwargs))
    gm = GradManager().attach(net.parameters())
    return net, opt, gm


def _step(data, label, *, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _batch(seed):
    rng = np.random.default_rng(seed)
    return ht.tensor(rng.standard_normal((32, 8)).astype(np.float32)), ht.tensor(
        rng.integers(0, 4, 32).astype(np.int32)
    )


def _state(net, opt):
    return [p.numpy().copy() for p in net.parameters()] + [t.numpy().copy() for t in opt._trace_state()[1]]


@pytest.mark.parametrize(
    ("opt_class", "kwargs"),
    [(optim.AdamW, {}), (optim.Adam, {"weight_decay": 1e-3}), (optim.SGD, {"momentum": 0.9, "nesterov": True})],
)
def test_compiled_step_matches_eager_step_for_step(opt_class, kwargs):
    eager = _setup(opt_class, **kwargs)
    compiled = _setup(opt_class, **kwargs)
    step = xla_trace(_step)
    for i in range(5):
        x, y = _batch(i)
        le = _step(x, y, net=eager[0], opt=eager[1], gm=eager[2])
        lc = step(x, y, net=compiled[0], opt=compiled[1], gm=compiled[2])
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
        for a, b in zip(_state(*compiled[:2]), _state(*eager[:2]), strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    assert step.cache_size == 1


def test_state_is_written_back_into_the_same_objects_and_old_buffers_are_donated():
    net, opt, gm = _setup()
    params = list(net.parameters())
    ids = [id(t) for t in opt._trace_state()[1]]
    step = xla_trace(_step)
    x, y = _batch(0)
    step(x, y, net=net, opt=opt, gm=gm)
    step(x, y, net=net, opt=opt, gm=gm)  # compiled; state now lives on the device
    old = [p._device for p in params]
    before = [p.numpy().copy() for p in params]
    step(x, y, net=net, opt=opt, gm=gm)
    assert list(net.parameters()) == params and [id(t) for t in opt._trace_state()[1]] == ids
    assert all(jaxlib_compat.buffer_is_deleted(b) for b in old), "updated parameters were not donated"
    assert all(not np.array_equal(p.numpy(), b) for p, b in zip(params, before, strict=True))
    assert all(p.grad is None for p in params)
    assert "tf.aliasing_output" in step.stablehlo_text


def test_outputs_reuse_the_donated_buffers_as_jax_jit_pairs_them():
    """Each output, in order, reuses the first unused donated buffer of its shape and dtype
    (jax.jit's pairing; with every state tensor aliased to its own new value XLA:CPU ran
    bench_train's step 1.2x slower): the scalar loss takes the first step count's buffer, and
    every updated state tensor's old buffer is still consumed (the hyper-parameters, read
    only, keep theirs)."""
    from hlotrace.compiled import donation

    net, opt, gm = _setup()
    step = xla_trace(_step)
    x, y = _batch(0)
    step(x, y, net=net, opt=opt, gm=gm)
    step(x, y, net=net, opt=opt, gm=gm)
    state = list(net.parameters()) + list(opt._trace_state()[1])
    old = [t._device for t in state]
    loss = step(x, y, net=net, opt=opt, gm=gm)
    written = [t._device is not b for t, b in zip(state, old, strict=True)]
    assert sum(written) == 8 + 4 * 3, "parameters (listed twice), and each one's step count, m and v"
    assert [jaxlib_compat.buffer_is_deleted(b) for b in old] == written, "an updated tensor's old buffer was kept"
    assert np.isfinite(loss.numpy())
    entry = step._latest()
    trace, io = entry.trace, entry.io
    num_inputs = len(trace.inputs) - len(io.grad_inputs) - len(entry.late)
    own = donation(trace, num_inputs, io, pair_by_aval=False)
    paired = donation(trace, num_inputs, io)
    assert own == {i: o for i, o in io.writes if i in own}
    assert sorted(paired) == sorted(own), "the same inputs are donated"
    assert sorted(paired.values()) != sorted(own.values()) and 0 in paired.values()
    for i, o in paired.items():
        assert trace.aval(trace.inputs[i]) == trace.aval(trace.outputs[o])
    first_scalar = min(i for i in own if trace.aval(trace.inputs[i]).shape == ())
    assert paired[first_scalar] == 0, "the loss reuses the first scalar state buffer"
    assert f"%arg{first_scalar}: tensor<f32> {{tf.aliasing_output = 0 : i32}}" in step.stablehlo_text


def test_a_detached_copy_of_a_parameter_survives_the_donation_of_its_buffer():
    net, opt, gm = _setup()
    step = xla_trace(_step)
    x, y = _batch(5)
    step(x, y, net=net, opt=opt, gm=gm)
    step(x, y, net=net, opt=opt, gm=gm)  # parameters now live in device buffers
    weight = net.fc1.weight
    snapshot = weight.detach()
    expected = weight.numpy().copy()
    step(x, y, net=net, opt=opt, gm=gm)  # donates the old buffer
    np.testing.assert_array_equal(snapshot.numpy(), expected)
    assert not np.array_equal(weight.numpy(), expected)


def test_changing_the_learning_rate_does_not_recompile_and_takes_effect():
    compiled, eager = _setup(optim.SGD, lr=0.1), _setup(optim.SGD, lr=0.1)
    step = xla_trace(_step)
    x, y = _batch(1)
    for lr in (0.1, 0.5, 0.0, 0.05):
        for _, opt, _ in (compiled, eager):
            opt.param_groups[0]["lr"] = lr
        step(x, y, net=compiled[0], opt=compiled[1], gm=compiled[2])
        _step(x, y, net=eager[0], opt=eager[1], gm=eager[2])
        for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert step.cache_size == 1


def test_a_failed_call_leaves_parameters_and_optimizer_state_as_they_were():
    net, opt, gm = _setup()
    step = xla_trace(_step)
    x, y = _batch(2)
    step(x, y, net=net, opt=opt, gm=gm)
    step(x, y, net=net, opt=opt, gm=gm)
    saved = _state(net, opt)
    with pytest.raises(HlotraceError, match="matmul"):
        step(ht.tensor(np.zeros((32, 7), np.float32)), y, net=net, opt=opt, gm=gm)  # re-records, fails

    calls = []

    def failing_step(data, label, *, net, opt, gm):
        _step(data, label, net=net, opt=opt, gm=gm)  # updates state, then fails
        calls.append(1)
        raise RuntimeError("user code failed after the update")

    with pytest.raises(RuntimeError, match="after the update"):
        xla_trace(failing_step)(x, y, net=net, opt=opt, gm=gm)
    assert calls == [1]
    for a, b in zip(_state(net, opt), saved, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(p.grad is None for p in net.parameters())
    step(x, y, net=net, opt=opt, gm=gm)  # still usable


def test_gradients_left_in_grad_are_written_back_and_accumulate():
    compiled, eager = _setup(), _setup()

    def backward_only(data, label, *, net, gm):
        with gm:
            loss = F.cross_entropy(net(data), label)
            gm.backward(loss)
        return loss

    step = xla_trace(backward_only)
    x, y = _batch(3)
    for _ in range(3):
        step(x, y, net=compiled[0], gm=compiled[2])
        backward_only(x, y, net=eager[0], gm=eager[2])
        for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert step.cache_size == 2  # no grads yet, then grads present: two signatures


def test_an_argument_updated_in_place_is_written_back():
    @xla_trace
    def bump(counter, x):
        counter += 1.0
        return x * counter

    counter, x = ht.tensor(np.float32(0.0)), ht.tensor(np.ones(3, np.float32))
    for expected in (1.0, 2.0, 3.0):
        out = bump(counter, x)
        assert float(counter) == expected
        np.testing.assert_array_equal(out.numpy(), np.full(3, expected, np.float32))


def test_updating_a_captured_constant_in_place_is_an_error_naming_the_line():
    w = ht.tensor(np.ones(2, np.float32))

    @xla_trace(capture_as_const=True)
    def update(x):
        w.__isub__(x)  # the offending line
        return w

    with pytest.raises(TraceError, match=r"test_train_step.py:\d+.*captured as a constant"):
        update(ht.tensor(np.ones(2, np.float32)))
    np.testing.assert_array_equal(w.numpy(), [1.0, 1.0])


def test_partial_trace_gradients_equal_eager_ones():
    nn.init.seed(1)
    backbone, head = MLP(), nn.Linear(4, 3)
    traced_backbone = partial_trace(lambda model, x: model(x))
    x, _ = _batch(4)
    y = ht.tensor(np.arange(32, dtype=np.int32) % 3)
    grads = []
    for body in (lambda model, x: model(x), traced_backbone, traced_backbone):
        params = [*backbone.parameters(), *head.parameters()]
        for p in params:
            p.grad = None
        gm = GradManager().attach(params)
        with gm:
            loss = F.cross_entropy(head(body(backbone, x)), y)
            gm.backward(loss)
        grads.append([p.grad.numpy() for p in params])
    for g in grads[1:]:
        for a, b in zip(g, grads[0], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert traced_backbone.cache_size == 1 and traced_backbone.backward.cache_size == 1


def test_grad_manager_callbacks_run_inside_the_compiled_step():
    def scaled_and_clipped(param, grad):
        return F.clip(grad * 10.0, -0.05, 0.05)

    runs = []
    for compiled in (False, True):
        nn.init.seed(0)
        net = MLP()
        opt = optim.SGD(net.parameters(), lr=0.1)
        gm = GradManager().attach(net.parameters(), callbacks=[scaled_and_clipped])
        step = xla_trace(_step) if compiled else _step
        for i in range(3):
            x, y = _batch(10 + i)
            step(x, y, net=net, opt=opt, gm=gm)
        runs.append([p.numpy().copy() for p in net.parameters()])
    for a, b in zip(*runs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert sum(r.op == "clip" for r in step.trace.records) == len(runs[0])  # one recorded clip per parameter
