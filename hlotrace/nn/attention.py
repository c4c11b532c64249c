"""``MultiheadAttention`` (PyTorch's ``nn.MultiheadAttention``, without dropout on the weights).

>>> import numpy as np, hlotrace as ht
>>> from hlotrace import nn
>>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
>>> x = ht.tensor(np.ones((3, 5, 8), np.float32))
>>> out, weights = mha(x, x, x)
>>> out.shape, weights.shape
((3, 5, 8), (3, 5, 5))
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.nn.init as init
from hlotrace import functional as F
from hlotrace.errors import HlotraceError, argument_error, positive_int
from hlotrace.nn.layers import Linear
from hlotrace.nn.module import Module
from hlotrace.tensor import Parameter, Tensor

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention with input and output projections.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``; ``weights``
    is None unless ``need_weights`` (then the softmax weights, averaged over heads unless
    ``average_attn_weights=False``). Inputs are ``(L, N, E)``, or ``(N, L, E)`` with
    ``batch_first=True``.

    Masks follow PyTorch's ``nn.MultiheadAttention``: a bool ``attn_mask`` ``(L, S)`` or
    ``(N * num_heads, L, S)`` is True where attention is NOT allowed (the opposite of
    ``F.scaled_dot_product_attention``), a float one is added to the scores; a bool
    ``key_padding_mask`` ``(N, S)`` is True at keys to ignore. ``is_causal=True`` applies
    the causal mask itself (PyTorch treats it as a hint that ``attn_mask`` is causal).

    Initialized as PyTorch: ``in_proj_weight`` (3E, E) Xavier-uniform, ``in_proj_bias`` and
    ``out_proj.bias`` zeros, ``out_proj.weight`` as a Linear's. No dropout on the attention
    weights (apply ``nn.Dropout`` to the output if needed); ``kdim``/``vdim`` must equal E.
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, batch_first: bool = False, dtype="float32"):
        super().__init__()
        embed_dim = positive_int("nn.MultiheadAttention", "embed_dim", embed_dim)
        num_heads = positive_int("nn.MultiheadAttention", "num_heads", num_heads)
        if embed_dim % num_heads:
            raise argument_error(
                "nn.MultiheadAttention", "embed_dim", embed_dim, f"a multiple of num_heads={num_heads}"
            )
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        self.in_proj_weight = Parameter(np.zeros((3 * embed_dim, embed_dim), np.float32), dtype=dtype)
        if bias:
            self.in_proj_bias = Parameter(np.zeros((3 * embed_dim,), np.float32), dtype=dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
        self.out_proj.reset_parameters()
        if self.out_proj.bias is not None:
            init.zeros_(self.out_proj.bias)

    def _project(self, x: Tensor, part: int) -> Tensor:
        """``x @ W_part.T + b_part``, split into heads: (N, L, E) -> (N, H, L, D)."""
        e = self.embed_dim
        w = self.in_proj_weight[part * e : (part + 1) * e]
        y = F.matmul(x, w, transpose_b=True)
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias[part * e : (part + 1) * e]
        return self._heads(y)

    def _heads(self, y: Tensor) -> Tensor:
        n, length = y.shape[0], y.shape[1]
        return F.transpose(F.reshape(y, (n, length, self.num_heads, self.head_dim)), (0, 2, 1, 3))

    def _project_self(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention (query, key and value the same tensor): one (N, L, 3E) matmul, then
        q, k, v are its thirds -- one matmul instead of three forward, and in the backward."""
        e = self.embed_dim
        y = F.matmul(x, self.in_proj_weight, transpose_b=True)
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias
        return tuple(self._heads(y[:, :, part * e : (part + 1) * e]) for part in range(3))

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        same = query is key and key is value  # self-attention: one projection matmul
        if not self.batch_first:
            query, key, value = (F.transpose(t, (1, 0, 2)) for t in (query, key, value))
            if same:
                key = value = query
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != self.embed_dim:
                raise HlotraceError(
                    f"MultiheadAttention: {name} must be 3-d with last dim {self.embed_dim}, got shape {t.shape}"
                )
        n, length, keys = query.shape[0], query.shape[1], key.shape[1]
        if same:
            q, k, v = self._project_self(query)
        else:
            q, k, v = self._project(query, 0), self._project(key, 1), self._project(value, 2)
        scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.head_dim))  # (N, H, L, S)
        if is_causal:
            allowed = F.greater_equal(F.reshape(F.arange(length), (length, 1)), F.arange(keys))
            scores = F.where(allowed, scores, float("-inf"))
        if attn_mask is not None:
            attn_mask = attn_mask if isinstance(attn_mask, Tensor) else F._as_tensor(attn_mask)
            if attn_mask.ndim == 3:
                attn_mask = F.reshape(attn_mask, (n, self.num_heads, length, keys))
            scores = F.where(attn_mask, float("-inf"), scores) if attn_mask.dtype == bool else scores + attn_mask
        if key_padding_mask is not None:
            pad = F.reshape(key_padding_mask, (n, 1, 1, keys))
            scores = F.where(pad, float("-inf"), scores)
        weights = F.softmax(scores, axis=-1)
        out = F.matmul(weights, v)  # (N, H, L, D)
        out = F.reshape(F.transpose(out, (0, 2, 1, 3)), (n, length, self.embed_dim))
        out = self.out_proj(out)
        if not self.batch_first:
            out = F.transpose(out, (1, 0, 2))
        if not need_weights:
            return out, None
        return out, F.mean(weights, axis=1) if average_attn_weights else weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
