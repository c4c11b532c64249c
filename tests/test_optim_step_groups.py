"""``step_per_group=True`` (issue 38 item 2): one step count per parameter group gives the
results of PyTorch's per-parameter counts, in every mode a step runs in, and keeps PyTorch's
``state_dict`` layout. See hlotrace/optim/steps.py.

The generated test runs every optimizer with a step count (SGD with momentum, Adam, AdamW,
Adagrad) through every scenario (all gradients; gradients that are None for some steps, which
splits a count off; two groups with other hyper-parameters; tied weights; an lr scheduler) in
every mode (eager on both engines, ``xla_trace`` with the optimizer as an argument and as a
captured holder, ``partial_trace``), per group against per parameter: bitwise where both run
the same ops one by one (both eager engines; partial_trace, whose optimizer runs eagerly),
within the float32 row of the tolerance table where XLA compiles two programs (it fuses the
shared scalars otherwise). Adam and Adagrad, whose step counts go through the same
bookkeeping as AdamW's and SGD's (hlotrace/optim/steps.py), run eagerly and compiled with the
optimizer as an argument; AdamW and SGD in every mode.
"""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.engines import eager_engine
from hlotrace.errors import HlotraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.optim import steps
from hlotrace.testing.tolerances import TOLERANCES

STEPS = 5
F32 = TOLERANCES[np.dtype(np.float32)]

OPTIMIZERS = {
    "sgd": lambda groups, **kw: optim.SGD(groups, lr=0.1, momentum=0.9, dampening=0.1, **kw),
    "adam": lambda groups, **kw: optim.Adam(groups, lr=0.05, weight_decay=0.01, amsgrad=True, **kw),
    "adamw": lambda groups, **kw: optim.AdamW(groups, lr=0.05, betas=(0.8, 0.9), **kw),
    "adagrad": lambda groups, **kw: optim.Adagrad(groups, lr=0.1, lr_decay=0.05, **kw),
}

# Per scenario: which parameters (indices into the optimizer's order) have no gradient at each step.
NO_GRAD = {
    "all-grads": {},
    # 1 skipped at steps 0-1 (splits off, then rejoins nobody: its own count from then on),
    # 3 at step 2 (a second split, in group 1 when there are two), everything again after.
    "grad-none": {0: (1,), 1: (1,), 2: (3,), 3: (0, 1, 2, 3, 4, 5)},
}
SCENARIOS = ["all-grads", "grad-none", "two-groups", "tied", "scheduler"]
MODES = ["eager-numpy", "eager-device", "xla-argument", "xla-captured", "partial"]
BITWISE = {"eager-numpy", "eager-device", "partial"}
FEWER_MODES = {"adam": ("eager-numpy", "eager-device", "xla-argument"), "adagrad": ("eager-numpy", "xla-argument")}


class Net(nn.Module):
    def __init__(self, tied: bool):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)
        if tied:  # one Parameter in two layers: one input, one count
            self.fc2.weight = self.fc1.weight

    def forward(self, x, first=None):
        h = first(self.fc1, x) if first is not None else self.fc1(x)
        return self.head(F.tanh(self.fc2(F.tanh(h))))


def _build(kind: str, scenario: str, per_group: bool):
    ht.random.seed(0)
    net = Net(tied=scenario == "tied")
    params = list(net.parameters())
    if scenario == "two-groups" or scenario == "grad-none":
        extra = {"lr": 0.02}
        if kind in ("adam", "adamw"):
            extra["betas"] = (0.5, 0.7)
        groups = [{"params": params[:3]}, {"params": params[3:], **extra}]
    else:
        groups = params
    opt = OPTIMIZERS[kind](groups, step_per_group=per_group)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if scenario == "scheduler" else None
    return net, opt, GradManager().attach(net.parameters()), sched


def _trainer(mode: str, net, opt, gm):
    """A function (x, y, skip) -> loss running one training step in ``mode``."""
    first = partial_trace(lambda fc1, x: fc1(x)) if mode == "partial" else None

    def step(x, y, net, opt, gm, skip):
        with gm:
            loss = ((net(x, first) - y) ** 2).mean()
            gm.backward(loss)
        params = opt._all_params()
        for i in skip:
            params[i].grad = None
        opt.step().clear_grad()
        return loss

    if mode == "xla-argument":
        compiled = xla_trace(step)
        return lambda x, y, skip: compiled(x, y, net, opt, gm, skip=skip)
    if mode == "xla-captured":
        compiled = xla_trace(lambda x, y, skip: step(x, y, net, opt, gm, skip))
        return lambda x, y, skip: compiled(x, y, skip=skip)
    return lambda x, y, skip: step(x, y, net, opt, gm, skip)


