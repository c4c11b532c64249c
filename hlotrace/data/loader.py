"""``DataLoader``: batches of a dataset, shuffled from a seed, moved to the device by a
background thread while the step runs.

>>> import numpy as np
>>> from hlotrace.data import DataLoader
>>> images, labels = np.zeros((100, 1, 8, 8), np.float32), np.arange(100) % 10
>>> loader = DataLoader((images, labels), batch_size=32, shuffle=True, seed=0, drop_last=True)
>>> for x, y in loader:          # x, y: Tensors already on the device
...     loss = step(x, y, net, opt, gm)
>>> len(loader)
3

Order: epoch ``e`` (the loader counts its iterations; :meth:`DataLoader.set_epoch` sets it)
visits ``np.random.default_rng([seed, e]).permutation(len(dataset))`` when shuffling, so a
seed gives the same batches in every run and every epoch a different order.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.data.dataset import ArrayDataset, Dataset
from hlotrace.errors import HlotraceError
from hlotrace.metrics import count
from hlotrace.tensor import Tensor

__all__ = ["DataLoader", "default_collate", "to_device"]

_PUTS: dict = {}  # (shape, dtype) -> the runtime's host-to-device copy for that array kind


def to_device(array) -> Tensor:
    """A Tensor whose value is ``array`` copied onto hlotrace's default device now (NumPy's
    dtype rules of :func:`hlotrace.tensor`: uint8 becomes int32, 64-bit stays 64-bit)."""
    if isinstance(array, Tensor):
        array = array.numpy()
    array = np.asarray(array)
    array = np.ascontiguousarray(array, dtype=dt.canonicalize(array.dtype))
    key = (array.shape, array.dtype)
    put = _PUTS.get(key)
    if put is None:
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax
        from hlotrace import runtime  # lazy: loads runtime (7 modules)

        if len(_PUTS) > 64:  # shapes of a long-running process's last batches, bounded
            _PUTS.clear()
        put = _PUTS[key] = jaxlib_compat.make_host_to_device(array.shape, array.dtype, runtime.default_device())
    count("host_to_device_bytes", array.nbytes)
    return Tensor._from_device(put(array))


def default_collate(samples: list):
    """Stack a list of samples field by field: arrays or numbers into one array with a new
    first dim; tuples/lists and dicts of them recursively."""
    first = samples[0]
    if isinstance(first, Mapping):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, tuple | list):
        return tuple(default_collate([s[i] for s in samples]) for i in range(len(first)))
    return np.stack([s.numpy() if isinstance(s, Tensor) else np.asarray(s) for s in samples])


def _place_all(batch, place: Callable):
    if isinstance(batch, Mapping):
        return {key: _place_all(value, place) for key, value in batch.items()}
    if isinstance(batch, tuple | list):
        return tuple(_place_all(value, place) for value in batch)
    return place(batch)


class _Failure:
    """An exception raised in the prefetch thread, re-raised by the iterating thread."""

    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` (PyTorch/MegEngine style).

    ``dataset``: a :class:`~hlotrace.data.Dataset` (``len`` and ``[i]``; ``get_batch(indices)``
    is used when defined), or a tuple/list of equal-length arrays (an
    :class:`~hlotrace.data.ArrayDataset` is made of them). ``shuffle`` with ``seed``
    (an int; None draws one, kept in ``loader.seed``) orders each epoch; ``drop_last`` drops
    a final short batch. Each batch comes as the samples' structure (a tuple of Tensors for
    tuple samples) of Tensors placed by ``place`` (default :func:`to_device`; ``ht.tensor``
    keeps them on the host; ``lambda a: dist.make_global(a, mesh, P("data"))`` shards them).
    With ``prefetch=n > 0`` a background thread gathers and places up to ``n`` batches ahead,
    so a compiled step does not wait on the host; ``prefetch=0`` does it all in the loop.
    An exception in the thread is raised by the loop at the batch it concerns.
    """

    def __init__(
        self,
        dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        seed: int | None = None,
        drop_last: bool = False,
        prefetch: int = 2,
        place: Callable | None = None,
        collate_fn: Callable | None = None,
    ):
        if isinstance(dataset, tuple | list):
            dataset = ArrayDataset(*dataset)
        if not isinstance(dataset, Dataset):
            raise HlotraceError(
                f"DataLoader: a dataset needs __len__ and __getitem__ (or give a tuple of arrays), "
                f"got {type(dataset).__name__}"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise HlotraceError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise HlotraceError(f"DataLoader: prefetch must be an int >= 0, got {prefetch!r}")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.drop_last = bool(drop_last)
        self.prefetch = prefetch
        self.place = to_device if place is None else place
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.epoch = 0

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its shuffled order)."""
        self.epoch = int(epoch)

    def batch_indices(self, epoch: int) -> list[np.ndarray]:
        """The sample indices of each batch of ``epoch``."""
        n = len(self.dataset)
        order = np.random.default_rng([self.seed, epoch]).permutation(n) if self.shuffle else np.arange(n)
        # drop_last: every stop up to n itself (n a multiple of batch_size keeps its last batch)
        stops = range(self.batch_size, n + (1 if self.drop_last else self.batch_size), self.batch_size)
        return [order[stop - self.batch_size : min(stop, n)] for stop in stops]

    def _load(self, indices: np.ndarray):
        get_batch = getattr(self.dataset, "get_batch", None)
        if get_batch is not None and self.collate_fn is default_collate:
            batch = get_batch(indices)
        else:
            batch = self.collate_fn([self.dataset[int(i)] for i in indices])
        return _place_all(batch, self.place)

    def __iter__(self) -> Iterator:
        batches = self.batch_indices(self.epoch)
        self.epoch += 1
        if self.prefetch == 0:
            return (self._load(indices) for indices in batches)
        return _Prefetcher(self, batches)

    def __repr__(self) -> str:
        return (
            f"DataLoader({type(self.dataset).__name__} of {len(self.dataset)}, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, seed={self.seed}, drop_last={self.drop_last}, prefetch={self.prefetch})"
        )


# Pacing of the prefetch thread (see _Prefetcher._pace): the share of the loop's period between
# two batches that the thread waits after the loop takes one, and the smoothing of the two
# running means it keeps (the loop's period, its own time per batch).
_PACE_SHARE = 0.2
_SMOOTHING = 0.2


class _Prefetcher:
    """One epoch's batches, loaded and placed by a daemon thread up to ``prefetch`` ahead.

    The thread's gathering and stacking is Python holding the GIL. Started the moment the loop
    takes a batch, it would run exactly while the loop's thread calls the compiled step (its
    argument handling, cache lookup and launch are Python too) and delay that launch by up to
    a batch's host work (measured: 1.2 ms of a 55 ms ResNet step, in about half the runs).
    So, while it is ahead (a batch ready in the queue), the thread waits ``_PACE_SHARE`` of the
    loop's period before loading the next one: the launch is done by then and the step runs
    on the device without the GIL. The wait never makes it late: it is at most the period less
    twice its own time per batch, and none when the queue is empty (the loop is waiting).
    """

    def __init__(self, loader: DataLoader, batches: list):
        self._queue: queue.Queue = queue.Queue(maxsize=loader.prefetch)
        self._stop = threading.Event()
        self._finished = False
        self._taken_at: float | None = None  # when the loop last took a batch (perf_counter)
        self._period: float | None = None  # running mean of the loop's time between batches
        self._load_time: float | None = None  # running mean of this thread's time per batch
        self._thread = threading.Thread(
            target=self._work, args=(loader, batches), name="hlotrace-data-prefetch", daemon=True
        )
        self._thread.start()

    def _pace(self) -> None:
        """Wait until the loop's step has been launched (see the class docstring)."""
        taken_at, period, load_time = self._taken_at, self._period, self._load_time
        if taken_at is None or period is None or load_time is None or self._queue.empty():
            return
        delay = min(_PACE_SHARE * period, period - 2 * load_time) - (time.perf_counter() - taken_at)
        if delay > 0:
            self._stop.wait(delay)

    def _offer(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, loader: DataLoader, batches: list) -> None:
        try:
            for indices in batches:
                self._pace()
                start = time.perf_counter()
                batch = loader._load(indices)
                self._load_time = _smoothed(self._load_time, time.perf_counter() - start)
                if not self._offer(batch):
                    return
        except BaseException as exc:  # handed to the iterating thread, raised there
            self._offer(_Failure(exc))
            return
        self._offer(_DONE)

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item = self._queue.get()
        now = time.perf_counter()
        if self._taken_at is not None:
            self._period = _smoothed(self._period, now - self._taken_at)
        self._taken_at = now
        if item is _DONE:
            self._finished = True
            self._thread.join()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        return item

    def close(self) -> None:
        """Stop the thread (a loop that breaks early leaves it to the garbage collector)."""
        self._finished = True
        self._stop.set()

    def __del__(self):
        self._stop.set()


def _smoothed(mean: float | None, value: float) -> float:
    return value if mean is None else mean + _SMOOTHING * (value - mean)
