"""Ahead of time (issue 37, item 2): ``step.lower(*args)`` records from shapes without running
or changing any state, ``Lowered.as_text()``/``.compile()``, ``Compiled.as_text()``/
``.cost_analysis()``/``.memory_analysis()``/call, modules named ``jit_<fn>``,
``describe_entries()``, and the errors for arguments that do not fit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, metrics, nn, optim
from hlotrace.aot import Compiled, Lowered
from hlotrace.autodiff import GradManager
from hlotrace.errors import TraceError
from hlotrace.jit import xla_trace


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn, self.fc1, self.drop, self.fc2 = nn.BatchNorm2d(4), nn.Linear(4, 8), nn.Dropout(0.25), nn.Linear(8, 3)

    def forward(self, x):
        x = F.reshape(self.bn(F.reshape(x, (*x.shape, 1, 1))), x.shape)
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def _setup(first_call=None, clear_grad=False):
    """A module with batch-norm statistics and dropout, AdamW, a GradManager, and a step that
    leaves its gradients in ``.grad`` (so they are inputs and outputs too; a new signature
    after the first call) unless ``clear_grad``."""
    nn.init.seed(0)
    ht.random.seed(7)
    net = Net()
    opt = optim.AdamW(net.parameters(), lr=0.01)
    gm = GradManager().attach(net.parameters())

    @xla_trace(first_call=first_call)
    def train_step(x, y, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step()
        if clear_grad:
            opt.clear_grad()
        return loss

    return net, opt, gm, train_step


def _batch(rows, seed=0):
    rng = np.random.default_rng(seed)
    return ht.tensor(rng.standard_normal((rows, 4)).astype(np.float32)), ht.tensor(
        rng.integers(0, 3, rows).astype(np.int32)
    )


def _everything(net, opt):
    """Every state tensor's object and value, each .grad's object and value, the random key."""
    tensors = {f"net.{k}": v for k, v in net.named_parameters()} | {f"net.{k}": v for k, v in net.named_buffers()}
    tensors |= {f"opt.{k}": t for k, t in enumerate(opt._trace_state()[1])}
    seen = {}
    for name, t in tensors.items():
        seen[name] = (t, t.numpy().copy())
        if t.grad is not None:
            seen[f"{name}.grad"] = (t.grad, t.grad.numpy().copy())
    seen["random key"] = (None, ht.random.get_state().numpy().copy())
    return seen


def _assert_unchanged(before, after):
    assert before.keys() == after.keys()
    for name, (obj, value) in before.items():
        assert after[name][0] is obj, f"{name} is another object"
        np.testing.assert_array_equal(after[name][1], value, err_msg=name, strict=True)


def test_lower_runs_nothing_and_changes_no_state_of_a_real_training_step():
    net, opt, gm, train_step = _setup()
    train_step(*_batch(6), net, opt, gm)  # the optimizer state and .grads exist now
    assert all(p.grad is not None for p in net.parameters())
    before = _everything(net, opt)
    counts = metrics()
    lowered = train_step.lower(*_batch(5, seed=1), net, opt, gm)  # another batch size: a new signature
    after = metrics()
    _assert_unchanged(before, _everything(net, opt))
    assert after["executions"] == counts["executions"] and after["compiles"] == counts["compiles"]
    assert after["recordings"] == counts["recordings"] + 1
    assert isinstance(lowered, Lowered) and train_step.cache_size == 1  # lowering keeps no entry
    # The module reads the arguments, then the state (parameters, .grads, the key, ...).
    assert len(lowered.in_avals) == len(lowered.trace.inputs) > 2 + len(list(net.parameters())) * 2
    assert [tuple(a.shape) for a in lowered.in_avals[:2]] == [(5, 4), (5,)]


def test_a_failing_lowering_puts_the_state_back():
    net, opt, gm, _ = _setup()

    @xla_trace
    def broken(x, y, net, opt, gm):
        with gm:
            gm.backward(F.cross_entropy(net(x), y))
        opt.step()
        raise ValueError("after the update")

    before = _everything(net, opt)
    with pytest.raises(ValueError, match="after the update"):
        broken.lower(*_batch(6), net, opt, gm)
    _assert_unchanged(before, _everything(net, opt))


def test_as_text_before_and_after_the_passes_and_with_locations():
    net, opt, gm, train_step = _setup()
    lowered = train_step.lower(*_batch(6), net, opt, gm)
    text = lowered.as_text()
    assert text.startswith("module @jit_train_step")
    assert "stablehlo.dot_general" in text and "stablehlo.sqrt" in text  # the matmuls, AdamW's update
    assert "loc(" not in text and "test_aot.py" in lowered.as_text(debug_info=True)
    assert lowered.as_text(passes=True) == lowered.optimized.text(debug_info=False)
    assert lowered.as_text(passes=True) != text  # the default pipeline changed something
    assert {"matmul", "relu", "random_uniform"} <= {r.op for r in lowered.trace.records}
    assert lowered.name == "jit_train_step" and "jit_train_step" in repr(lowered)


def test_compile_cost_and_memory_analysis():
    @xla_trace
    def f(x, w):
        return F.tanh(x @ w)

    x, w = ht.tensor(np.ones((8, 16), np.float32)), ht.tensor(np.ones((16, 32), np.float32))
    compiled = f.lower(x, w).compile()
    assert isinstance(compiled, Compiled)
    assert compiled.as_text().startswith("HloModule jit_f")
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 8 * 16 * 32 and cost["transcendentals"] == 8 * 32
    memory = compiled.memory_analysis()
    assert memory["argument"] == (8 * 16 + 16 * 32) * 4 and memory["output"] == 8 * 32 * 4
    assert {"temp", "alias", "generated_code"} <= memory.keys()
    assert [tuple(a.shape) for a in compiled.out_avals] == [(8, 32)]


def test_the_compiled_call_is_the_functions_call_and_nothing_compiles_again():
    """Two identical setups: one trains through ``lower().compile()``'s Compiled and then the
    function, the other through the function with first_call="compiled" (the same module
    recorded from shapes): losses and every state tensor bitwise equal, one compile each."""
    net, opt, gm, train_step = _setup(clear_grad=True)
    batches = [_batch(6, seed=s) for s in range(3)]
    compiled = train_step.lower(*batches[0], net, opt, gm).compile()
    counts = metrics()
    losses = [compiled(*batches[0], net, opt, gm).numpy()]
    losses += [train_step(*b, net, opt, gm).numpy() for b in batches[1:]]  # the same entry
    after = metrics()
    assert after["compiles"] == counts["compiles"] and after["recordings"] == counts["recordings"]
    assert after["disk_cache_hits"] == counts["disk_cache_hits"] and train_step.cache_size == 1
    assert train_step.entries()[0].trace is compiled.trace
    ref_net, ref_opt, ref_gm, ref_step = _setup(first_call="compiled", clear_grad=True)  # the key seeded again
    ref_losses = [ref_step(*b, ref_net, ref_opt, ref_gm).numpy() for b in batches]
    np.testing.assert_array_equal(losses, ref_losses)
    ours, theirs = _everything(net, opt), _everything(ref_net, ref_opt)
    for name in ours:
        np.testing.assert_array_equal(ours[name][1], theirs[name][1], err_msg=name)
    # Compiling the same signature again, lowered again or not, hands back the same entry.
    counts = metrics()
    again = train_step.lower(*batches[0], net, opt, gm).compile()
    assert again._entry is compiled._entry and metrics()["compiles"] == counts["compiles"]


def test_the_compiled_call_writes_state_back_into_the_same_objects():
    net, opt, gm, train_step = _setup()
    compiled = train_step.lower(*_batch(6), net, opt, gm).compile()
    weight = net.fc1.weight
    old = weight.numpy().copy()
    compiled(*_batch(6), net, opt, gm)
    assert net.fc1.weight is weight and not np.array_equal(weight.numpy(), old)
    assert weight.grad is not None


def test_an_eager_first_call_after_lowering_still_runs_eagerly():
    """Lowering alone keeps no entry: the function's ordinary first call records and runs the
    references as before, and a signature compiled ahead of time does not change another's."""

    @xla_trace
    def f(x):
        return F.exp(x) * 2

    x = ht.tensor(np.linspace(-1, 1, 6, dtype=np.float32))
    f.lower(x)
    assert f.cache_size == 0
    counts = metrics()
    np.testing.assert_allclose(f(x).numpy(), np.exp(x.numpy()) * 2, rtol=1e-6)
    assert metrics()["recordings"] == counts["recordings"] + 1 and f.cache_size == 1
    other = ht.tensor(np.zeros((2, 3), np.float32))
    f.lower(other).compile()
    np.testing.assert_array_equal(f(other).numpy(), np.full((2, 3), 2, np.float32))
    assert f.cache_size == 2