def _train(kind: str, scenario: str, mode: str, per_group: bool):
    net, opt, gm, sched = _build(kind, scenario, per_group)
    train = _trainer(mode, net, opt, gm)
    rng = np.random.default_rng(1)
    history = []
    engine = "device" if mode == "eager-device" else "numpy"
    with eager_engine(engine):
        for s in range(STEPS):
            x = ht.tensor(rng.standard_normal((6, 4)).astype(np.float32))
            y = ht.tensor(rng.standard_normal((6, 3)).astype(np.float32))
            skip = tuple(i for i in NO_GRAD.get(scenario, {}).get(s, ()) if i < len(opt._all_params()))
            train(x, y, skip)
            if sched is not None:
                sched.step()
            history.append([p.numpy().copy() for p in opt._all_params()])
    return history, opt


@pytest.mark.parametrize(
    ("kind", "scenario", "mode"),
    [(k, s, m) for k in OPTIMIZERS for s in SCENARIOS for m in MODES if m in FEWER_MODES.get(k, MODES)],
)
def test_per_group_gives_the_per_parameter_results(kind, scenario, mode):
    expected, reference = _train(kind, scenario, mode, per_group=False)
    actual, opt = _train(kind, scenario, mode, per_group=True)
    for s, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            what = f"{kind} {scenario} {mode}: parameter {i} after step {s + 1}"
            if mode in BITWISE:
                np.testing.assert_array_equal(b, a, err_msg=what)
            else:
                np.testing.assert_allclose(b, a, rtol=F32.rtol, atol=F32.atol, err_msg=what)
    # The counts are PyTorch's, parameter by parameter, and state_dict() writes them so.
    want, got = reference.state_dict(), opt.state_dict()
    assert want["state"].keys() == got["state"].keys()
    for index, entries in want["state"].items():
        assert entries.keys() == got["state"][index].keys()
        assert got["state"][index]["step"] == entries["step"], f"parameter {index}'s step"
    # All gradients: one count per group; a split adds one per split-off set.
    distinct = [len(steps.counts_of(opt, g)) for g in opt.param_groups]
    assert distinct == ([2, 2] if scenario == "grad-none" else [1] * len(opt.param_groups))


def test_trace_state_has_one_count_per_group_and_a_spare():
    _, opt, _, _ = _build("adamw", "two-groups", per_group=True)
    _, per_parameter, _, _ = _build("adamw", "two-groups", per_group=False)
    tensors = opt._trace_state()[1]
    counts = [t for t in tensors if any(t is opt.state[p]["step"] for p in opt._all_params())]
    assert len(counts) == 2
    assert len(tensors) == len(per_parameter._trace_state()[1]) - len(opt._all_params()) + 2 + 2  # + spares
    assert opt.step_per_group and not per_parameter.step_per_group


def test_fewer_scalar_outputs_in_the_compiled_step():
    programs = {}
    for per_group in (False, True):
        net, opt, gm, _ = _build("adamw", "all-grads", per_group)
        train = xla_trace(lambda x, y, net, opt, gm: _step_body(x, y, net, opt, gm))
        train(ht.tensor(np.ones((2, 4), np.float32)), ht.tensor(np.ones((2, 3), np.float32)), net, opt, gm)
        programs[per_group] = train.executable.hlo_text()
    scalars = {k: _root_scalar_outputs(text) for k, text in programs.items()}
    assert scalars[False] == 6 and scalars[True] == 1, scalars


def _step_body(x, y, net, opt, gm):
    with gm:
        loss = ((net(x) - y) ** 2).mean()
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _root_scalar_outputs(hlo_text: str) -> int:
    from hlotrace.runtime import hlo_parse

    module = hlo_parse.parse(hlo_text)
    root = module.computations[module.entry][-1]
    outputs = hlo_parse.shapes(root.shape)
    return sum(1 for t, dims in outputs if t == "f32" and dims == ()) - 1  # less the loss


# -- state dicts -------------------------------------------------------------------------
LOADED_STEPS = {
    "equal": [4, 4, 4, 4, 4, 4],
    "unequal": [4, 2, 4, 4, 3, 4],
    "missing": [4, None, 4, 7, None, 7],
}


def _torch_layout(opt_kind: str, step_values):
    """A state dict as PyTorch writes it: per parameter step and moments (None: no state)."""
    _, opt, _, _ = _build(opt_kind, "two-groups", per_group=False)
    rng = np.random.default_rng(5)
    state = {}
    for i, (p, value) in enumerate(zip(opt._all_params(), step_values, strict=True)):
        if value is None:
            continue
        entries = {name: np.abs(rng.standard_normal(t.shape)).astype(np.float32) for name, t in opt.state[p].items()}
        entries["step"] = np.array(float(value), np.float32)
        state[i] = entries
    saved = opt.state_dict()
    return {"state": state, "param_groups": saved["param_groups"]}


