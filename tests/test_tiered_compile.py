"""Tiered compilation of a ``first_call="compiled"`` function (hlotrace.runtime.tiered, opt-in):
the first call runs a quickly compiled executable while the optimized one compiles in the
background; the second call waits for it and every later call runs it.

Every op's first call under tiering is checked against the optimized result in
tests/test_first_call.py (hlotrace.testing.first_call); here: the schedule, training steps
in every calling convention that matters to it, the caches, the switches and the failures.
"""

from __future__ import annotations

import collections
import logging

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, metrics, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import BackendError, HlotraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.metrics import reset_metrics
from hlotrace.runtime import cache, compiler, jaxlib_compat, tiered


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch, tmp_path):
    """No executable compiled yet, in memory or on disk (a new process with its own cache)."""
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())
    monkeypatch.setattr(tiered, "pending", {})
    monkeypatch.setattr(tiered, "_warned", set())
    monkeypatch.setenv(tiered.TIERED_ENV, "1")  # opt-in: these tests turn it on for every function
    cache.set_directory(tmp_path / "cache")
    reset_metrics()
    yield
    cache.set_directory(None)


def forget_in_process(monkeypatch):
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.tanh(self.fc1(x)))


def data(seed=0):
    rng = np.random.default_rng(seed)
    return ht.tensor(rng.standard_normal((32, 6)).astype(np.float32)), ht.tensor(
        rng.integers(0, 3, 32).astype(np.int32)
    )


def make_step(first_call="compiled", tiered_compile=None, convention="holders"):
    """(a fresh AdamW step, its positional and keyword arguments, the module): the module,
    optimizer and GradManager as arguments (``holders``), or as keywords with the parameters
    as a list beside the module and a dict result (``keywords``)."""
    nn.init.seed(0)
    net = MLP()
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    gm = GradManager().attach(net.parameters())
    x, y = data()
    if convention == "holders":

        @xla_trace(first_call=first_call, tiered_compile=tiered_compile)
        def step(x, y, net, opt, gm):
            with gm:
                loss = F.cross_entropy(net(x), y)
                gm.backward(loss)
            opt.step().clear_grad()
            return loss

        return step, (x, y, net, opt, gm), {}, net

    @xla_trace(first_call=first_call, tiered_compile=tiered_compile)
    def keyword_step(*, batch, model, params, opt, gm):
        with gm:
            loss = F.cross_entropy(model(batch[0]), batch[1])
            gm.backward(loss)
        opt.step().clear_grad()
        return {"loss": loss, "norm": F.sum(params[0] * params[0])}

    return (
        keyword_step,
        (),
        {"batch": (x, y), "model": net, "params": list(net.parameters()), "opt": opt, "gm": gm},
        net,
    )


def train(steps=3, first_call="compiled", tiered_compile=None, convention="holders"):
    """(losses, final parameters, the traced step) of ``steps`` AdamW steps."""
    step, args, kwargs, net = make_step(first_call, tiered_compile, convention)
    losses = []
    for _ in range(steps):
        result = step(*args, **kwargs)
        losses.append(float((result["loss"] if isinstance(result, dict) else result).numpy()))
    return losses, [p.numpy().copy() for p in net.parameters()], step


def test_the_first_call_runs_quick_and_every_later_call_the_optimized_executable():
    step, (x, y, net, opt, gm), _, _ = make_step()
    step(x, y, net, opt, gm)
    entry = step.entries()[0]
    assert metrics()["fast_compiles"] == 1 and entry.upgrade is not None
    quick, key = entry.executable, entry.upgrade.key
    assert compiler.EXECUTABLES[(*key, "quick")] is quick and key not in compiler.EXECUTABLES
    step(x, y, net, opt, gm)  # waits for the background compile and switches for good
    assert entry.upgrade is None and entry.executable is not quick
    assert metrics()["background_compiles"] == 1 and metrics()["compiles"] == 1
    assert compiler.EXECUTABLES[key] is entry.executable
    step(x, y, net, opt, gm)
    assert metrics()["fast_compiles"] == 1 and metrics()["compiles"] == 1 and metrics()["executions"] == 3


