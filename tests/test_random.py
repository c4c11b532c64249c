"""Random ops with explicit Threefry keys: the generator, the distributions, dropout, and the
key threaded through compiled steps as device state (issue 7). The primitives' compiled vs
eager checks are generated (tests/test_op_properties.py); these are the rest."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager, grad
from hlotrace.errors import HlotraceError, OpError, TraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.ops import random as ops_random
from hlotrace.random import Generator
from hlotrace.runtime import jaxlib_compat

MILLION = 10**6


def _key(g=None):
    return (g or ht.random.default_generator).key.numpy().copy()


# -- the generator itself -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "counter", "expected"),
    [  # Random123's known-answer vectors for threefry2x32_20
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ],
)
def test_threefry_matches_the_known_answers(key, counter, expected):
    words = [np.array([c], np.uint32) for c in counter]
    with np.errstate(over="ignore"):
        out = ops_random.threefry2x32(np.array(key, np.uint32), *words)
    assert [int(w[0]) for w in out] == list(expected)


def test_seed_reproduces_the_sequence_and_draws_advance_the_key():
    ht.random.seed(123)
    first = [ht.random.uniform((4,)).numpy(), ht.random.randint(0, 100, (3,)).numpy()]
    ht.random.seed(123)
    again = [ht.random.uniform((4,)).numpy(), ht.random.randint(0, 100, (3,)).numpy()]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    before = _key()
    ht.random.uniform((2,))
    assert not np.array_equal(_key(), before)
    ht.random.seed(124)
    assert not np.array_equal(ht.random.uniform((4,)).numpy(), first[0])


def test_get_state_and_set_state_replay_and_generators_are_independent():
    g = Generator(7)
    state = g.get_state()
    a = ht.random.normal((5,), generator=g).numpy()
    default_before = _key()
    g.set_state(state)
    np.testing.assert_array_equal(ht.random.normal((5,), generator=g).numpy(), a)
    assert np.array_equal(_key(), default_before)  # drawing from g left the default alone
    np.testing.assert_array_equal(Generator(7).key.numpy(), state.numpy())
    ht.random.set_state(g.get_state())
    np.testing.assert_array_equal(_key(), g.key.numpy())
    with pytest.raises(OpError, match=r"int32\[2\]"):
        g.set_state(np.zeros(3, np.int32))
    with pytest.raises(OpError, match="seed must be an int"):
        Generator(1.5)


def test_seed_keys_are_the_high_and_low_words():
    assert Generator(0).key.numpy().view(np.uint32).tolist() == [0, 0]
    assert Generator(2**32 + 5).key.numpy().view(np.uint32).tolist() == [1, 5]
    assert Generator(-1).key.numpy().view(np.uint32).tolist() == [2**32 - 1, 2**32 - 1]


# -- distributions (eager; the compiled results equal them, see test_op_properties) -------


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_mean_variance_and_range(dtype):
    # Samples lie on the grid k / 2**p (p: the dtype's mantissa bits), whose mean and
    # variance are (1 - 2**-p) / 2 and (1 - 4**-p) / 12.
    p = ops_random.MANTISSA_BITS[np.dtype(dtype)]
    mean, var = (1 - 2.0**-p) / 2, (1 - 4.0**-p) / 12
    g = Generator(1)
    u = ht.random.uniform((MILLION,), dtype=dtype, generator=g).numpy().astype(np.float64)
    assert u.min() >= 0.0 and u.max() <= 1 - 2.0**-p
    if p <= 10:  # every grid point is drawn
        assert len(np.unique(u)) == 2**p
    assert abs(u.mean() - mean) < 2e-3 and abs(u.var() - var) < 1e-3
    v = ht.random.uniform((1000, 1000), low=-3.0, high=5.0, dtype=dtype, generator=g).numpy().astype(np.float64)
    assert v.shape == (1000, 1000) and v.min() >= -3.0 and v.max() < 5.0
    assert abs(v.mean() - (8 * mean - 3)) < 2e-2 and abs(v.var() - 64 * var) < 2e-2


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_normal_mean_and_variance(dtype):
    z = ht.random.normal((MILLION,), dtype=dtype, generator=Generator(2)).numpy().astype(np.float64)
    assert abs(z.mean()) < 5e-3 and abs(z.var() - 1.0) < 1e-2
    assert 0.68 < np.mean(np.abs(z) < 1) < 0.687  # 68.27% within one sigma
    w = ht.random.normal((MILLION,), mean=3.0, std=0.5, dtype=dtype, generator=Generator(3)).numpy()
    w = w.astype(np.float64)
    assert abs(w.mean() - 3.0) < 5e-3 and abs(w.std() - 0.5) < 5e-3


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_randint_range_and_rough_uniformity(dtype):
    g = Generator(4)
    r = ht.random.randint(-3, 7, (MILLION,), dtype=dtype, generator=g).numpy()
    assert r.dtype == dtype and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3, minlength=10)
    assert np.all(np.abs(counts / MILLION - 0.1) < 3e-3), counts
    info = np.iinfo(dtype)
    full = ht.random.randint(int(info.min), int(info.max) + 1, (MILLION,), dtype=dtype, generator=g).numpy()
    quarters = np.bincount(((full.astype(np.float64) - info.min) / (2.0 * (int(info.max) + 1)) * 4).astype(int))
    assert np.all(np.abs(quarters / MILLION - 0.25) < 3e-3), quarters


def test_permutation_is_a_permutation():
    g = Generator(5)
    for n in (0, 1, 2, 10, 1000):
        p = ht.random.permutation(n, generator=g).numpy()
        assert p.dtype == np.int32 and np.array_equal(np.sort(p), np.arange(n))
    assert ht.random.permutation(5, generator=g, dtype="int64").dtype == np.int64
    perms = {tuple(ht.random.permutation(4, generator=g).numpy()) for _ in range(200)}
    assert len(perms) == 24  # every ordering of 4 shows up


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keep_rate_and_scaling(p):
    x = ht.tensor(np.full((1000, 1000), 3.0, np.float32))
    y = F.dropout(x, p, generator=Generator(6)).numpy()
    kept = y != 0
    assert abs(kept.mean() - (1 - p)) < 1e-2
    np.testing.assert_array_equal(y[kept], np.float32(3.0) * np.float32(1 / (1 - p)))


def test_dropout_edge_cases_draw_nothing():
    x = ht.tensor(np.array([1.0, np.nan, -2.0], np.float32))
    before = _key()
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0.7, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros(3, np.float32))
    assert np.array_equal(_key(), before)
    h = ht.tensor(np.ones(8, np.float16))
    assert F.dropout(h, 0.5).dtype == np.float16


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ht.random.uniform((2,), dtype="int32"), "float dtype"),
        (lambda: ht.random.uniform((2,), low=2.0, high=1.0), "above high"),
        (lambda: ht.random.uniform((2,), low=-np.inf), "not finite"),
        (lambda: ht.random.uniform((2,), low=-3e38, high=3e38), "overflows"),
        (lambda: ht.random.uniform((2, -1)), "negative dimension"),
        (lambda: ht.random.uniform("abc"), "shape entries"),
        (lambda: ht.random.normal((2,), std=-1.0), "std must be >= 0"),
        (lambda: ht.random.normal((2,), dtype="bool"), "float dtype"),
        (lambda: ht.random.randint(5, 5, (2,)), "low < high"),
        (lambda: ht.random.randint(0, 2**31 + 1, (2,)), "out of range for int32"),
        (lambda: ht.random.randint(0, 1.5, (2,)), "must be an int"),
        (lambda: ht.random.randint(0, 3, (2,), dtype="float32"), "integer dtype"),
        (lambda: ht.random.permutation(-1), "n must be in"),
        (lambda: F.random_split(ht.tensor([1, 2, 3])), r"int32\[2\]"),
        (lambda: F.random_split(ht.tensor([1.0, 2.0])), r"int32\[2\]"),
        (lambda: F.dropout(ht.tensor([1.0]), 1.5), r"probability in \[0, 1\]"),
        (lambda: F.dropout(ht.tensor([1, 2]), 0.5), "float tensor"),
        (lambda: ht.random.uniform((2,), generator=3), "Generator or None"),
    ],
)
def test_bad_arguments_are_clear_errors_and_draw_nothing(call, message):
    before = _key()
    with pytest.raises(OpError, match=message):
        call()
    assert np.array_equal(_key(), before)


def test_errors_name_the_op_and_the_users_line():
    with pytest.raises(OpError, match=r"random_uniform: .*test_random.py:\d+"):
        ht.random.uniform((2,), dtype="int64")


# -- compiled steps -----------------------------------------------------------------------


def _random_step(x):
    return {
        "uniform": ht.random.uniform((3, 4), low=-1.0, high=2.0),
        "randint": ht.random.randint(-5, 50, (7,), dtype="int64"),
        "permutation": ht.random.permutation(9),
        "dropout": F.dropout(x, 0.3),
        "normal": ht.random.normal((6,), mean=1.0, std=2.0),
    }


def test_compiled_step_draws_the_eager_sequence_without_baking_in_the_key():
    x = ht.tensor(np.arange(1, 41, dtype=np.float32).reshape(5, 8))
    ht.random.seed(0)
    eager = [_random_step(x) for _ in range(3)]
    eager_key = _key()
    ht.random.seed(0)
    step = xla_trace(_random_step)
    compiled = [step(x) for _ in range(3)]  # records, then two compiled calls
    assert step.cache_size == 1
    for e, c in zip(eager, compiled, strict=True):
        for name in ("uniform", "randint", "permutation", "dropout"):
            np.testing.assert_array_equal(c[name].numpy(), e[name].numpy(), err_msg=name)
        np.testing.assert_allclose(c["normal"].numpy(), e["normal"].numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(_key(), eager_key)
    masks = [c["dropout"].numpy() != 0 for c in compiled]
    assert not np.array_equal(masks[1], masks[2])  # a new mask every compiled call
    # The key is an input (the last one) donated to an output, and no constant is a key.
    trace = step.trace
    assert trace.aval(trace.inputs[-1]) == ((2,), np.dtype(np.int32))
    assert all(v.shape != (2,) for v in trace.constants.values())
    assert "tf.aliasing_output" in step.stablehlo_text


def test_a_function_without_randomness_keeps_its_signature_and_hot_path():
    @xla_trace
    def f(x):
        return x * 2.0

    x = ht.tensor(np.ones(3, np.float32))
    f(x)
    f(x)
    assert len(f.trace.inputs) == 1 and len(f.trace.outputs) == 1
    assert f.entries()[0].io is None and f.entries()[0].late == ()


def test_the_key_buffer_is_donated_and_the_key_object_kept():
    ht.random.seed(3)
    key = ht.random.default_generator.key
    step = xla_trace(lambda x: x + ht.random.uniform(x.shape))
    x = ht.tensor(np.zeros(4, np.float32))
    step(x)
    step(x)
    old = key._device
    step(x)
    assert ht.random.default_generator.key is key and jaxlib_compat.buffer_is_deleted(old)


def test_seeding_between_compiled_calls_restarts_the_sequence():
    step = xla_trace(lambda x: F.dropout(x, 0.5))
    x = ht.tensor(np.ones(64, np.float32))
    ht.random.seed(9)
    step(x)
    first = step(x).numpy()
    ht.random.seed(9)
    step(x)
    np.testing.assert_array_equal(step(x).numpy(), first)


def test_an_explicit_generator_argument_is_state():
    def draw(x, gen):
        return x + ht.random.uniform(x.shape, generator=gen)

    x = ht.tensor(np.zeros(5, np.float32))
    eager_gen, compiled_gen = Generator(11), Generator(11)
    step = xla_trace(draw)
    default_before = _key()
    for _ in range(3):
        np.testing.assert_array_equal(step(x, compiled_gen).numpy(), draw(x, eager_gen).numpy())
    np.testing.assert_array_equal(compiled_gen.key.numpy(), eager_gen.key.numpy())
    assert np.array_equal(_key(), default_before) and step.cache_size == 1
    assert step.entries()[0].late == ()  # reached through the argument: not a late input


def test_a_generator_the_function_closes_over_is_threaded_too():
    closed = Generator(21)
    reference = Generator(21)
    step = xla_trace(lambda x: x * ht.random.normal(x.shape, generator=closed))
    x = ht.tensor(np.ones(4, np.float32))
    for _ in range(3):
        expected = ht.random.normal((4,), generator=reference).numpy()
        np.testing.assert_allclose(step(x).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_a_generator_created_inside_the_step_restarts_every_call():
    def step(x):
        return x + ht.random.uniform(x.shape, generator=Generator(5))

    x = ht.tensor(np.zeros(3, np.float32))
    traced = xla_trace(step)
    results = [traced(x).numpy() for _ in range(3)]
    for r in results:
        np.testing.assert_array_equal(r, step(x).numpy())


def test_capture_as_const_does_not_bake_in_the_key():
    step = xla_trace(lambda x: F.dropout(x, 0.5), capture_as_const=True)
    x = ht.tensor(np.ones(32, np.float32))
    step(x)
    assert not np.array_equal(step(x).numpy(), step(x).numpy())


def test_a_failed_recording_puts_the_key_back():
    ht.random.seed(4)
    before = _key()

    @xla_trace
    def failing(x):
        F.dropout(x, 0.5)
        raise RuntimeError("after drawing")

    with pytest.raises(RuntimeError, match="after drawing"):
        failing(ht.tensor(np.ones(3, np.float32)))
    np.testing.assert_array_equal(_key(), before)

    @xla_trace
    def bad_shapes(x):
        return ht.random.uniform((3,)) + x  # fails in the op after the key was read

    with pytest.raises(HlotraceError, match="add"):
        bad_shapes(ht.tensor(np.ones(4, np.float32)))
    np.testing.assert_array_equal(_key(), before)


def test_seeding_inside_a_step_reseeds_on_every_call():
    def step(x):
        ht.random.seed(17)
        return x + ht.random.uniform(x.shape)

    traced = xla_trace(step)
    x = ht.tensor(np.zeros(3, np.float32))
    results = [traced(x).numpy() for _ in range(3)]
    for r in results:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_array_equal(r, step(x).numpy())


# -- autodiff, modules, training steps ----------------------------------------------------


def test_dropout_gradient_is_the_scaled_mask():
    x = ht.tensor(np.linspace(-1, 1, 50, dtype=np.float32))
    ht.random.seed(2)
    y = F.dropout(x, 0.4)
    ht.random.seed(2)
    g = grad(lambda t: F.sum(F.dropout(t, 0.4)))(x)
    np.testing.assert_allclose(g.numpy(), np.where(y.numpy() != 0, 1 / 0.6, 0.0).astype(np.float32), rtol=1e-6)


def test_dropout_module_follows_training():
    drop = nn.Dropout(0.5)
    assert "p=0.5" in repr(drop)
    x = ht.tensor(np.ones((10, 10), np.float32))
    assert set(np.unique(drop(x).numpy())) <= {0.0, 2.0}
    assert drop.eval()(x) is x
    with pytest.raises(HlotraceError, match="probability"):
        nn.Dropout(-0.1)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.drop, self.fc2 = nn.Linear(6, 16), nn.Dropout(0.25), nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def _train_step(x, y, *, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(x), y)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def test_a_compiled_training_step_with_dropout_matches_eager():
    rng = np.random.default_rng(0)
    x = ht.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = ht.tensor(rng.integers(0, 3, 8).astype(np.int32))
    runs = []
    for compiled in (False, True):
        nn.init.seed(0)
        net = _Net()
        opt = optim.SGD(net.parameters(), lr=0.1)
        gm = GradManager().attach(net.parameters())
        step = xla_trace(_train_step) if compiled else _train_step
        ht.random.seed(1)
        losses = [float(step(x, y, net=net, opt=opt, gm=gm).numpy()) for _ in range(4)]
        runs.append((losses, [p.numpy().copy() for p in net.parameters()]))
    np.testing.assert_allclose(runs[1][0], runs[0][0], rtol=1e-5)
    for a, b in zip(runs[1][1], runs[0][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert len(set(runs[1][0])) == 4
    net.eval()
    step(x, y, net=net, opt=opt, gm=gm)  # eval mode: another program, without a draw
    assert step.cache_size == 2 and all(r.op != "random_uniform" for r in step.trace.records)


def test_partial_trace_refuses_draws_under_autodiff_but_threads_them_without():
    body = partial_trace(lambda x: F.dropout(x * 2.0, 0.5))
    x = ht.tensor(np.ones(8, np.float32))
    ht.random.seed(0)
    plain = [body(x).numpy() for _ in range(3)]  # no autodiff: an xla_trace
    ht.random.seed(0)
    np.testing.assert_array_equal(plain[2], [F.dropout(x * 2.0, 0.5) for _ in range(3)][2].numpy())
    with pytest.raises(TraceError, match="partial_trace function under autodiff"):
        grad(lambda t: F.sum(body(t)))(x)  # the compiled forward runs, its backward refuses
    fresh = partial_trace(lambda x: F.dropout(x * 2.0, 0.5))
    before = _key()
    with pytest.raises(TraceError, match="partial_trace function under autodiff"):
        grad(lambda t: F.sum(fresh(t)))(x)  # refused while recording the forward
    np.testing.assert_array_equal(_key(), before)