def test_wrong_arguments_are_one_clear_error():
    @xla_trace
    def f(x, w, *, scale=1.0):
        return (x @ w) * scale

    x, w = ht.tensor(np.ones((2, 3), np.float32)), ht.tensor(np.ones((3, 4), np.float32))
    with pytest.raises(TraceError, match=r"f.lower\(...\): missing a required argument: 'w'; f\(x, w, \*, scale=1.0\)"):
        f.lower(x)
    with pytest.raises(TraceError, match="unexpected keyword argument 'bias'"):
        f.lower(x, w, bias=3)
    compiled = f.lower(x, w, scale=2.0).compile()
    with pytest.raises(TraceError, match=r"args\[0\]: f32\[2,3\] -> f32\[5,3\] \(compiled -> given\)"):
        compiled(ht.tensor(np.ones((5, 3), np.float32)), w, scale=2.0)
    with pytest.raises(TraceError, match=r"scale: static value 2.0 -> static value 3.0"):
        compiled(x, w, scale=3.0)
    with pytest.raises(TraceError, match=r"args\[1\]: f32\[3,4\] -> i32\[3,4\]"):
        compiled(x, ht.tensor(np.ones((3, 4), np.int32)), scale=2.0)
    np.testing.assert_array_equal(compiled(x, w, scale=2.0).numpy(), np.full((2, 4), 6, np.float32))
    np.testing.assert_array_equal(compiled(x.numpy(), w, scale=2.0).numpy(), np.full((2, 4), 6, np.float32))


