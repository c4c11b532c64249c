"""hlotrace.data: ArrayDataset, the Dataset protocol, DataLoader batching, seeded shuffling,
drop_last, device placement, the prefetch thread (order, errors, early stop) and a compiled
training loop fed by the loader."""

import threading
import time

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.data import ArrayDataset, DataLoader, Dataset, TensorDataset, default_collate
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace


def _arrays(n=10):
    return np.arange(n * 3, dtype=np.float32).reshape(n, 3), (np.arange(n) % 4).astype(np.int32)


def _rows(loader):
    """Each batch's first-array rows as NumPy (their first column identifies the sample)."""
    return [batch[0].numpy()[:, 0] / 3 for batch in loader]


def test_array_dataset_and_the_protocol():
    x, y = _arrays()
    ds = ArrayDataset(x, ht.tensor(y))
    assert TensorDataset is ArrayDataset and isinstance(ds, Dataset) and len(ds) == 10
    sample = ds[3]
    np.testing.assert_array_equal(sample[0], x[3])
    assert sample[1] == 3
    np.testing.assert_array_equal(ds.get_batch(np.array([4, 1]))[1], y[[4, 1]])
    with pytest.raises(HlotraceError, match=r"different lengths \(shapes \(10, 3\), \(9,\)\)"):
        ArrayDataset(x, y[:9])
    with pytest.raises(HlotraceError, match="array 0 is a scalar"):
        ArrayDataset(np.float32(1.0))
    with pytest.raises(HlotraceError, match="needs __len__ and __getitem__"):
        DataLoader(object())


@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize(("drop_last", "expected_sizes"), [(False, [4, 4, 2]), (True, [4, 4])])
def test_batches_in_order_with_and_without_drop_last(prefetch, drop_last, expected_sizes):
    x, y = _arrays()
    loader = DataLoader((x, y), batch_size=4, drop_last=drop_last, prefetch=prefetch)
    assert len(loader) == len(expected_sizes)
    batches = list(loader)
    assert [len(b[0]) for b in batches] == expected_sizes
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in batches]), y[: sum(expected_sizes)])
    np.testing.assert_array_equal(batches[0][0].numpy(), x[:4])


def test_shuffling_is_a_permutation_fixed_by_the_seed_and_epoch():
    x, y = _arrays(23)
    a = DataLoader((x, y), batch_size=5, shuffle=True, seed=7)
    b = DataLoader((x, y), batch_size=5, shuffle=True, seed=7, prefetch=0)
    epoch0, epoch1 = _rows(a), _rows(a)
    assert sorted(np.concatenate(epoch0).tolist()) == list(range(23))  # every sample once
    for one, other in zip(epoch0, _rows(b), strict=True):
        np.testing.assert_array_equal(one, other)
    assert not all(np.array_equal(p, q) for p, q in zip(epoch0, epoch1, strict=True))  # a new order per epoch
    expected = np.random.default_rng([7, 1]).permutation(23)
    np.testing.assert_array_equal(np.concatenate(epoch1), expected)
    a.set_epoch(0)
    for one, other in zip(_rows(a), epoch0, strict=True):
        np.testing.assert_array_equal(one, other)
    other_seed = np.concatenate(_rows(DataLoader((x, y), batch_size=5, shuffle=True, seed=8)))
    assert not np.array_equal(other_seed, np.concatenate(epoch0))
    drawn = DataLoader((x, y), batch_size=5, shuffle=True)  # seed=None: drawn once, kept
    again = DataLoader((x, y), batch_size=5, shuffle=True, seed=drawn.seed)
    np.testing.assert_array_equal(np.concatenate(_rows(drawn)), np.concatenate(_rows(again)))


def test_batches_are_device_tensors_by_default_and_place_chooses_otherwise():
    x, y = _arrays()
    x_batch, y_batch = next(iter(DataLoader((x, y), batch_size=4)))
    assert isinstance(x_batch, ht.Tensor) and x_batch._device is not None and x_batch._host is None
    assert x_batch.dtype == np.float32 and y_batch.dtype == np.int32
    host = next(iter(DataLoader((x, y.astype(np.uint8)), batch_size=4, place=ht.tensor)))
    assert host[0]._device is None and host[1].dtype == np.int32  # uint8 widened as ht.tensor does
    seen = []
    next(iter(DataLoader((x, y), batch_size=4, prefetch=0, place=lambda a: seen.append(a.shape) or a)))
    assert seen == [(4, 3), (4,)]


def test_a_dataset_without_get_batch_is_collated_sample_by_sample():
    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.full(2, i, np.float32), "label": i * i}

    batches = list(DataLoader(Squares(), batch_size=2, prefetch=1))
    assert [sorted(b) for b in batches] == [["label", "x"]] * 3
    np.testing.assert_array_equal(batches[1]["label"].numpy(), [4, 9])
    np.testing.assert_array_equal(batches[2]["x"].numpy(), [[4.0, 4.0]])
    stacked = default_collate([(np.zeros(2), 1), (np.ones(2), 2)])
    assert stacked[0].shape == (2, 2) and stacked[1].tolist() == [1, 2]


