"""optim.lr_scheduler against closed-form references, clip_grad_norm_/clip_grad_value_
against NumPy, RMSprop/Adagrad/Lion/maximize against NumPy updates, and a compiled training
step (ModuleList + loss module + scheduler + clip_grad_norm_) equal to its eager run that
never recompiles when the scheduler moves the learning rate."""

import math

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace
from hlotrace.optim import lr_scheduler as sched


def _opt(lr=0.1, groups=1, cls=optim.SGD, **kwargs):
    params = [ht.Parameter(np.zeros(2, np.float32)) for _ in range(groups)]
    if groups == 1:
        return cls(params, lr=lr, **kwargs)
    return cls([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(params)], lr=lr, **kwargs)


def _run(scheduler, steps):
    """The lr of group 0 at construction and after each of ``steps`` steps."""
    seen = [scheduler.optimizer.param_groups[0]["lr"]]
    for _ in range(steps):
        scheduler.step()
        seen.append(scheduler.optimizer.param_groups[0]["lr"])
    assert scheduler.get_last_lr()[0] == seen[-1]
    return seen


# -- schedules ----------------------------------------------------------------------------------------
def test_step_multistep_exponential_constant_and_lambda():
    np.testing.assert_allclose(
        _run(sched.StepLR(_opt(), step_size=3, gamma=0.5), 7), [0.1] * 3 + [0.05] * 3 + [0.025] * 2
    )
    got = _run(sched.MultiStepLR(_opt(), milestones=[4, 2], gamma=0.1), 5)
    np.testing.assert_allclose(got, [0.1, 0.1, 0.01, 0.01, 0.001, 0.001])
    np.testing.assert_allclose(_run(sched.ExponentialLR(_opt(), gamma=0.9), 3), [0.1 * 0.9**k for k in range(4)])
    np.testing.assert_allclose(_run(sched.ConstantLR(_opt(), factor=0.5, total_iters=2), 3), [0.05, 0.05, 0.1, 0.1])
    got = _run(sched.LambdaLR(_opt(), lambda e: 1.0 / (e + 1)), 3)
    np.testing.assert_allclose(got, [0.1, 0.05, 0.1 / 3, 0.025])


def test_per_group_lambdas_and_base_lrs():
    opt = _opt(lr=0.1, groups=2)
    s = sched.LambdaLR(opt, [lambda e: 1.0, lambda e: 0.5**e])
    s.step()
    s.step()
    assert s.base_lrs == [0.1, 0.2] and s.get_last_lr() == [0.1, 0.05]
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.2]
    with pytest.raises(HlotraceError, match="1 lr_lambdas for 2 parameter groups"):
        sched.LambdaLR(_opt(groups=2), [lambda e: 1.0])


