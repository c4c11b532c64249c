"""Embedding: a lookup table of ``num_embeddings`` rows of size ``embedding_dim``.

>>> from hlotrace import nn
>>> emb = nn.Embedding(10, 3)
>>> emb(ht.tensor([[1, 2], [9, 0]])).shape
(2, 2, 3)
"""

from __future__ import annotations

import numpy as np

import hlotrace.nn.init as init
from hlotrace import functional as F
from hlotrace.errors import positive_int
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """``weight[indices]`` with ``weight`` of shape (num_embeddings, embedding_dim)
    (``F.embedding``, a ``take`` along axis 0: negative indices count from the end, where
    PyTorch raises; no padding_idx / max_norm).

    Initialized as PyTorch's ``nn.Embedding``: weight from N(0, 1), drawn from
    :mod:`hlotrace.nn.init`'s generator. Indices are int32 or int64 tensors of any shape;
    the result has shape ``indices.shape + (embedding_dim,)``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype="float32"):
        super().__init__()
        self.num_embeddings = positive_int("nn.Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = positive_int("nn.Embedding", "embedding_dim", embedding_dim)
        self.weight = Parameter(np.zeros((self.num_embeddings, self.embedding_dim), np.float32), dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw fresh initial values from N(0, 1) (in place)."""
        init.normal_(self.weight, 0.0, 1.0)

    def forward(self, indices):
        return F.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