@pytest.mark.parametrize("mode", ["eager-numpy", "xla-argument"])
@pytest.mark.parametrize("loaded", list(LOADED_STEPS))
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_pytorch_layout_checkpoints_load_and_train_as_per_parameter(kind, loaded, mode):
    checkpoint = _torch_layout(kind, LOADED_STEPS[loaded])
    results = {}
    for per_group in (False, True):
        net, opt, gm, _ = _build(kind, "two-groups", per_group)
        opt.load_state_dict(checkpoint)
        train = _trainer(mode, net, opt, gm)
        rng = np.random.default_rng(2)
        for _ in range(3):
            x = ht.tensor(rng.standard_normal((6, 4)).astype(np.float32))
            y = ht.tensor(rng.standard_normal((6, 3)).astype(np.float32))
            train(x, y, ())
        results[per_group] = ([p.numpy() for p in opt._all_params()], opt.state_dict(), opt)
    (want, want_sd, _), (got, got_sd, opt) = results[False], results[True]
    for a, b in zip(want, got, strict=True):
        if mode == "eager-numpy":
            np.testing.assert_array_equal(b, a)
        else:
            np.testing.assert_allclose(b, a, rtol=F32.rtol, atol=F32.atol)
    for index, entries in want_sd["state"].items():
        assert got_sd["state"][index]["step"] == entries["step"]
    # Equal loaded counts share one count per group; unequal ones are kept apart, never averaged.
    loaded_values = [3 + (v if v is not None else 0) for v in LOADED_STEPS[loaded]]
    expected_counts = [len(set(loaded_values[:3])), len(set(loaded_values[3:]))]
    assert [len(steps.counts_of(opt, g)) for g in opt.param_groups] == expected_counts


def test_state_dict_round_trips_between_the_two_bookkeepings():
    history, per_group = _train("adam", "grad-none", "eager-numpy", per_group=True)
    saved = per_group.state_dict()
    _, fresh = _train("adam", "all-grads", "eager-numpy", per_group=False)
    fresh_groups = _build("adam", "grad-none", per_group=False)[1]
    fresh_groups.load_state_dict(saved)
    again = fresh_groups.state_dict()
    for index, entries in saved["state"].items():
        for name, value in entries.items():
            np.testing.assert_array_equal(again["state"][index][name], value)
    assert len(history) == STEPS and fresh is not None


def test_a_split_program_is_not_run_again_after_the_counts_merge():
    # A compiled step that recorded a split must not be replayed once a load has merged the
    # counts again: the Python side would not split with it (the split counter is in the key).
    results = {}
    for per_group in (False, True):
        net, opt, gm, _ = _build("adam", "all-grads", per_group)
        start = opt.state_dict()
        train = _trainer("xla-argument", net, opt, gm)
        rng = np.random.default_rng(3)
        batches = [
            (
                ht.tensor(rng.standard_normal((6, 4)).astype(np.float32)),
                ht.tensor(rng.standard_normal((6, 3)).astype(np.float32)),
            )
            for _ in range(3)
        ]
        train(*batches[0], (1,))  # splits parameter 1 off
        opt.load_state_dict(start)  # every count 0 again: one count per group
        train(*batches[1], (1,))  # must split again
        train(*batches[2], ())
        results[per_group] = [float(opt.state[p]["step"].numpy()) for p in opt._all_params()]
    assert results[True] == results[False] == [2, 1, 2, 2, 2, 2]


def test_a_second_split_inside_one_recording_is_refused_by_name():
    net, opt, gm, _ = _build("adamw", "all-grads", per_group=True)

    def two_steps(x, net, opt, gm):
        for skipped in (1, 2):
            with gm:
                gm.backward((net(x) ** 2).mean())
            opt._all_params()[skipped].grad = None
            opt.step().clear_grad()

    with pytest.raises(HlotraceError, match=r"parameter 2 of group 0 .*no gradient"):
        xla_trace(two_steps)(ht.tensor(np.ones((2, 4), np.float32)), net, opt, gm)
    two_steps(ht.tensor(np.ones((2, 4), np.float32)), net, opt, gm)  # eagerly: splits twice
    assert len(steps.counts_of(opt, opt.param_groups[0])) == 3


def test_step_per_group_must_be_a_bool():
    with pytest.raises(HlotraceError, match="step_per_group"):
        optim.AdamW(Net(False).parameters(), step_per_group="group")


def test_a_split_in_a_failed_compiled_call_is_undone():
    results = {}
    for per_group in (False, True):
        net, opt, gm, _ = _build("adamw", "all-grads", per_group)

        def failing(x, net, opt, gm):
            with gm:
                gm.backward((net(x) ** 2).mean())
            opt._all_params()[1].grad = None
            opt.step().clear_grad()
            raise RuntimeError("after the update")

        x = ht.tensor(np.ones((2, 4), np.float32))
        with pytest.raises(RuntimeError, match="after the update"):
            xla_trace(failing)(x, net, opt, gm)
        saved = opt.state_dict()  # the optimizer's next use settles the failed call's split
        assert [float(entries["step"]) for entries in saved["state"].values()] == [0] * 6
        if per_group:
            assert len(steps.counts_of(opt, opt.param_groups[0])) == 1  # the split is undone
        train = _trainer("xla-argument", net, opt, gm)
        train(x, ht.tensor(np.ones((2, 3), np.float32)), (2,))
        results[per_group] = [float(opt.state[p]["step"].numpy()) for p in opt._all_params()]
    assert results[True] == results[False] == [1, 1, 0, 1, 1, 1]
