"""Transformer layers with PyTorch's structure, parameter names and math:
``TransformerEncoderLayer``, ``TransformerDecoderLayer``, ``TransformerEncoder``,
``TransformerDecoder``.

The attention weights themselves are not dropped out (:class:`MultiheadAttention` has no
dropout); ``dropout`` applies where PyTorch applies it besides: after the attention blocks
and inside and after the feed-forward block.

>>> from hlotrace import nn
>>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
>>> encoder = nn.TransformerEncoder(layer, num_layers=2)
>>> encoder(ht.tensor(np.zeros((2, 5, 16), np.float32))).shape
(2, 5, 16)
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from hlotrace import functional as F
from hlotrace.errors import argument_error, positive_int
from hlotrace.nn.attention import MultiheadAttention
from hlotrace.nn.containers import ModuleList
from hlotrace.nn.dropout import Dropout
from hlotrace.nn.layers import Linear
from hlotrace.nn.module import Module
from hlotrace.nn.normalization import LayerNorm
from hlotrace.tensor import Parameter, tensor

__all__ = ["TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer"]

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation, owner: str) -> Callable:
    if callable(activation):
        return activation
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise argument_error(f"nn.{owner}", "activation", activation, "'relu', 'gelu' or a callable")
    return _ACTIVATIONS[activation]


def clone_module(module: Module) -> Module:
    """A deep copy of ``module`` with fresh copies of its parameters and buffers (the same
    values; what PyTorch's ``TransformerEncoder`` does to its layer)."""
    memo: dict = {}
    for _, p in module.named_parameters():
        memo[id(p)] = Parameter(p.numpy(), dtype=p.dtype)
    for _, b in module.named_buffers():
        memo[id(b)] = tensor(b.numpy(), dtype=b.dtype)
    return copy.deepcopy(module, memo)


def _check_sizes(owner: str, d_model, nhead, dim_feedforward) -> None:
    """The layer's sizes, checked under its own name (not its MultiheadAttention's)."""
    d_model = positive_int(f"nn.{owner}", "d_model", d_model)
    nhead = positive_int(f"nn.{owner}", "nhead", nhead)
    positive_int(f"nn.{owner}", "dim_feedforward", dim_feedforward)
    if d_model % nhead:
        raise argument_error(f"nn.{owner}", "d_model", d_model, f"a multiple of nhead={nhead}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and a
    LayerNorm (after it, or before it with ``norm_first``), as PyTorch's layer.

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``; masks as
    :class:`MultiheadAttention`'s (bool True = not allowed).
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        _check_sizes(type(self).__name__, d_model, nhead, dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation, type(self).__name__)

    def _self_attention(self, x, mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )
        return self.dropout1(out)

    def _feed_forward(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._self_attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over ``memory``, then a feed-forward block, each with a
    residual connection and a LayerNorm (PyTorch's ``nn.TransformerDecoderLayer``).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
    ):
        super().__init__()
        _check_sizes(type(self).__name__, d_model, nhead, dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation, type(self).__name__)

    def _self_attention(self, x, mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )
        return self.dropout1(out)

    def _cross_attention(self, x, memory, mask, key_padding_mask, is_causal):
        out, _ = self.multihead_attn(
            x,
            memory,
            memory,
            attn_mask=mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )
        return self.dropout2(out)

    def _feed_forward(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._cross_attention(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._self_attention(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._cross_attention(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._feed_forward(x))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (each with its own parameters, starting
    from the layer's values, as PyTorch) in ``layers``, then ``norm`` if given."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None):
        super().__init__()
        if not isinstance(encoder_layer, Module):
            wanted = "an nn.Module such as nn.TransformerEncoderLayer (copied num_layers times)"
            raise argument_error("nn.TransformerEncoder", "encoder_layer", encoder_layer, wanted)
        self.num_layers = positive_int("nn.TransformerEncoder", "num_layers", num_layers)
        self.layers = ModuleList([clone_module(encoder_layer) for _ in range(self.num_layers)])
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` in ``layers``, then ``norm`` if given."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None):
        super().__init__()
        if not isinstance(decoder_layer, Module):
            wanted = "an nn.Module such as nn.TransformerDecoderLayer (copied num_layers times)"
            raise argument_error("nn.TransformerDecoder", "decoder_layer", decoder_layer, wanted)
        self.num_layers = positive_int("nn.TransformerDecoder", "num_layers", num_layers)
        self.layers = ModuleList([clone_module(decoder_layer) for _ in range(self.num_layers)])
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ):
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        return x if self.norm is None else self.norm(x)
