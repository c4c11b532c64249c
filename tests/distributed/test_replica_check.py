"""Replicas proven equal across processes (issue 33, item 3): one job of 2 processes x 2 CPU
devices runs every scenario as a user writes it, one after the other (a launch costs several
seconds), and prints what each gave; the tests below read that output per process.

Killed mutants: tests/mutants/replica.py (run with
``make mutation ARGS="--only replica --columns suite"``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 150

SCRIPT = textwrap.dedent(
    """
    import os
    import numpy as np
    import hlotrace as ht
    import hlotrace.distributed as dist
    import hlotrace.functional as F
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager
    from hlotrace.distributed import replicas
    from hlotrace.jit import xla_trace

    dist.initialize()
    me = dist.process_index()
    mesh = dist.Mesh((len(dist.devices()),), ("data",))


    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x, drop=False):
            h = F.relu(self.fc1(x))
            return self.fc2(F.dropout(h, 0.5) if drop else h)


    def train_step(x, y, *, net, opt, gm, drop=False):
        with gm:
            loss = F.cross_entropy(net(x, drop), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss


    def build(seed, lr=1e-2):
        ht.random.seed(seed)  # (seeds parameter initialization too: issue 33 item 2)
        net = MLP()
        dist.shard_module(net, mesh)  # replicated on every device of both processes
        opt = optim.AdamW(net.parameters(), lr=lr)
        return net, opt, GradManager().attach(net.parameters())


    def batch(i):
        rng = np.random.default_rng(i)  # the same global batch everywhere; each gives its rows
        x, y = rng.standard_normal((8, 8)).astype(np.float32), rng.integers(0, 4, 8).astype(np.int32)
        rows = slice(4 * me, 4 * me + 4)
        return dist.make_global(x[rows], mesh, dist.P("data")), dist.make_global(y[rows], mesh, dist.P("data"))


    def train(net, opt, gm, steps=3, drop=False):
        step = xla_trace(train_step)
        checks = replicas._CHECKS[0]
        for i in range(steps):
            step(*batch(i), net=net, opt=opt, gm=gm, drop=drop)
        checks = replicas._CHECKS[0] - checks  # exchanges: once, not per call (a new batch each time)
        # parameters are replicated: each process reads its own copy
        total = sum(float(np.abs(p.numpy()).astype(np.float64).sum()) for p in net.parameters())
        return f"checksum {total:.9g} checks {checks}"


    def scenario(label, run):
        try:
            print(f"<{label}> ok {run()}", flush=True)
        except dist.ReplicaMismatch as exc:
            print(f"<{label}> error {exc}".replace(chr(10), " | "), flush=True)


    # Each process seeds its own way (a per-rank seed): stopped before the first step.
    scenario("divergent", lambda: train(*build(me)))

    # One seed everywhere: trained replicas stay equal (a later step over them checks again).
    def seeded():
        net, opt, gm = build(0)
        result = train(net, opt, gm)
        logits = xla_trace(lambda x, *, net: net(x))
        logits(batch(0)[0], net=net)
        return result

    scenario("seeded", seeded)

    # Divergent models repaired by copying process 0's values (process 0 used seed 0).
    def broadcast():
        net, opt, gm = build(me)
        dist.broadcast_from(0, [net, opt])
        return train(net, opt, gm)

    scenario("broadcast", broadcast)

    # The same compiled step called with other objects (a divergent model) checks them again.
    def other_objects():
        step = xla_trace(train_step)
        net, opt, gm = build(0)
        step(*batch(0), net=net, opt=opt, gm=gm)
        net, opt, gm = build(me)
        step(*batch(1), net=net, opt=opt, gm=gm)

    scenario("other-objects", other_objects)

    # Checked again at a new signature (eval) of the same objects: process 1 loaded other values.
    def new_signature():
        net = build(0)[0]
        logits = xla_trace(lambda x, *, net: net(x))
        logits(batch(0)[0], net=net)
        logits(batch(1)[0], net=net)
        if me == 1:
            net.load_state_dict({k: v * 2 for k, v in net.state_dict().items()})
        logits(batch(0)[0], net=net.eval())

    scenario("new-signature", new_signature)

    # Equal parameters; each process resumes its own optimizer state (a per-rank checkpoint).
    def optimizer():
        net, opt, gm = build(0)
        train(net, opt, gm, steps=1)
        state = opt.state_dict()
        state["state"][0]["exp_avg"] = state["state"][0]["exp_avg"] + me
        opt.load_state_dict(state)
        return train(net, opt, gm)

    scenario("optimizer", optimizer)

    # Equal parameters and optimizer; the default random key (read by dropout) differs.
    def late_key():
        net, opt, gm = build(0)
        ht.random.seed(100 + me)
        return train(net, opt, gm, drop=True)

    scenario("late-key", late_key)

    # Replicated host data must be the same data in every process.
    scenario("global-same", lambda: dist.make_global(np.arange(4.0), mesh).shape)
    scenario("global-differs", lambda: dist.make_global(np.arange(4.0) + me, mesh, dist.P()).shape)

    # The check switched off: the divergent job trains, each process its own model.
    os.environ["HLOTRACE_DIST_CHECK"] = "off"
    scenario("off", lambda: train(*build(me)))
    scenario("off-global", lambda: dist.make_global(np.arange(4.0) + me, mesh, dist.P()).shape)
    print("<done>", flush=True)
    """
)


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict[int, dict[str, str]]:
    """{process: {scenario: what it printed after its label}} of one run of SCRIPT."""
    path = tmp_path_factory.mktemp("replicas") / "replicas.py"
    path.write_text(SCRIPT)
    launch = [sys.executable, "-m", "hlotrace.distributed.launch", "--nproc", "2", "--cpu-devices", "2"]
    env = {k: v for k, v in os.environ.items() if k != "HLOTRACE_DIST_CHECK"}
    done = subprocess.run(
        [*launch, "--timeout", "30", str(path)],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=ROOT,
        env=env,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    found: dict[int, dict[str, str]] = {0: {}, 1: {}}
    for process, label, rest in re.findall(r"^\[(\d)\] <([\w-]+)>(.*)$", output, re.M):
        found[int(process)][label] = rest.strip()
    assert "done" in found[0] and "done" in found[1], output
    return found


def _both(job, label: str) -> tuple[str, str]:
    return job[0][label], job[1][label]


def test_per_process_seeds_stop_every_process_naming_the_tensors_and_the_fix(job):
    for process, text in enumerate(_both(job, "divergent")):
        assert text.startswith("error the compiled step's replicated inputs"), (process, text)
        assert "MLP.fc1.weight: process 1 differs from process 0" in text, text
        assert "MLP.fc2.bias: process 1 differs from process 0" in text, text
        assert "ht.random.seed(n)" in text and "dist.broadcast_from(0, [net, opt])" in text, text
        assert "HLOTRACE_DIST_CHECK=off" in text, text
        # AdamW's moments start at zero and its hyper-parameters agree: not named.
        assert "AdamW" not in text, text


def test_one_seed_trains_identical_replicas_and_checks_again_after_training(job):
    first, second = _both(job, "seeded")
    assert first.startswith("ok checksum") and first.endswith(" checks 1"), first
    assert first == second


def test_broadcast_from_process_0_repairs_divergent_models(job):
    first, second = _both(job, "broadcast")
    assert first.startswith("ok checksum") and first == second, (first, second)
    # Process 0 built its model from seed 0: the repaired job trains the seeded one.
    assert first == job[0]["seeded"]


def test_the_same_step_given_other_objects_checks_them(job):
    for text in _both(job, "other-objects"):
        assert text.startswith("error the compiled step's replicated inputs"), text
        assert "MLP.fc1.weight: process 1 differs from process 0" in text, text


def test_a_new_signature_of_the_same_objects_checks_them_again(job):
    for text in _both(job, "new-signature"):
        assert text.startswith("error the compiled step's replicated inputs: 4 of 4"), text


def test_optimizer_state_alone_differing_is_an_error_naming_it(job):
    for text in _both(job, "optimizer"):
        assert text.startswith("error "), text
        assert "AdamW state 'exp_avg' of MLP.fc1.weight: process 1 differs from process 0" in text, text
        assert "MLP.fc1.weight:" not in text.replace("of MLP.fc1.weight:", ""), text


def test_a_random_key_read_by_the_step_must_agree(job):
    for text in _both(job, "late-key"):
        assert text.startswith("error the compiled step's random key"), text
        assert "the default random generator's key (ht.random): process 1 differs from process 0" in text, text


def test_make_global_of_replicated_data_is_checked(job):
    assert _both(job, "global-same") == ("ok (4,)", "ok (4,)")
    for text in _both(job, "global-differs"):
        assert text.startswith("error dist.make_global of a float64[4] value"), text
        assert "the data this process gave: process 1 differs from process 0" in text, text


def test_the_check_switched_off_lets_divergent_replicas_train(job):
    first, second = _both(job, "off")
    assert first.startswith("ok checksum") and second.startswith("ok checksum"), (first, second)
    assert first != second  # each process trained its own model: what the check prevents
    assert _both(job, "off-global") == ("ok (4,)", "ok (4,)")


# -- in this process (no job) ------------------------------------------------------------------


def test_fingerprints_are_bit_exact_and_carry_dtype_and_shape():
    import numpy as np

    from hlotrace.distributed.replicas import fingerprint

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert fingerprint(a) == fingerprint(a.copy()) == fingerprint(np.asfortranarray(a))
    assert fingerprint(a[:, ::2]) == fingerprint(np.ascontiguousarray(a[:, ::2]))
    assert fingerprint(np.zeros(2, np.float32)) != fingerprint(np.array([0.0, -0.0], np.float32))
    assert fingerprint(a) != fingerprint(a.reshape(4, 3)) and fingerprint(a) != fingerprint(a.astype(np.float64))
    assert fingerprint(np.zeros((0, 3), np.int32)).startswith("<i4[0, 3]:")


def test_a_mismatch_names_each_tensor_and_groups_the_processes():
    from hlotrace.distributed.replicas import SHOWN, ReplicaMismatch, compare

    names = ["MLP.fc1.weight", "MLP.fc1.bias", "AdamW lr (param group 0)"]
    tables = [["a", "b", "c"], ["a", "x", "y"], ["a", "x", "z"]]
    with pytest.raises(ReplicaMismatch) as caught:
        compare("the step", names, tables, "fix it ({env}=off)")
    text = str(caught.value)
    assert text.startswith("the step: 2 of 3 replicated tensors differ between processes"), text
    assert "  MLP.fc1.bias: processes 1, 2 differ from process 0\n" in text
    assert "  AdamW lr (param group 0): process 1 and process 2 differ from process 0\n" in text
    assert "MLP.fc1.weight" not in text and text.endswith("fix it (HLOTRACE_DIST_CHECK=off)")
    compare("the step", names, [tables[0]] * 3, "")  # equal everywhere: nothing raised
    with pytest.raises(
        ReplicaMismatch, match=r"different numbers of replicated tensors \(process 0: 3, process 1: 2\)"
    ):
        compare("the step", names, [tables[0], tables[0][:2]], "")
    with pytest.raises(
        ReplicaMismatch, match=r"(?s)input 2 \(float32\[8, 4\]\): process 1 differs.*dist\.P\(\"data\"\)"
    ):
        compare("the step", ["input 2 (float32[8, 4])"], [["a"], ["b"]], "")
    many = [f"t{i}" for i in range(SHOWN + 3)]
    with pytest.raises(ReplicaMismatch, match=r"  \.\.\. and 3 more\n"):
        compare("the step", many, [["a"] * len(many), ["b"] * len(many)], "")


def test_broadcast_from_in_one_process_returns_its_argument_and_checks_it():
    import hlotrace as ht
    import hlotrace.distributed as dist
    from hlotrace import nn
    from hlotrace.errors import HlotraceError

    net = nn.Linear(2, 3)
    before = net.weight.numpy().copy()
    assert dist.broadcast_from(0, [net, ht.tensor([1.0])])[0] is net
    assert (net.weight.numpy() == before).all()
    with pytest.raises(HlotraceError, match=r"src must be a process index in \[0, 1\), got 1"):
        dist.broadcast_from(1, net)
    with pytest.raises(HlotraceError, match="copies Modules, Optimizers, Tensors or lists of them, got dict"):
        dist.broadcast_from(0, net.state_dict())
