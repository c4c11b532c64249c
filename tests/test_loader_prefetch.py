"""The DataLoader's prefetch thread paces itself (hlotrace/data/loader.py, ``_Prefetcher._pace``):
while a batch is ready it waits a share of the loop's period after the loop takes one, so its
Python work (gathering, stacking) falls while the step runs on the device rather than while
the loop's thread launches it. benchmarks/bench_loader.py measures the effect; these tests pin
the policy with a fake clock (no wall-time assertions), and the batches' order and values."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.data.loader as loader_module
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.data import DataLoader
from hlotrace.jit import xla_trace


class _Recorder:
    """Stands in for the thread's stop event: records the waits asked of it."""

    def __init__(self):
        self.waits: list[float] = []

    def wait(self, seconds):
        self.waits.append(seconds)
        return False

    def is_set(self):
        return False

    def set(self):
        pass


def _idle_prefetcher(monkeypatch, now: float):
    """A _Prefetcher whose thread has finished (an epoch without batches), a fake clock at
    ``now`` and a recorded stop event, to call ``_pace`` on directly."""
    loader = DataLoader((np.zeros((4, 2), np.float32),), batch_size=2, prefetch=2)
    prefetcher = loader_module._Prefetcher(loader, [])
    prefetcher._thread.join(timeout=10)
    assert prefetcher._queue.get() is loader_module._DONE
    monkeypatch.setattr(loader_module.time, "perf_counter", lambda: now)
    prefetcher._stop = _Recorder()
    return prefetcher


@pytest.mark.parametrize(
    ("period", "load_time", "since_taken", "ready", "expected"),
    [
        (0.050, 0.001, 0.0, True, 0.010),  # ahead: wait a fifth of the period after the take
        (0.050, 0.001, 0.004, True, 0.006),  # part of it has passed already
        (0.050, 0.001, 0.020, True, None),  # the step was launched long ago: load now
        (0.050, 0.022, 0.0, True, 0.006),  # never so long that the next batch would be late
        (0.050, 0.030, 0.0, True, None),  # the loader is the bottleneck: no wait at all
        (0.050, 0.001, 0.0, False, None),  # nothing ready: the loop is waiting, load now
    ],
)
def test_the_thread_waits_a_share_of_the_period_only_while_ahead(
    monkeypatch, period, load_time, since_taken, ready, expected
):
    prefetcher = _idle_prefetcher(monkeypatch, now=100.0)
    prefetcher._taken_at = 100.0 - since_taken
    prefetcher._period, prefetcher._load_time = period, load_time
    if ready:
        prefetcher._queue.put("a batch")
    prefetcher._pace()
    if expected is None:
        assert prefetcher._stop.waits == []
    else:
        assert prefetcher._stop.waits == [pytest.approx(expected)]


def test_no_wait_before_the_loop_has_taken_two_batches(monkeypatch):
    prefetcher = _idle_prefetcher(monkeypatch, now=5.0)
    prefetcher._queue.put("a batch")
    prefetcher._pace()  # nothing measured yet
    prefetcher._taken_at, prefetcher._load_time = 5.0, 0.001
    prefetcher._pace()  # no period yet (one take)
    assert prefetcher._stop.waits == []


def test_the_loop_measures_its_period_and_the_thread_its_load_time():
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    it = iter(DataLoader((x,), batch_size=2, prefetch=2))
    batches = [b[0].numpy() for b in it]
    np.testing.assert_array_equal(np.concatenate(batches), x)  # order and values unchanged
    assert it._period is not None and it._period >= 0
    assert it._load_time is not None and it._load_time > 0


def test_a_paced_loader_feeds_a_compiled_step_as_the_eager_loop_does():
    """Two epochs of a compiled step fed with prefetch equal the same loop fed without it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 6)).astype(np.float32)
    y = (np.arange(48) % 3).astype(np.int32)

    def train(prefetch):
        ht.random.seed(0)
        net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
        opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        gm = GradManager().attach(net.parameters())

        @xla_trace
        def step(x, y, *, net, opt, gm):
            with gm:
                loss = F.cross_entropy(net(x), y)
                gm.backward(loss)
            opt.step().clear_grad()
            return loss

        loader = DataLoader((x, y), batch_size=8, shuffle=True, seed=3, drop_last=True, prefetch=prefetch)
        losses = [float(step(bx, by, net=net, opt=opt, gm=gm)) for _ in range(2) for bx, by in loader]
        return losses, net.state_dict()

    (paced, paced_state), (inline, inline_state) = train(2), train(0)
    np.testing.assert_array_equal(paced, inline)
    for key, value in inline_state.items():
        np.testing.assert_array_equal(paced_state[key], value, err_msg=key)
    assert int(paced_state["1.num_batches_tracked"]) == 12


@pytest.mark.parametrize("n", [0, 7, 8, 16, 17])
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_len_is_the_number_of_batches_given(n, drop_last, prefetch):
    """drop_last with n a multiple of batch_size kept all but the last full batch (the loop gave
    len(loader) - 1 batches): every sample of a full batch is given."""
    x = np.arange(n, dtype=np.float32)
    loader = DataLoader((x,), batch_size=8, shuffle=True, seed=0, drop_last=drop_last, prefetch=prefetch)
    batches = [b[0].numpy() for b in loader]
    assert len(batches) == len(loader) == (n // 8 if drop_last else -(-n // 8))
    given = np.sort(np.concatenate(batches)) if batches else np.zeros(0, np.float32)
    assert len(given) == (n // 8 * 8 if drop_last else n) and len(set(given.tolist())) == len(given)