def test_linear_warmup_and_cosine_annealing():
    got = _run(sched.LinearLR(_opt(lr=1.0), start_factor=0.25, total_iters=3), 5)
    np.testing.assert_allclose(got, [0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    got = _run(sched.CosineAnnealingLR(_opt(lr=1.0), T_max=4, eta_min=0.2), 8)
    expected = [0.2 + 0.8 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(9)]
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert got[4] == pytest.approx(0.2) and got[8] == pytest.approx(1.0)  # no restart: the cosine goes on


def test_sequential_warmup_then_cosine():
    opt = _opt(lr=1.0)
    warmup = sched.LinearLR(opt, start_factor=0.5, total_iters=2)
    cosine = sched.CosineAnnealingLR(opt, T_max=4)
    s = sched.SequentialLR(opt, [warmup, cosine], milestones=[2])
    got = _run(s, 6)
    np.testing.assert_allclose(got, [0.5, 0.75] + [(1 + math.cos(math.pi * e / 4)) / 2 for e in range(5)], atol=1e-12)
    with pytest.raises(HlotraceError, match="2 schedulers need 1 milestones"):
        sched.SequentialLR(opt, [warmup, cosine], milestones=[])


def _one_cycle_reference(step, total, max_lr, pct=0.3, div=25.0, final_div=1e4, three_phase=False, cos=True):
    initial, low = max_lr / div, max_lr / div / final_div
    if three_phase:
        phases = [(pct * total - 1, initial, max_lr), (2 * pct * total - 2, max_lr, initial), (total - 1, initial, low)]
    else:
        phases = [(pct * total - 1, initial, max_lr), (total - 1, max_lr, low)]
    start = 0.0
    for i, (end, a, b) in enumerate(phases):
        if step <= end or i == len(phases) - 1:
            frac = (step - start) / (end - start)
            return b + (a - b) / 2 * (math.cos(math.pi * frac) + 1) if cos else a + (b - a) * frac
        start = end
    raise AssertionError


@pytest.mark.parametrize(("three_phase", "strategy"), [(False, "cos"), (True, "linear")])
def test_one_cycle_lr_and_momentum(three_phase, strategy):
    opt = _opt(lr=0.1, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=20, three_phase=three_phase, anneal_strategy=strategy)
    got = _run(s, 19)
    expected = [_one_cycle_reference(k, 20, 1.0, three_phase=three_phase, cos=strategy == "cos") for k in range(20)]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[0] == pytest.approx(1.0 / 25) and max(got) == pytest.approx(1.0)
    assert got[-1] == pytest.approx(1.0 / 25 / 1e4)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)  # back at max_momentum
    with pytest.raises(HlotraceError, match="past total_steps=20"):
        s.step()
        s.step()


def test_one_cycle_cycles_adams_beta1_and_needs_some_momentum():
    opt = _opt(cls=optim.Adam, lr=1e-3)
    s = sched.OneCycleLR(opt, max_lr=1e-2, epochs=2, steps_per_epoch=5)
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    s.step()
    s.step()
    assert opt.param_groups[0]["betas"][0] == pytest.approx(0.85) and opt.param_groups[0]["lr"] == pytest.approx(1e-2)
    with pytest.raises(HlotraceError, match="give total_steps"):
        sched.OneCycleLR(_opt(), max_lr=1.0)
    with pytest.raises(HlotraceError, match="cycle_momentum needs an optimizer with momentum or betas"):
        sched.OneCycleLR(_opt(cls=optim.Adagrad), max_lr=1.0, total_steps=3)


def test_state_dict_round_trip_resumes_the_schedule():
    opt = _opt(lr=1.0)
    s = sched.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        s.step()
    saved = s.state_dict()
    assert saved["last_epoch"] == 3 and "optimizer" not in saved
    fresh_opt = _opt(lr=1.0)
    fresh_opt.param_groups[0]["initial_lr"] = 1.0
    fresh = sched.StepLR(fresh_opt, step_size=2, gamma=0.5, last_epoch=0)
    fresh.load_state_dict(saved)
    fresh.step()
    s.step()
    assert fresh.get_last_lr() == s.get_last_lr() == [0.25]
    with pytest.raises(HlotraceError, match="needs 'initial_lr'"):
        sched.StepLR(_opt(), step_size=1, last_epoch=4)


# -- gradient clipping --------------------------------------------------------------------------------
def _with_grads(*grads):
    params = []
    for g in grads:
        p = ht.Parameter(np.zeros(np.shape(g), np.float32))
        p.grad = ht.tensor(np.asarray(g, np.float32))
        params.append(p)
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_numpy(norm_type):
    g1, g2 = np.array([3.0, -4.0], np.float32), np.array([[1.0, 2.0], [-2.0, 0.5]], np.float32)
    params = _with_grads(g1, g2)
    params.append(ht.Parameter(np.zeros(3, np.float32)))  # no grad: skipped
    flat = np.concatenate([g1.ravel(), g2.ravel()]).astype(np.float64)
    expected = np.abs(flat).max() if math.isinf(norm_type) else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = nn.utils.clip_grad_norm_(params, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(total.numpy(), expected, rtol=1e-6)
    scale = min(1.0, 1.5 / (expected + 1e-6))
    np.testing.assert_allclose(params[0].grad.numpy(), g1 * scale, rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.numpy(), g2 * scale, rtol=1e-6)
    assert params[2].grad is None
    # Below the threshold nothing changes.
    small = _with_grads(np.array([0.1, 0.1], np.float32))
    nn.utils.clip_grad_norm_(small, max_norm=10.0, norm_type=norm_type)
    np.testing.assert_array_equal(small[0].grad.numpy(), np.array([0.1, 0.1], np.float32))


def test_clip_grad_norm_edge_cases_and_clip_grad_value():
    assert nn.utils.clip_grad_norm_([ht.Parameter(np.zeros(2, np.float32))], 1.0).item() == 0.0
    bad = _with_grads(np.array([np.inf, 1.0], np.float32))
    with pytest.raises(HlotraceError, match="non-finite"):
        nn.utils.clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)
    with pytest.raises(HlotraceError, match="norm_type must be > 0"):
        nn.utils.clip_grad_norm_(bad, 1.0, norm_type=0.0)
    params = _with_grads(np.array([-3.0, 0.2, np.nan, 7.0], np.float32))
    nn.utils.clip_grad_value_(params, 1.0)
    np.testing.assert_array_equal(params[0].grad.numpy(), np.array([-1.0, 0.2, np.nan, 1.0], np.float32))


# -- optimizers ------------------------------------------------------------------------------------------
def _optimize(opt_class, kwargs, grads):
    p = ht.Parameter(np.array([1.0, -2.0, 0.5], np.float32))
    opt = opt_class([p], **kwargs)
    for g in grads:
        p.grad = ht.tensor(g)
        opt.step()
    return p.numpy()


_GRADS = [np.array(v, np.float32) for v in ([0.5, -1.0, 2.0], [0.1, 0.3, -0.2], [-0.4, 0.0, 1.0])]


def _reference(kind, kwargs):
    p = np.array([1.0, -2.0, 0.5], np.float64)
    state = {
        "v": np.zeros(3),
        "b": np.zeros(3),
        "ga": np.zeros(3),
        "s": np.full(3, kwargs.get("initial_accumulator_value", 0.0)),
        "m": np.zeros(3),
    }
    lr, wd = kwargs["lr"], kwargs.get("weight_decay", 0.0)
    for t, g in enumerate(_GRADS, start=1):
        g = g.astype(np.float64) * (-1 if kwargs.get("maximize") else 1)
        if kind == "lion":
            update = np.sign(0.9 * state["m"] + 0.1 * g)
            p = p * (1 - lr * wd) - lr * update
            state["m"] = 0.99 * state["m"] + 0.01 * g
            continue
        g = g + wd * p
        if kind == "rmsprop":
            alpha, mu = kwargs.get("alpha", 0.99), kwargs.get("momentum", 0.0)
            state["v"] = alpha * state["v"] + (1 - alpha) * g * g
            if kwargs.get("centered"):
                state["ga"] = alpha * state["ga"] + (1 - alpha) * g
                denom = np.sqrt(state["v"] - state["ga"] ** 2) + 1e-8
            else:
                denom = np.sqrt(state["v"]) + 1e-8
            if mu:
                state["b"] = mu * state["b"] + g / denom
                p = p - lr * state["b"]
            else:
                p = p - lr * g / denom
        elif kind == "adagrad":
            state["s"] = state["s"] + g * g
            p = p - lr / (1 + (t - 1) * kwargs.get("lr_decay", 0.0)) * g / (np.sqrt(state["s"]) + 1e-10)
        elif kind == "adadelta":
            rho = kwargs.get("rho", 0.9)
            state["v"] = rho * state["v"] + (1 - rho) * g * g
            delta = np.sqrt(state["b"] + 1e-6) / np.sqrt(state["v"] + 1e-6) * g
            state["b"] = rho * state["b"] + (1 - rho) * delta * delta
            p = p - lr * delta
        elif kind == "sgd":
            p = p - lr * g
    return p


@pytest.mark.parametrize(
    ("kind", "opt_class", "kwargs"),
    [
        ("rmsprop", optim.RMSprop, {"lr": 0.01}),
        ("rmsprop", optim.RMSprop, {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1}),
        ("rmsprop", optim.RMSprop, {"lr": 0.01, "alpha": 0.5, "maximize": True}),
        ("adagrad", optim.Adagrad, {"lr": 0.1}),
        (
            "adagrad",
            optim.Adagrad,
            {"lr": 0.1, "lr_decay": 0.5, "initial_accumulator_value": 0.3, "weight_decay": 0.01},
        ),
        ("adadelta", optim.Adadelta, {"lr": 1.0}),
        ("adadelta", optim.Adadelta, {"lr": 0.5, "rho": 0.5, "weight_decay": 0.1, "maximize": True}),
        ("lion", optim.Lion, {"lr": 0.01, "weight_decay": 0.5}),
        ("lion", optim.Lion, {"lr": 0.01, "maximize": True}),
        ("sgd", optim.SGD, {"lr": 0.1, "maximize": True}),
    ],
)
def test_optimizers_match_numpy_updates(kind, opt_class, kwargs):
    np.testing.assert_allclose(_optimize(opt_class, kwargs, _GRADS), _reference(kind, kwargs), rtol=1e-5, atol=1e-7)


def test_adam_maximize_is_adam_on_the_negated_gradient():
    up = _optimize(optim.Adam, {"lr": 0.1, "maximize": True}, _GRADS)
    down = _optimize(optim.Adam, {"lr": 0.1}, [-g for g in _GRADS])
    np.testing.assert_array_equal(up, down)


# -- compiled training with a scheduler -------------------------------------------------------------------
class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU()) for _ in range(3)])
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def _train_step(x, y, net, criterion, opt, gm):
    with gm:
        loss = criterion(net(x), y)
        gm.backward(loss)
    norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.25)
    opt.step().clear_grad()
    return loss, norm


