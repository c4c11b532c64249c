"""Optimizers against PyTorch's update formulas written out independently in float64 NumPy.

Eager only: the compiled-step tests live with the jit.
"""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import nn, optim
from hlotrace.errors import HlotraceError
from hlotrace.serialization import load, save

RTOL, ATOL = 2e-5, 1e-6
STEPS = 6


# -- float64 references (PyTorch's documented algorithms, per parameter) ---------------------
class RefSGD:
    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        self.lr, self.mu, self.tau, self.wd, self.nesterov = lr, momentum, dampening, weight_decay, nesterov
        self.buf = {}

    def update(self, key, p, g):
        if self.wd != 0:
            g = g + self.wd * p
        if self.mu != 0:
            if key not in self.buf:
                self.buf[key] = g.copy()
            else:
                self.buf[key] = self.mu * self.buf[key] + (1 - self.tau) * g
            g = g + self.mu * self.buf[key] if self.nesterov else self.buf[key]
        return p - self.lr * g


class RefAdam:
    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False, amsgrad=False):
        self.lr, (self.b1, self.b2), self.eps, self.wd = lr, betas, eps, weight_decay
        self.decoupled, self.amsgrad = decoupled, amsgrad
        self.t, self.m, self.v, self.vmax = {}, {}, {}, {}

    def update(self, key, p, g):
        t = self.t[key] = self.t.get(key, 0) + 1
        if self.decoupled:
            p = p * (1 - self.lr * self.wd)
        elif self.wd != 0:
            g = g + self.wd * p
        m = self.m[key] = self.b1 * self.m.get(key, 0.0) + (1 - self.b1) * g
        v = self.v[key] = self.b2 * self.v.get(key, 0.0) + (1 - self.b2) * g * g
        if self.amsgrad:
            v = self.vmax[key] = np.maximum(self.vmax.get(key, 0.0), v)
        m_hat = m / (1 - self.b1**t)
        v_hat = v / (1 - self.b2**t)
        return p - self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


def _params(rng, shapes):
    return [ht.Parameter(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def _grads(rng, shapes, steps, none_at=()):
    """grads[step][i]; ``none_at`` lists (step, i) pairs whose gradient is None."""
    out = []
    for s in range(steps):
        out.append(
            [None if (s, i) in none_at else rng.standard_normal(sh).astype(np.float32) for i, sh in enumerate(shapes)]
        )
    return out


def _run(opt, ref_of, params, grads, lr_changes=None):
    """Step ``opt`` and the references side by side; ``ref_of[i]`` is param i's reference."""
    values = [p.numpy().astype(np.float64) for p in params]
    for s, step_grads in enumerate(grads):
        if lr_changes and s in lr_changes:
            for group_index, lr in lr_changes[s].items():
                opt.param_groups[group_index]["lr"] = lr
                ref_of_group = {id(r) for i, r in enumerate(ref_of) if _group_of(opt, params[i]) == group_index}
                for r in ref_of:
                    if id(r) in ref_of_group:
                        r.lr = lr
        for p, g in zip(params, step_grads, strict=True):
            p.grad = None if g is None else ht.tensor(g)
        assert opt.step() is opt
        for i, (p, g) in enumerate(zip(params, step_grads, strict=True)):
            if g is not None:
                values[i] = ref_of[i].update(i, values[i], g.astype(np.float64))
            np.testing.assert_allclose(p.numpy(), values[i], rtol=RTOL, atol=ATOL, err_msg=f"param {i}, step {s + 1}")
        opt.clear_grad()
    return values


def _group_of(opt, p):
    for gi, g in enumerate(opt.param_groups):
        if any(q is p for q in g["params"]):
            return gi
    raise AssertionError


SHAPES = [(3, 4), (4,), ()]

SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.1, weight_decay=0.05),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1),
]


@pytest.mark.parametrize("config", SGD_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_sgd_matches_formula(config):
    rng = np.random.default_rng(0)
    params = _params(rng, SHAPES)
    opt = optim.SGD(params, **config)
    ref = RefSGD(**config)
    _run(opt, [ref] * len(params), params, _grads(rng, SHAPES, STEPS))


ADAM_CONFIGS = [
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, weight_decay=0.05, amsgrad=True),
]