@pytest.mark.parametrize("convention", ["holders", "keywords"])
def test_a_tiered_step_trains_like_an_untiered_one(convention):
    tiered_losses, tiered_params, _ = train(convention=convention)
    assert metrics()["fast_compiles"] == 1 and metrics()["background_compiles"] == 1
    compiler.EXECUTABLES.clear()
    plain_losses, plain_params, _ = train(tiered_compile=False, convention=convention)
    eager_losses, eager_params, _ = train(first_call="eager", convention=convention)
    # Step 1 ran the quick executable: its rounding may differ in the last bits, and the
    # parameters it wrote carry that into later steps; every step stays within float32's
    # tolerance of the untiered and the eager-first runs.
    np.testing.assert_allclose(tiered_losses, plain_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tiered_losses, eager_losses, rtol=1e-4, atol=1e-5)
    for a, b, c in zip(tiered_params, plain_params, eager_params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    assert tiered_losses[-1] < tiered_losses[0]  # it trains


def test_the_schedule_is_fixed_so_runs_are_bitwise_reproducible():
    cache.set_directory("off")
    first = train(steps=4)
    compiler.EXECUTABLES.clear()
    second = train(steps=4)
    assert metrics()["fast_compiles"] == 2  # both runs compiled both executables
    assert first[0] == second[0]
    for a, b in zip(first[1], second[1], strict=True):
        assert a.tobytes() == b.tobytes()


def test_a_warm_cache_loads_both_executables_and_changes_no_result(monkeypatch):
    cold = train(steps=3)  # compiles both; each is stored on disk
    assert metrics()["fast_compiles"] == 1 and metrics()["compiles"] == 1
    warm_memory = train(steps=3)  # the same process: both from memory
    forget_in_process(monkeypatch)  # a new process: both from the disk cache
    hits = metrics()["disk_cache_hits"]
    warm_disk = train(steps=3)
    assert metrics()["disk_cache_hits"] == hits + 2
    assert metrics()["fast_compiles"] == 1 and metrics()["compiles"] == 1  # nothing compiled again
    for run in (warm_memory, warm_disk):  # the first call ran the quick executable each time
        assert run[0] == cold[0]
        for a, b in zip(run[1], cold[1], strict=True):
            assert a.tobytes() == b.tobytes()


def test_an_optimized_entry_gone_from_the_disk_before_the_second_call_is_compiled_then(monkeypatch):
    step, args, _, _ = make_step()
    cold = [float(step(*args).numpy()) for _ in range(3)]
    forget_in_process(monkeypatch)  # a new process: both entries on disk
    step, args, _, _ = make_step()
    losses = [float(step(*args).numpy())]
    upgrade = step.entries()[0].upgrade
    assert upgrade.on_disk and metrics()["compiles"] == 1  # found, not loaded yet, nothing compiled
    (cache.directory() / (cache.entry_key(upgrade.fields) + cache.SUFFIX)).unlink()  # evicted meanwhile
    losses += [float(step(*args).numpy()) for _ in range(2)]
    assert metrics()["compiles"] == 2 and step.entries()[0].upgrade is None
    assert losses == cold  # the same quick then optimized programs: bitwise the cold run


@pytest.mark.parametrize("how", ["default", "argument", "environment"])
def test_tiering_is_off_by_default_and_when_turned_off(how, monkeypatch):
    if how == "default":
        monkeypatch.delenv(tiered.TIERED_ENV)
        train(steps=2)
    elif how == "environment":
        monkeypatch.setenv(tiered.TIERED_ENV, "0")
        train(steps=2)
    else:
        train(steps=2, tiered_compile=False)
    assert metrics()["fast_compiles"] == 0 and metrics()["compiles"] == 1


def test_the_argument_turns_it_on_without_the_environment(monkeypatch):
    monkeypatch.delenv(tiered.TIERED_ENV)
    train(steps=2, tiered_compile=True)
    assert metrics()["fast_compiles"] == 1 and metrics()["background_compiles"] == 1


def test_a_bad_switch_value_is_an_error(monkeypatch):
    monkeypatch.setenv(tiered.TIERED_ENV, "sometimes")
    with pytest.raises(HlotraceError, match="HLOTRACE_TIERED_COMPILE='sometimes'"):
        train(steps=1)


def test_an_eager_first_call_compiles_once_optimized():
    train(steps=2, first_call="eager")
    assert metrics()["fast_compiles"] == 0 and metrics()["compiles"] == 1


def test_a_stateless_function_switches_on_its_hot_path():
    @xla_trace(first_call="compiled")
    def f(a, b):
        return F.exp(a) * b + F.sum(a)

    a, b = (ht.tensor(np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8) * k) for k in (1, 3))
    results = [f(a, b).numpy() for _ in range(4)]
    entry = f.entries()[0]
    assert metrics()["fast_compiles"] == 1 and entry.upgrade is None
    g = xla_trace(f.fn)  # the same module: the optimized executable, from memory
    g(a, b)  # records eagerly (NumPy's result)
    expected = g(a, b).numpy()
    assert g.entries()[0].executable is entry.executable
    np.testing.assert_allclose(results[0], expected, rtol=1e-6, atol=1e-5)
    for later in results[1:]:  # the hot path (keyed by the buffers' avals) runs the optimized one
        assert later.tobytes() == expected.tobytes()
    executions = metrics()["executions"]
    f(a, b)
    assert metrics()["executions"] == executions + 1