def test_an_error_in_the_prefetch_thread_is_raised_by_the_loop_at_its_batch():
    class Broken:
        def __len__(self):
            return 6

        def __getitem__(self, i):
            if i == 4:
                raise KeyError(f"sample {i} is missing")
            return np.float32(i)

    it = iter(DataLoader(Broken(), batch_size=2))
    np.testing.assert_array_equal(next(it).numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(next(it).numpy(), [2.0, 3.0])
    with pytest.raises(KeyError, match="sample 4 is missing"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_prefetch_runs_ahead_and_stops_when_the_loop_does():
    x, y = _arrays(40)
    it = iter(DataLoader((x, y), batch_size=2, prefetch=3))
    next(it)
    deadline = time.monotonic() + 10
    while it._queue.qsize() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert it._queue.qsize() == 3  # three batches ready before the loop asks for them
    it.close()
    it._thread.join(timeout=5)
    assert not it._thread.is_alive()
    assert not any(t.name == "hlotrace-data-prefetch" and t is it._thread for t in threading.enumerate())


def test_an_empty_dataset_gives_no_batches_and_bad_arguments_are_refused():
    x, y = _arrays(0)
    loader = DataLoader((x, y), batch_size=4, shuffle=True, seed=0)
    assert len(loader) == 0 and list(loader) == []
    with pytest.raises(HlotraceError, match="batch_size must be a positive int"):
        DataLoader((x, y), batch_size=0)
    with pytest.raises(HlotraceError, match="prefetch must be an int >= 0"):
        DataLoader((x, y), prefetch=-1)


def test_a_compiled_training_loop_fed_by_the_loader_equals_the_eager_one():
    rng = np.random.default_rng(0)
    images, labels = rng.standard_normal((48, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, 48).astype(np.int32)

    def setup():
        nn.init.seed(1)
        net = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
        return net, optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())

    def step(x, y, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    eager, compiled = setup(), setup()
    traced = xla_trace(step)
    device_loader = DataLoader((images, labels), batch_size=16, shuffle=True, seed=3, drop_last=True)
    host_loader = DataLoader((images, labels), batch_size=16, shuffle=True, seed=3, drop_last=True, place=ht.tensor)
    for _ in range(2):
        for (xd, yd), (xh, yh) in zip(device_loader, host_loader, strict=True):
            np.testing.assert_allclose(traced(xd, yd, *compiled).numpy(), step(xh, yh, *eager).numpy(), rtol=1e-5)
    for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert traced.cache_size == 1


_SHARDED_LOOP = """
import numpy as np
import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.data import DataLoader
from hlotrace.jit import xla_trace

mesh = dist.Mesh((4,), ("data",))
rng = np.random.default_rng(0)
images, labels = rng.standard_normal((64, 6)).astype(np.float32), rng.integers(0, 3, 64).astype(np.int32)

def setup():
    nn.init.seed(1)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    return net, optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())

def step(x, y, net, opt, gm):
    with gm:
        loss = F.cross_entropy(net(x), y)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss

eager, compiled = setup(), setup()
traced = xla_trace(step)
sharded = DataLoader((images, labels), batch_size=16, shuffle=True, seed=5,
                     place=lambda a: dist.shard(ht.tensor(a), mesh, dist.P("data")))
host = DataLoader((images, labels), batch_size=16, shuffle=True, seed=5, place=ht.tensor)
for (xs, ys), (xh, yh) in zip(sharded, host, strict=True):
    assert xs.sharding == dist.NamedSharding(mesh, dist.P("data")), xs.sharding
    loss = traced(xs, ys, *compiled)
    np.testing.assert_allclose(loss.numpy(), step(xh, yh, *eager).numpy(), rtol=1e-5)
assert loss.sharding is not None and loss.sharding.mesh == mesh  # the mesh's executable ran
for a, b in zip(compiled[0].parameters(), eager[0].parameters(), strict=True):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
print("sharded loop ok", traced.cache_size)
"""


def test_the_loader_places_batches_on_a_mesh_for_a_data_parallel_step(tmp_path):
    """``place`` shards each batch over a 4-device mesh ("data"); the compiled data-parallel
    step equals the one-device eager loop (own process: the CPU device count is read once)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "sharded_loop.py"
    script.write_text(_SHARDED_LOOP)
    env = {**os.environ, "HLOTRACE_CPU_DEVICES": "4", "HLOTRACE_PLATFORM": "cpu"}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "sharded loop ok 1" in result.stdout  # one program, for the mesh