@pytest.mark.parametrize("config", ADAM_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_matches_formula(cls, config):
    rng = np.random.default_rng(1)
    params = _params(rng, SHAPES)
    opt = cls(params, **config)
    ref_config = dict(config)
    if cls is optim.AdamW:
        ref_config.setdefault("weight_decay", 1e-2)
    ref = RefAdam(decoupled=cls is optim.AdamW, **ref_config)
    _run(opt, [ref] * len(params), params, _grads(rng, SHAPES, STEPS))


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_amsgrad_uses_the_running_max_when_the_second_moment_shrinks(cls):
    rng = np.random.default_rng(11)
    params = _params(rng, SHAPES)
    opt = cls(params, lr=0.01, betas=(0.9, 0.6), amsgrad=True)
    ref = RefAdam(0.01, betas=(0.9, 0.6), amsgrad=True, decoupled=cls is optim.AdamW)
    if cls is optim.AdamW:
        ref.wd = 1e-2
    grads = [[g * 0.3**s for g in step] for s, step in enumerate(_grads(rng, SHAPES, STEPS))]  # shrinking
    _run(opt, [ref] * len(params), params, grads)
    p = params[0]
    assert (opt.state[p]["max_exp_avg_sq"].numpy() > opt.state[p]["exp_avg_sq"].numpy()).all()


def test_adamw_default_weight_decay_is_applied():
    p = ht.Parameter(np.ones(3, np.float32))
    opt = optim.AdamW([p], lr=0.1)
    assert opt.param_groups[0]["weight_decay"] == 1e-2
    p.grad = ht.tensor(np.zeros(3, np.float32))
    opt.step()  # zero gradient: m = v = 0, only the decay moves p
    np.testing.assert_allclose(p.numpy(), 1 - 0.1 * 1e-2, rtol=1e-6)


@pytest.mark.parametrize(
    "make, make_ref",
    [
        (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.2), lambda: RefSGD(0.1, 0.9, 0.2)),
        (lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.01), lambda: RefAdam(0.05, weight_decay=0.01)),
    ],
    ids=["sgd", "adam"],
)
def test_grad_none_is_skipped_and_its_first_update_is_a_first_step(make, make_ref):
    # Param 1 has no gradient in steps 1-3 (frozen, then unfrozen): it stays unchanged, and its
    # first real update gets the first-step treatment (momentum buffer = g, bias correction t=1),
    # as in PyTorch, whose step counts and buffers are per parameter.
    rng = np.random.default_rng(2)
    params = _params(rng, SHAPES)
    before = params[1].numpy().copy()
    opt = make(params)
    ref = make_ref()
    grads = _grads(rng, SHAPES, STEPS, none_at={(0, 1), (1, 1), (2, 1), (4, 2)})
    _run(opt, [ref] * 3, params, grads[:3])
    np.testing.assert_array_equal(params[1].numpy(), before)
    _run_continue(opt, ref, params, grads[3:])


def _run_continue(opt, ref, params, grads):
    values = [p.numpy().astype(np.float64) for p in params]
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = None if g is None else ht.tensor(g)
        opt.step().clear_grad()
        for i, g in enumerate(step_grads):
            if g is not None:
                values[i] = ref.update(i, values[i], g.astype(np.float64))
            np.testing.assert_allclose(params[i].numpy(), values[i], rtol=RTOL, atol=ATOL)


def test_param_groups_with_different_hyper_parameters_and_lr_changes():
    rng = np.random.default_rng(3)
    params = _params(rng, SHAPES)
    opt = optim.SGD(
        [{"params": params[:2]}, {"params": [params[2]], "lr": 0.5, "momentum": 0.0}], lr=0.01, momentum=0.9
    )
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.5]
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.0]
    ref_a, ref_b = RefSGD(0.01, 0.9), RefSGD(0.5)
    _run(opt, [ref_a, ref_a, ref_b], params, _grads(rng, SHAPES, STEPS), lr_changes={2: {0: 0.2}, 4: {1: 0.05}})


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_lr_and_betas_changes_take_effect(cls):
    rng = np.random.default_rng(4)
    params = _params(rng, SHAPES)
    opt = cls(params, lr=0.01, weight_decay=0.02)
    ref = RefAdam(0.01, weight_decay=0.02, decoupled=cls is optim.AdamW)
    grads = _grads(rng, SHAPES, STEPS)
    _run(opt, [ref] * 3, params, grads[:3], lr_changes={1: {0: 0.03}})
    opt.param_groups[0]["betas"] = (0.5, 0.9)
    opt.param_groups[0]["eps"] = 1e-3
    ref.b1, ref.b2, ref.eps = 0.5, 0.9, 1e-3
    _run_continue(opt, ref, params, grads[3:])