def test_describe_entries_has_one_line_per_signature():
    @xla_trace
    def f(x, n):
        return x * n

    assert f.describe_entries() == "f: no compiled signature yet"
    f(ht.tensor(np.ones(3, np.float32)), 2)
    f.lower(ht.tensor(np.ones((2, 2), np.int32)), 3).compile()
    lines = f.describe_entries().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("1. args[0]: f32[3], args[1]: static value 2, passes ")
    assert lines[1].startswith("2. args[0]: i32[2,2], args[1]: static value 3, passes ")
    assert all(line.endswith(("-- 1 ops, compiled", "-- 1 ops, loaded from the disk cache")) for line in lines)


def test_xla_dumps_are_named_after_the_function(tmp_path):
    """XLA names its dump files after the HloModule: ``module_0000.jit_<fn>.*``."""
    script = textwrap.dedent(
        """
        import numpy as np, hlotrace as ht
        from hlotrace import F
        @ht.xla_trace
        def my_step(x):
            return F.exp(x)
        my_step(ht.tensor(np.ones(3, np.float32)))
        my_step(ht.tensor(np.ones(3, np.float32)))
        """
    )
    dump = tmp_path / "dump"
    env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}", "HLOTRACE_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    names = os.listdir(dump)
    assert any(".jit_my_step." in n for n in names), names
    assert not any(".main." in n for n in names), names