@pytest.mark.parametrize("opt_class", [optim.SGD, optim.AdamW, optim.RMSprop, optim.Adagrad, optim.Adadelta])
def test_compiled_step_with_scheduler_and_clipping_equals_eager_and_compiles_once(opt_class):
    def setup():
        nn.init.seed(0)
        net = Blocks()
        kwargs = {
            optim.SGD: {"lr": 0.05, "momentum": 0.9},
            optim.AdamW: {"lr": 0.01},
            optim.RMSprop: {"lr": 0.002, "momentum": 0.9},
            optim.Adagrad: {"lr": 0.05},
            optim.Adadelta: {"lr": 1.0},
        }[opt_class]
        opt = opt_class(net.parameters(), **kwargs)
        warmup = sched.LinearLR(opt, start_factor=0.2, total_iters=3)
        schedule = sched.SequentialLR(opt, [warmup, sched.CosineAnnealingLR(opt, T_max=5)], milestones=[3])
        criterion = nn.CrossEntropyLoss(weight=np.array([1.0, 2.0, 0.5, 1.0], np.float32), label_smoothing=0.1)
        return net, criterion, opt, GradManager().attach(net.parameters()), schedule

    eager, compiled = setup(), setup()
    step = xla_trace(_train_step)
    ht.reset_metrics()
    lrs, norms = [], []
    for i in range(8):
        rng = np.random.default_rng(i)
        x = ht.tensor(rng.standard_normal((16, 8)).astype(np.float32))
        labels = rng.integers(0, 4, 16).astype(np.int32)
        labels[:2] = -100  # ignored rows
        y = ht.tensor(labels)
        loss_e, norm_e = _train_step(x, y, *eager[:4])
        loss_c, norm_c = step(x, y, *compiled[:4])
        np.testing.assert_allclose(loss_c.numpy(), loss_e.numpy(), rtol=1e-5)
        np.testing.assert_allclose(norm_c.numpy(), norm_e.numpy(), rtol=2e-5)
        eager[4].step()
        compiled[4].step()
        lrs.append(compiled[2].param_groups[0]["lr"])
        norms.append(norm_c.item())
    for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert len(set(lrs)) >= 6  # the lr really moved every step
    assert max(norms) > 0.25  # and clipping was active
    assert step.cache_size == 1 and ht.metrics()["compiles"] == 1