def test_state_and_hyper_tensors_exist_eagerly_and_keep_their_identity():
    rng = np.random.default_rng(5)
    params = _params(rng, SHAPES)
    opt = optim.Adam(params, lr=0.01)
    for p in params:  # created by the constructor, before any step
        assert set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"}
        assert opt.state[p]["step"].shape == () and opt.state[p]["step"].dtype == np.float32
        assert opt.state[p]["exp_avg"].shape == p.shape
    key, tensors = opt._trace_state()
    ids_before = [id(t) for t in tensors]
    hyper_lr = opt._hyper[0]["lr"]
    for p in params:
        p.grad = ht.tensor(np.ones(p.shape, np.float32))
    opt.step()
    opt.param_groups[0]["lr"] = 0.5
    key2, tensors2 = opt._trace_state()
    assert key2 == key
    assert [id(t) for t in tensors2] == ids_before  # same objects, updated in place
    assert opt._hyper[0]["lr"] is hyper_lr
    assert hyper_lr.numpy() == np.float32(0.5) and hyper_lr.dtype == np.float32 and hyper_lr.shape == ()
    assert all(opt.state[p]["step"].numpy() == 1 for p in params)


def test_trace_state_layout_and_static_key():
    rng = np.random.default_rng(6)
    a, b, c = _params(rng, SHAPES)
    opt = optim.SGD([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1)
    key, tensors = opt._trace_state()
    # no momentum: params, then no state, then 4 hyper tensors per group
    assert all(x is y for x, y in zip(tensors[:3], [a, b, c], strict=True))
    assert len(tensors) == 3 + 2 * 4
    hyper = opt._hyper
    expected_hyper = [hyper[g][n] for g in (0, 1) for n in optim.SGD._hyper_names]
    assert all(t is h for t, h in zip(tensors[3:], expected_hyper, strict=True))
    hash(key)
    # turning momentum on in group 0 changes the structure: new key, and state created before any recording
    opt.param_groups[0]["momentum"] = 0.9
    key2, tensors2 = opt._trace_state()
    assert key2 != key
    assert len(tensors2) == 3 + 2 * 2 + 2 * 4
    assert tensors2[3] is opt.state[a]["step"] and tensors2[4] is opt.state[a]["momentum_buffer"]
    assert tensors2[5] is opt.state[b]["step"] and tensors2[6] is opt.state[b]["momentum_buffer"]
    # nesterov and weight decay on/off are structural too; the lr value is not
    opt.param_groups[0]["lr"] = 0.3
    assert opt._trace_state()[0] == key2
    opt.param_groups[1]["weight_decay"] = 0.1
    assert opt._trace_state()[0] != key2


def test_momentum_switched_on_later_starts_from_the_gradient():
    # PyTorch: with momentum 0 no buffer exists; turning momentum on later starts it at g.
    rng = np.random.default_rng(7)
    params = _params(rng, SHAPES)
    opt = optim.SGD(params, lr=0.1, dampening=0.5)
    ref = RefSGD(0.1, dampening=0.5)
    grads = _grads(rng, SHAPES, STEPS)
    _run(opt, [ref] * 3, params, grads[:2])
    opt.param_groups[0]["momentum"] = 0.9
    ref.mu = 0.9
    _run_continue(opt, ref, params, grads[2:])


def test_clear_grad_and_zero_grad():
    p = ht.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ht.tensor(np.ones(2, np.float32))
    assert opt.step().clear_grad() is opt
    assert p.grad is None
    p.grad = ht.tensor(np.ones(2, np.float32))
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # nothing to do: every grad is None
    np.testing.assert_allclose(p.numpy(), 0.9)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        lambda ps: optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.02}], lr=0.01, amsgrad=True),
        lambda ps: optim.AdamW(ps, lr=0.01),
    ],
    ids=["sgd", "adam-groups", "adamw"],
)
def test_optimizer_state_dict_round_trip(tmp_path, make):
    rng = np.random.default_rng(8)
    params = _params(rng, SHAPES)
    opt = make(params)
    grads = _grads(rng, SHAPES, STEPS)
    for step_grads in grads[:3]:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = ht.tensor(g)
        opt.step().clear_grad()
    opt.param_groups[-1]["lr"] = 0.07
    save({"params": [p.numpy() for p in params], "optim": opt.state_dict()}, tmp_path / "ckpt.npz")

    loaded = load(tmp_path / "ckpt.npz")
    params2 = [ht.Parameter(a) for a in loaded["params"]]
    opt2 = make(params2)
    state_objects = {id(t) for st in opt2.state.values() for t in st.values()}
    opt2.load_state_dict(loaded["optim"])
    assert {id(t) for st in opt2.state.values() for t in st.values()} == state_objects  # loaded in place
    assert opt2.param_groups[-1]["lr"] == 0.07
    assert opt2.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    for step_grads in grads[3:]:
        for p, p2, g in zip(params, params2, step_grads, strict=True):
            p.grad, p2.grad = ht.tensor(g), ht.tensor(g)
        opt.step().clear_grad()
        opt2.step().clear_grad()
    for p, p2 in zip(params, params2, strict=True):
        np.testing.assert_array_equal(p.numpy(), p2.numpy())


