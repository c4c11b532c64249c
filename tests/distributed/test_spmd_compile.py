"""xla_trace on a mesh: SPMD compiles through XLA's partitioner, state written back in place,
the per-device layout checked before every execution, and training steps equal to one device."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import TraceError
from hlotrace.jit import xla_trace
from hlotrace.metrics import metrics
from hlotrace.runtime import jaxlib_compat


def _mesh(devices, shape=(4,), names=("data",)):
    return dist.Mesh(shape, names, devices=devices[: int(np.prod(shape))])


def _x(shape=(8, 4), seed=0):
    return ht.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_a_sharded_input_compiles_spmd_with_shardy_annotations_and_results_carry_xla_shardings(devices):
    mesh = _mesh(devices, (4, 2), ("data", "model"))
    x = dist.shard(_x(), mesh, dist.P("data"))
    w = _x((4, 6), 1)  # unplaced: replicated

    @xla_trace(first_call="eager")
    def f(x, w):
        h = F.tanh(x @ w)
        return h.sum(axis=1), dist.constraint(h, dist.P("data", "model"))

    first = f(x, w)  # eager, on the global values
    assert first[0].sharding is None
    s, h = f(x, w)
    text = f.stablehlo_text
    assert 'sdy.mesh @mesh = <["data"=4, "model"=2]>' in text
    assert '#sdy.sharding<@mesh, [{"data"}, {}]>' in text and "#sdy.sharding<@mesh, [{}, {}]>" in text
    assert "sdy.sharding_constraint %" in text and '<@mesh, [{"data"}, {"model"}]>' in text
    assert h.sharding == dist.NamedSharding(mesh, dist.P("data", "model"))
    assert s.sharding is not None and s.sharding.mesh == mesh
    np.testing.assert_allclose(h.numpy(), first[1].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.numpy(), first[0].numpy(), rtol=1e-5, atol=1e-5)
    # A result on the mesh feeds the next call as it is (no re-placement).
    before = metrics().get("spmd_replacements", 0)
    f(dist.shard(_x(), mesh, dist.P("data")), w)
    g = xla_trace(lambda h: h * 2)
    g(h)
    np.testing.assert_array_equal(g(h).numpy(), h.numpy() * 2)
    assert metrics().get("spmd_replacements", 0) == before


def test_placements_are_part_of_the_cache_key(devices):
    mesh = _mesh(devices)
    f = xla_trace(lambda x: x + 1)
    value = _x()
    for spec in (dist.P("data"), dist.P(None, "data"), dist.P("data")):
        x = dist.shard(value, mesh, spec)
        f(x)
        out = f(x)
        np.testing.assert_array_equal(out.numpy(), value.numpy() + 1)
    f(value)
    np.testing.assert_array_equal(f(value).numpy(), value.numpy() + 1)  # one device again
    assert f(value).sharding is None
    assert f.cache_size == 3


def test_inputs_on_two_meshes_are_a_trace_error_naming_both(devices):
    a = dist.shard(_x(), _mesh(devices, (2,)), dist.P("data"))
    b = dist.shard(_x(), dist.Mesh((2,), ("data",), devices=devices[2:4]), dist.P("data"))
    f = xla_trace(lambda a, b: a + b)
    with pytest.raises(
        TraceError, match=r"input 0 \(float32\[8, 4\]\) is placed on Mesh.*input 1 \(float32\[8, 4\]\) on Mesh"
    ):
        f(a, b)


def test_the_layout_check_re_places_a_wrongly_laid_out_input_instead_of_crashing(devices):
    mesh = _mesh(devices)
    value = _x()
    x = dist.shard(value, mesh, dist.P("data"))
    f = xla_trace(lambda x: x * 3)
    f(x)
    f(x)
    exe = f.executable
    # A buffer split along the other dimension (per-device shape 8x1, not 2x4), handed to
    # the executable directly: PJRT would crash on it; the check re-places it.
    wrong = dist.shard(value, mesh, dist.P(None, "data"))._device
    single = jaxlib_compat.make_host_to_device((8, 4), np.float32, devices[0])(value.numpy())
    before = metrics().get("spmd_replacements", 0)
    for buffer in (wrong, single):
        (out,) = exe.run([buffer])
        np.testing.assert_array_equal(np.asarray(out), value.numpy() * 3)
    assert metrics()["spmd_replacements"] == before + 2
    # Through xla_trace: a tensor whose device array was swapped for another layout.
    x._device = wrong
    np.testing.assert_array_equal(f(x).numpy(), value.numpy() * 3)
    assert x.sharding.spec == dist.P("data")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _setup():
    nn.init.seed(0)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    return net, opt, gm


def _step(data, label, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(data), label)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _state(net, opt):
    return [t.numpy().copy() for t in opt._trace_state()[1]]


def _batches(n=3):
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 4, 32).astype(np.int32)) for _ in range(n)
    ]


def _train_alike(mesh, ref, par, state_every_step=False, platform=None):
    """Train ``ref`` on one device (of ``platform``) and ``par`` with its batches split over
    "data" on ``mesh`` (``_batches()``, both compiled): equal losses every step, equal
    optimizer state at the end (or after every step). Returns the two traced steps."""
    one, many = xla_trace(_step, platform=platform), xla_trace(_step)
    for x, y in _batches():
        expected = one(ht.tensor(x), ht.tensor(y), *ref)
        loss = many(
            dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data")), *par
        )
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
        if state_every_step:
            _assert_same_state(par, ref)
    if not state_every_step:
        _assert_same_state(par, ref)
    return one, many


def _assert_same_state(par, ref):
    for a, b in zip(_state(*par[:2]), _state(*ref[:2]), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("mode", ["data_parallel", "fsdp"])
def test_training_steps_on_a_mesh_equal_the_one_device_steps(devices, mode):
    mesh = _mesh(devices, (4,))
    ref, par = _setup(), _setup()
    if mode == "fsdp":  # parameters (and so the optimizer state) split over the data axis
        dist.shard_module(par[0], mesh, {"*": dist.P("data")})
    one, many = _train_alike(mesh, ref, par, state_every_step=True)
    assert many.cache_size == 1
    hlo = many.executable.hlo_text()
    assert "all-reduce" in hlo  # the gradient reduction XLA inserted
    state = par[1]._trace_state()[1]
    moments = [t for t in state if t.ndim > 0 and t not in set(par[0].parameters())]
    if mode == "fsdp":
        assert "all-gather" in hlo
        assert all(p.sharding.spec == dist.P("data") for p in par[0].parameters())
        assert moments and all(t.sharding.spec == dist.P("data") for t in moments)
        assert many.memory_stats()["argument"] < one.memory_stats()["argument"] / 2
    else:
        assert all(p.sharding.spec == dist.P() for p in par[0].parameters())


def test_optimizer_state_made_before_its_parameters_were_placed_takes_their_placement(devices):
    """Optimizer state inherits its parameter's placement when the holders' structure or any
    placement changed (compile.prepare no longer re-walks it every call): moments made by a
    step on one device are split with their parameters once the module is sharded, and the
    steps train like the one-device reference's."""
    mesh = _mesh(devices, (4,))
    ref, par = _setup(), _setup()
    one, many = xla_trace(_step), xla_trace(_step)
    (x0, y0), *rest = _batches(4)
    one(ht.tensor(x0), ht.tensor(y0), *ref)
    many(ht.tensor(x0), ht.tensor(y0), *par)  # one device: the moments exist, unplaced
    dist.shard_module(par[0], mesh, {"*": dist.P("data")})
    for x, y in rest:
        expected = one(ht.tensor(x), ht.tensor(y), *ref)
        loss = many(
            dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data")), *par
        )
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
    params = set(par[0].parameters())
    moments = [t for t in par[1]._trace_state()[1] if t.ndim > 0 and t not in params]
    assert moments and all(t.sharding is not None and t.sharding.spec == dist.P("data") for t in moments)
    assert many.cache_size == 2  # one device, then the mesh
    for a, b in zip(_state(*par[:2]), _state(*ref[:2]), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


def test_optimizer_state_follows_its_parameters_when_they_are_placed_again(devices):
    """Optimizer state that took its parameters' placement follows them onto another mesh:
    the moments (they kept the old placement), the step counts and hyper tensors (replicated
    on the old mesh, the next call was a TraceError naming two meshes)."""
    first, second = _mesh(devices[:4], (4,)), _mesh(devices[4:], (2, 2), ("data", "model"))
    ref, par = _setup(), _setup()
    one, many = xla_trace(_step), xla_trace(_step)
    dist.shard_module(par[0], first, {"*": dist.P("data")})
    batches = _batches(6)
    for index, (x, y) in enumerate(batches):
        if index == 3:
            dist.shard_module(par[0], second, {"*": dist.P("data")})
        mesh = first if index < 3 else second
        expected = one(ht.tensor(x), ht.tensor(y), *ref)
        loss = many(
            dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data")), *par
        )
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
    for param, moments in par[1].state.items():
        for name, t in moments.items():
            want = dist.P("data") if t.shape == param.shape else dist.P()
            assert t.sharding.mesh == second and t.sharding.spec == want, (name, t.sharding)
    assert all(t.sharding.mesh == second for hyper in par[1]._hyper for t in hyper.values())
    for a, b in zip(_state(*par[:2]), _state(*ref[:2]), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


def test_a_grad_left_set_that_the_step_clears_is_laid_out_as_the_call_began(devices):
    """The plan was made from the inputs after the eager first call, whose optimizer had
    cleared the .grad the step reads: a TypeError inside compile.plan (fault-path tests
    found it). It is made from the placements of when the call began."""
    mesh = _mesh(devices, (2,))
    ref, par = _setup(), _setup()
    dist.shard_module(par[0], mesh, {"*": dist.P("data")})
    for net in (ref[0], par[0]):  # a gradient left from an earlier backward
        net.fc2.bias.grad = ht.tensor(np.full(net.fc2.bias.shape, 0.5, np.float32))
    _train_alike(mesh, ref, par)


def test_state_is_written_back_in_place_and_its_old_buffers_donated_on_a_mesh(devices):
    mesh = _mesh(devices, (2,))
    net, opt, gm = _setup()
    dist.shard_module(net, mesh, {"*.weight": dist.P("data")})
    params = list(net.parameters())
    step = xla_trace(_step)
    (x, y), *_ = _batches(1)
    xs, ys = dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data"))
    step(xs, ys, net, opt, gm)
    step(xs, ys, net, opt, gm)
    old = [p._device for p in params]
    before = [p.numpy().copy() for p in params]
    step(xs, ys, net, opt, gm)
    assert list(net.parameters()) == params
    assert all(jaxlib_compat.buffer_is_deleted(b) for b in old), "updated parameters were not donated"
    assert all(not np.array_equal(p.numpy(), b) for p, b in zip(params, before, strict=True))
    assert net.fc1.weight.sharding.spec == dist.P("data") and net.fc1.bias.sharding.spec == dist.P()
    assert "tf.aliasing_output" in step.stablehlo_text


def _accumulate(data, label, net, gm):
    with gm:
        h = dist.constraint(F.relu(net.fc1(data)), dist.P("data"))  # batch-split activations
        loss = F.cross_entropy(net.fc2(h), label)
        gm.backward(loss)
    return loss


def test_gradients_of_placed_parameters_take_their_placement_and_accumulate_across_calls(devices):
    mesh = _mesh(devices, (2,))
    ref, par = _setup(), _setup()
    dist.shard_module(par[0], mesh, {"fc1.weight": dist.P("data")})
    one, many = xla_trace(_accumulate), xla_trace(_accumulate)
    for x, y in _batches():  # no clear_grad: from the second call on every .grad is an input too
        expected = one(ht.tensor(x), ht.tensor(y), ref[0], ref[2])
        loss = many(dist.shard(ht.tensor(x), mesh, dist.P("data")), ht.tensor(y), par[0], par[2])
        np.testing.assert_allclose(loss.numpy(), expected.numpy(), rtol=1e-6)
    for (name, p), q in zip(par[0].named_parameters(), ref[0].parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert p.grad.sharding == p.sharding, name
    assert par[0].fc1.weight.grad.sharding.spec == dist.P("data")
    assert "sdy.sharding_constraint" in many.stablehlo_text
    assert many.cache_size == 2  # the first call had no .grad inputs, the later ones do


def test_a_steady_call_reuses_the_last_layout_work_and_any_change_redoes_it(devices, monkeypatch):
    """distributed.compile.prepare: a call whose inputs are as its function's last call left
    them skips the per-input work; a swapped array, a new placement or an input on the host
    redoes it (and the step trains like one device throughout)."""
    from hlotrace.distributed import compile as spmd_compile
    from hlotrace.distributed.placement import runtime_sharding
    from hlotrace.runtime.spmd import put

    real, placed_work = spmd_compile._prepare, []

    def counted(inputs, holders):
        result = real(inputs, holders)
        if result is not None:  # the mesh step's (the one-device step's is None)
            placed_work.append(len(inputs))
        return result

    monkeypatch.setattr(spmd_compile, "_prepare", counted)
    mesh = _mesh(devices, (2,))
    ref, par = _setup(), _setup()
    dist.shard_module(par[0], mesh, {"*": dist.P("data")})
    one, many = xla_trace(_step), xla_trace(_step)
    x, y = _batches(1)[0]
    xs, ys = dist.shard(ht.tensor(x), mesh, dist.P("data")), dist.shard(ht.tensor(y), mesh, dist.P("data"))
    xr, yr = ht.tensor(x), ht.tensor(y)
    weight = par[0].fc1.weight
    other_layout = runtime_sharding(dist.NamedSharding(mesh, dist.P(None, "data")), 2)

    def both(x_input=xs, y_input=ys):
        expected = one(xr, yr, *ref)
        np.testing.assert_allclose(many(x_input, y_input, *par).numpy(), expected.numpy(), rtol=1e-6)

    def settle():
        """Calls until one does no work (arrays the executable left, laid out as the next call
        needs), then two more that must not either: how many did the work."""
        worked = 0
        for _ in range(5):
            before = len(placed_work)
            both()
            if len(placed_work) == before:
                break
            worked += 1
        before = len(placed_work)
        both()
        both()
        assert len(placed_work) == before
        return worked

    for _ in range(3):  # records, compiles, lays the state out as its executable left it
        both()
    assert settle() == 0  # steady: each call gets its last call's result
    # An array swapped for another layout behind its placement's back: seen and re-placed
    # (its value goes back to the host, so the next call sees a new array once more).
    weight._device = put(weight.numpy(), other_layout)  # (not a placement: no counter moves)
    assert 1 <= settle() <= 3 and weight.sharding.spec == dist.P("data")
    # A new placement (the counter moves): the work again.
    dist.shard(par[0].fc2.bias, mesh, dist.P())
    assert 1 <= settle() <= 3 and par[0].fc2.bias.sharding.spec == dist.P()
    # A label given as a host value each call: the work every call (nothing to compare).
    before = len(placed_work)
    for _ in range(2):
        both(y_input=ht.tensor(y))
    assert len(placed_work) == before + 2
    for a, b in zip(_state(*par[:2]), _state(*ref[:2]), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)