def test_gradient_accumulation_over_micro_batches_equals_one_large_batch():
    """Backward on k micro-batches (each loss divided by k) accumulates into ``.grad`` until
    ``clear_grad()``: compiled, that is an accumulate step and an update step."""

    def accumulate(x, y, net, gm):
        with gm:
            loss = F.cross_entropy(net(x), y) / 4
            gm.backward(loss)
        return loss

    def update(opt):
        opt.step().clear_grad()

    def setup():
        nn.init.seed(5)
        net = Blocks()
        return net, optim.SGD(net.parameters(), lr=0.1, momentum=0.9), GradManager().attach(net.parameters())

    big, micro = setup(), setup()
    compiled_accumulate, compiled_update = xla_trace(accumulate), xla_trace(update)
    for step_index in range(3):
        rng = np.random.default_rng(step_index)
        x = rng.standard_normal((32, 8)).astype(np.float32)
        y = rng.integers(0, 4, 32).astype(np.int32)
        net, opt, gm = big
        with gm:
            gm.backward(F.cross_entropy(net(ht.tensor(x)), ht.tensor(y)))
        opt.step().clear_grad()
        for k in range(4):
            rows = slice(8 * k, 8 * k + 8)
            compiled_accumulate(ht.tensor(x[rows]), ht.tensor(y[rows]), micro[0], micro[2])
        compiled_update(micro[1])
    for a, b in zip(micro[0].parameters(), big[0].parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert compiled_accumulate.cache_size == 2  # the first micro-batch finds no .grad yet
