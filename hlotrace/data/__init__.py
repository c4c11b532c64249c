"""Data loading: the ``Dataset`` protocol, ``ArrayDataset``/``TensorDataset`` and a
``DataLoader`` that prefetches batches onto the device in a background thread.

>>> import numpy as np
>>> from hlotrace.data import DataLoader
>>> loader = DataLoader((np.zeros((64, 4), np.float32), np.arange(64) % 3), batch_size=16, shuffle=True, seed=0)
>>> [tuple(t.shape for t in batch) for batch in loader][0]
((16, 4), (16,))
"""

from hlotrace.data.dataset import ArrayDataset, Dataset, TensorDataset
from hlotrace.data.loader import DataLoader, default_collate, to_device

__all__ = ["ArrayDataset", "DataLoader", "Dataset", "TensorDataset", "default_collate", "to_device"]