def test_another_function_compiling_the_same_module_waits_instead_of_compiling_again():
    @xla_trace(first_call="compiled")
    def f(a):
        return F.tanh(a) * 2.0

    a = ht.tensor(np.arange(12, dtype=np.float32))
    f(a)  # quick executable; the optimized one compiles in the background
    g = xla_trace(f.fn)  # eager first call: compiles the same module
    g(a)
    assert metrics()["compiles"] == 1 and metrics()["background_compiles"] == 1
    f(a)
    assert f.entries()[0].executable is g.entries()[0].executable


def test_finished_background_compiles_do_not_pile_up_in_pending():
    functions = []
    for k in range(3):  # three modules, each called once: nobody collects their compiles
        f = xla_trace(lambda a, k=k: F.exp(a) * float(k + 2), first_call="compiled")
        f(ht.tensor(np.ones(4, np.float32)))
        functions.append(f)
    for upgrade in list(tiered.pending.values()):
        upgrade.future.result()  # finished
    last = xla_trace(lambda a: F.tanh(a), first_call="compiled")
    last(ht.tensor(np.ones(4, np.float32)))
    assert list(tiered.pending) == [last.entries()[0].upgrade.key]  # only the one just started
    assert metrics()["background_compiles"] == 3
    for f in functions:  # collected into the in-process cache; their next call switches to it
        entry = f.entries()[0]
        assert compiler.EXECUTABLES[entry.upgrade.key] is entry.upgrade.executable
        f(ht.tensor(np.ones(4, np.float32)))
        assert entry.upgrade is None and entry.executable in compiler.EXECUTABLES.values()


def test_inspection_reports_the_optimized_executable():
    @xla_trace(first_call="compiled")
    def f(a):
        return F.exp(a) + 1.0

    a = ht.tensor(np.ones(8, np.float32))
    f(a)
    entry = f.entries()[0]
    assert entry.upgrade is not None
    exe = f.executable  # waits for the background compile
    assert entry.upgrade is None and exe is entry.executable and exe in compiler.EXECUTABLES.values()
    assert "fusion" in exe.hlo_text() or "exponential" in exe.hlo_text()


def test_a_failed_optimized_compile_keeps_the_quick_executable_and_warns_once(monkeypatch, caplog):
    compile_now = compiler.compile_now

    def optimized_fails(target, text):
        if not target.fast:
            raise BackendError("XLA failed to compile the module: simulated")
        return compile_now(target, text)

    monkeypatch.setattr(compiler, "compile_now", optimized_fails)
    with caplog.at_level(logging.WARNING, logger="hlotrace"):
        losses, params, step = train(steps=3)
    monkeypatch.setattr(compiler, "compile_now", compile_now)
    warnings = [r for r in caplog.records if "optimized compile" in r.getMessage()]
    assert len(warnings) == 1 and "simulated" in warnings[0].getMessage()
    assert metrics()["compiles"] == 0 and step.entries()[0].upgrade is None
    plain_losses, plain_params, _ = train(tiered_compile=False)
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5, atol=1e-6)  # every step ran the quick one
    for a, b in zip(params, plain_params, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_options_this_xla_does_not_know_fall_back_to_one_optimized_compile(monkeypatch, caplog):
    monkeypatch.setattr(jaxlib_compat, "FAST_CPU_OPTIONS", (("xla_no_such_option_anywhere", 1),))
    with caplog.at_level(logging.WARNING, logger="hlotrace"):
        _, _, step = train(steps=2)
        train(steps=1)
    assert metrics()["fast_compiles"] == 0 and metrics()["compiles"] == 1
    assert sum("quick-compile options" in r.getMessage() for r in caplog.records) == 1
    assert step.entries()[0].upgrade is None


def test_a_module_xla_cannot_compile_fails_the_first_call_as_before(monkeypatch):
    def nothing_compiles(target, text):
        raise BackendError("XLA failed to compile the module: simulated")

    monkeypatch.setattr(compiler, "compile_now", nothing_compiles)
    nn.init.seed(0)
    net = MLP()
    before = [p.numpy().copy() for p in net.parameters()]

    @xla_trace(first_call="compiled")
    def forward(x, net):
        return net(x)

    with pytest.raises(BackendError, match="simulated"):
        forward(data()[0], net)
    for p, b in zip(net.parameters(), before, strict=True):
        assert p.numpy().tobytes() == b.tobytes()
    assert not tiered.pending


def test_partial_trace_is_tiered_forward_and_backward():
    nn.init.seed(0)
    net = MLP()
    gm = GradManager().attach(net.parameters())
    x, y = data()
    backbone = partial_trace(lambda x, net: net(x), first_call="compiled")
    grads = []
    for _ in range(3):
        with gm:
            loss = F.cross_entropy(backbone(x, net), y)
            gm.backward(loss)
        grads.append([p.grad.numpy().copy() for p in net.parameters()])
        for p in net.parameters():
            p.grad = None
    assert metrics()["fast_compiles"] == 2 and metrics()["background_compiles"] == 2
    for later in grads[1:]:
        for a, b in zip(grads[0], later, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