def test_optimizer_load_state_dict_refuses_mismatches():
    rng = np.random.default_rng(9)
    params = _params(rng, SHAPES)
    opt = optim.Adam(params, lr=0.01)
    sd = opt.state_dict()
    other = optim.Adam(_params(rng, [(3, 4), (4,)]), lr=0.01)
    with pytest.raises(HlotraceError, match="2 in the optimizer"):
        other.load_state_dict(sd)
    bad = opt.state_dict()
    bad["state"][0]["exp_avg"] = np.zeros((4, 3), np.float32)
    bad["param_groups"][0]["lr"] = 0.5
    with pytest.raises(HlotraceError, match=r"exp_avg.*\(4, 3\).*\(3, 4\)"):
        opt.load_state_dict(bad)
    assert opt.param_groups[0]["lr"] == 0.01  # nothing changed
    with pytest.raises(HlotraceError, match="not an optimizer state dict"):
        opt.load_state_dict({"weights": 1})


def test_constructor_errors():
    p = ht.Parameter(np.ones(2, np.float32))
    with pytest.raises(HlotraceError, match="empty"):
        optim.SGD([], lr=0.1)
    with pytest.raises(HlotraceError, match="twice"):
        optim.SGD([p, p], lr=0.1)
    with pytest.raises(HlotraceError, match="twice"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(HlotraceError, match="nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(HlotraceError, match="lr"):
        optim.SGD([p], lr=-1.0)
    with pytest.raises(HlotraceError, match="betas"):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(HlotraceError, match="single Tensor"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(HlotraceError, match="cannot be optimized"):
        optim.SGD([ht.tensor(np.ones(2, np.int32))], lr=0.1)


def test_bad_hyper_parameter_set_later_is_refused_before_anything_changes():
    p = ht.Parameter(np.ones(2, np.float32))
    opt = optim.SGD([p], lr=0.1)
    opt.param_groups[0]["lr"] = -0.5
    p.grad = ht.tensor(np.ones(2, np.float32))
    with pytest.raises(HlotraceError, match="lr"):
        opt.step()
    np.testing.assert_array_equal(p.numpy(), 1.0)


def test_bfloat16_parameters_keep_their_dtype():
    p = ht.Parameter(np.ones(4, np.float32), dtype="bfloat16")
    opt = optim.Adam([p], lr=0.1)
    assert opt.state[p]["exp_avg"].dtype == p.dtype
    p.grad = ht.tensor(np.ones(4, np.float32), dtype="bfloat16")
    opt.step()
    assert p.dtype == ht.dtypes.bfloat16
    np.testing.assert_allclose(p.numpy().astype(np.float32), 0.9, rtol=1e-2)


# -- end to end with GradManager ----------------------------------------------------------------
_E2E_OPS = ("matmul", "add", "subtract", "multiply", "mean", "maximum")


def _missing_vjps(names):
    from hlotrace.ops import OPS

    return [n for n in names if n not in OPS or OPS[n].vjp is None]


@pytest.mark.parametrize(
    "make", [lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9), lambda ps: optim.Adam(ps, lr=0.02)], ids=["sgd", "adam"]
)
def test_eager_training_with_grad_manager_reduces_the_loss(make):
    missing = _missing_vjps(_E2E_OPS)
    if missing:
        pytest.skip(f"ops without a VJP yet: {missing}")
    from hlotrace.autodiff import GradManager

    nn.init.seed(0)
    rng = np.random.default_rng(10)
    xs = rng.standard_normal((32, 3))
    x = ht.tensor(xs.astype(np.float32))
    y = ht.tensor((xs @ np.array([[1.0], [-2.0], [0.5]]) + 0.5).astype(np.float32))
    net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 1))
    params = list(net.parameters())
    gm = GradManager().attach(params)
    opt = make(params)

    def loss_fn():
        d = net(x) - y
        return (d * d).mean()

    first = float(loss_fn())
    for _ in range(60):
        with gm:
            loss = loss_fn()
            gm.backward(loss)
        opt.step().clear_grad()
    assert all(a is b for a, b in zip(net.parameters(), params, strict=True))
    assert float(loss_fn()) < 0.05 * first
