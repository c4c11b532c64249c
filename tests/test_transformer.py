"""Transformer encoder/decoder layers against a NumPy reference of PyTorch's math (post- and
pre-norm, masks), PyTorch's state_dict keys, independent layer copies, and a compiled
encoder/decoder training step equal to the eager one."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _np_layer_norm(x, norm):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + norm.eps) * norm.weight.numpy() + norm.bias.numpy()


def _np_attention(mha, q_in, kv_in, not_allowed=None):
    """PyTorch's multi-head attention, batch first; ``not_allowed`` (N, L, S) bool."""
    e, h = mha.embed_dim, mha.num_heads
    w, b = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    q, k, v = q_in @ w[:e].T + b[:e], kv_in @ w[e : 2 * e].T + b[e : 2 * e], kv_in @ w[2 * e :].T + b[2 * e :]

    def heads(t):
        return t.reshape(t.shape[0], t.shape[1], h, e // h).transpose(0, 2, 1, 3)

    scores = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(e // h)
    if not_allowed is not None:
        scores = np.where(not_allowed[:, None], -np.inf, scores)
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    out = (weights @ heads(v)).transpose(0, 2, 1, 3).reshape(q.shape)
    return out @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()


def _np_feed_forward(layer, x):
    hidden = np.maximum(x @ layer.linear1.weight.numpy().T + layer.linear1.bias.numpy(), 0)
    return hidden @ layer.linear2.weight.numpy().T + layer.linear2.bias.numpy()


def _np_encoder_layer(layer, x, not_allowed):
    if layer.norm_first:
        x = x + _np_attention(
            layer.self_attn, _np_layer_norm(x, layer.norm1), _np_layer_norm(x, layer.norm1), not_allowed
        )
        return x + _np_feed_forward(layer, _np_layer_norm(x, layer.norm2))
    x = _np_layer_norm(x + _np_attention(layer.self_attn, x, x, not_allowed), layer.norm1)
    return _np_layer_norm(x + _np_feed_forward(layer, x), layer.norm2)


def _np_decoder_layer(layer, x, memory, not_allowed):
    if layer.norm_first:
        y = _np_layer_norm(x, layer.norm1)
        x = x + _np_attention(layer.self_attn, y, y, not_allowed)
        x = x + _np_attention(layer.multihead_attn, _np_layer_norm(x, layer.norm2), memory)
        return x + _np_feed_forward(layer, _np_layer_norm(x, layer.norm3))
    x = _np_layer_norm(x + _np_attention(layer.self_attn, x, x, not_allowed), layer.norm1)
    x = _np_layer_norm(x + _np_attention(layer.multihead_attn, x, memory), layer.norm2)
    return _np_layer_norm(x + _np_feed_forward(layer, x), layer.norm3)


def _randomize(module, seed):
    rng = np.random.default_rng(seed)
    for p in module.parameters():
        p._assign(ht.tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_numpy_with_causal_and_padding_masks(norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first)
    _randomize(layer, 1)
    x = _rand(2, 5, 8, seed=2)
    padding = np.zeros((2, 5), bool)
    padding[1, 3:] = True
    causal = np.triu(np.ones((5, 5), bool), 1)
    expected = _np_encoder_layer(layer, x, causal[None] | padding[:, None, :])
    got = layer(ht.tensor(x), src_key_padding_mask=ht.tensor(padding), is_causal=True).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    got = layer(ht.tensor(x), src_mask=ht.tensor(causal), src_key_padding_mask=ht.tensor(padding)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    # Sequence-first layout gives the same numbers transposed.
    seq_first = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=norm_first)
    seq_first.load_state_dict(layer.state_dict())
    got = seq_first(ht.tensor(x.transpose(1, 0, 2)), src_key_padding_mask=ht.tensor(padding), is_causal=True)
    np.testing.assert_allclose(got.numpy().transpose(1, 0, 2), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_numpy(norm_first):
    layer = nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, dropout=0.0, batch_first=True, norm_first=norm_first)
    _randomize(layer, 3)
    x, memory = _rand(2, 4, 8, seed=4), _rand(2, 6, 8, seed=5)
    causal = np.triu(np.ones((4, 4), bool), 1)
    expected = _np_decoder_layer(layer, x, memory, np.broadcast_to(causal, (2, 4, 4)))
    got = layer(ht.tensor(x), ht.tensor(memory), tgt_is_causal=True).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_pytorch_keys_and_independent_copies():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    encoder = nn.TransformerEncoder(layer, num_layers=3, norm=nn.LayerNorm(8))
    keys = list(encoder.state_dict())
    assert keys[:12] == [
        "layers.0.self_attn.in_proj_weight",
        "layers.0.self_attn.in_proj_bias",
        "layers.0.self_attn.out_proj.weight",
        "layers.0.self_attn.out_proj.bias",
        "layers.0.linear1.weight",
        "layers.0.linear1.bias",
        "layers.0.linear2.weight",
        "layers.0.linear2.bias",
        "layers.0.norm1.weight",
        "layers.0.norm1.bias",
        "layers.0.norm2.weight",
        "layers.0.norm2.bias",
    ]
    assert keys[-2:] == ["norm.weight", "norm.bias"] and len(keys) == 3 * 12 + 2
    first, second = encoder.layers[0].linear1.weight, encoder.layers[1].linear1.weight
    assert first is not second and first is not layer.linear1.weight
    np.testing.assert_array_equal(first.numpy(), second.numpy())  # copies of one layer, as PyTorch
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16), num_layers=2)
    assert "layers.1.multihead_attn.out_proj.weight" in decoder.state_dict()
    assert "layers.0.norm3.bias" in decoder.state_dict()
    with pytest.raises(
        HlotraceError, match=r"nn.TransformerEncoderLayer: activation='swish': expected 'relu', 'gelu' or a callable"
    ):
        nn.TransformerEncoderLayer(8, 2, activation="swish")


def test_encoder_decoder_trains_compiled_as_eagerly():
    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(11, 16)
            enc = nn.TransformerEncoderLayer(
                16, 4, 32, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            dec = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(enc, 2)
            self.decoder = nn.TransformerDecoder(dec, 2, norm=nn.LayerNorm(16))
            self.head = nn.Linear(16, 11)

        def forward(self, src, tgt):
            memory = self.encoder(self.embed(src))
            return self.head(self.decoder(self.embed(tgt), memory, tgt_is_causal=True))

    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def step(src, tgt, labels, net, opt, gm):
        with gm:
            logits = net(src, tgt)
            loss = criterion(F.reshape(logits, (-1, 11)), F.reshape(labels, (-1,)))
            gm.backward(loss)
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step().clear_grad()
        return loss

    def setup():
        nn.init.seed(4)
        net = Seq2Seq()
        # SGD, not Adam: the key bias has a zero gradient (softmax ignores it), whose rounding
        # noise Adam would scale up to full steps.
        return net, optim.SGD(net.parameters(), lr=0.05, momentum=0.9), GradManager().attach(net.parameters())

    eager, compiled = setup(), setup()
    traced = xla_trace(step)
    rng = np.random.default_rng(0)
    for _ in range(3):
        src, tgt = rng.integers(1, 11, (4, 6)).astype(np.int32), rng.integers(1, 11, (4, 5)).astype(np.int32)
        labels = np.roll(tgt, -1, axis=1)
        labels[:, -1] = -100
        args = [ht.tensor(a) for a in (src, tgt, labels)]
        np.testing.assert_allclose(traced(*args, *compiled).numpy(), step(*args, *eager).numpy(), rtol=1e-5)
    for (name, a), b in zip(compiled[0].state_dict().items(), eager[0].state_dict().values(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-6, err_msg=name)
    assert traced.cache_size == 1
