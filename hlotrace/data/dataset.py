"""The ``Dataset`` protocol and ``ArrayDataset`` (alias ``TensorDataset``): equal-length
arrays indexed together along their first dim.

A dataset is anything with ``len(dataset)`` and ``dataset[i]`` (one sample: an array, a
tuple of arrays or a dict of arrays). A dataset may also define ``get_batch(indices)``,
returning the stacked batch at once (NumPy fancy indexing); :class:`DataLoader` uses it
when present instead of stacking samples one by one.

>>> import numpy as np
>>> from hlotrace.data import ArrayDataset
>>> ds = ArrayDataset(np.zeros((10, 3), np.float32), np.arange(10))
>>> len(ds), [a.shape for a in ds[2]]
(10, [(3,), ()])
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from hlotrace.errors import HlotraceError
from hlotrace.tensor import Tensor

__all__ = ["ArrayDataset", "Dataset", "TensorDataset"]


@runtime_checkable
class Dataset(Protocol):
    """What :class:`~hlotrace.data.DataLoader` reads: ``len(ds)`` samples, ``ds[i]`` each."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class ArrayDataset:
    """Samples ``(a[i], b[i], ...)`` of equal-length arrays (NumPy arrays, Tensors or
    anything ``np.asarray`` takes); MegEngine's ``ArrayDataset``, PyTorch's ``TensorDataset``.

    The arrays stay on the host; a :class:`~hlotrace.data.DataLoader` gathers each batch
    with one fancy index per array (:meth:`get_batch`) and moves it to the device.
    """

    def __init__(self, *arrays):
        if not arrays:
            raise HlotraceError("ArrayDataset: give at least one array")
        self.arrays = tuple(a.numpy() if isinstance(a, Tensor) else np.asarray(a) for a in arrays)
        for i, a in enumerate(self.arrays):
            if a.ndim == 0:
                raise HlotraceError(f"ArrayDataset: array {i} is a scalar; every array needs a first (sample) dim")
        lengths = {len(a) for a in self.arrays}
        if len(lengths) != 1:
            shapes = ", ".join(str(a.shape) for a in self.arrays)
            raise HlotraceError(f"ArrayDataset: the arrays have different lengths (shapes {shapes})")

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        return tuple(a[index] for a in self.arrays)

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, ...]:
        """The samples at ``indices`` stacked along a new first dim, one gather per array."""
        return tuple(a[indices] for a in self.arrays)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{a.dtype}{list(a.shape)}' for a in self.arrays)})"


TensorDataset = ArrayDataset
