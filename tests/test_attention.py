"""scaled_dot_product_attention and nn.MultiheadAttention against NumPy written from
PyTorch's documented formulas; compiled equals eager; gradients against finite differences.
``F.scaled_dot_product_attention`` takes PyTorch's signature (``attn_mask``, ``dropout_p``,
``is_causal``, ``scale``; hlotrace.torch.nn.functional's is the same function) beside its
earlier ``mask=``/``causal=``."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.testing.check import eager_then_compiled
from hlotrace.testing.gradcheck import central_differences


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sdpa(q, k, v, allowed=None, add=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if add is not None:
        s = s + add
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return _softmax(s) @ v


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(np.float64) for shape in ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7))]


def test_sdpa_plain_causal_and_masks(qkv):
    q, k, v = qkv
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v).numpy(), _sdpa(q, k, v), rtol=1e-12)
    causal = np.tril(np.ones((5, 6), bool))  # top-left aligned, as PyTorch's is_causal
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, v, causal=True).numpy(), _sdpa(q, k, v, allowed=causal), rtol=1e-12
    )
    mask = np.random.default_rng(1).random((2, 1, 5, 6)) < 0.7
    mask[..., 0] = True  # every query attends something
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, v, mask=mask).numpy(), _sdpa(q, k, v, allowed=mask), rtol=1e-12
    )
    bias = np.random.default_rng(2).standard_normal((5, 6))
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, v, mask=bias).numpy(), _sdpa(q, k, v, add=bias), rtol=1e-12
    )


def test_sdpa_query_that_attends_nothing_is_nan(qkv):
    q, k, v = qkv
    mask = np.ones((5, 6), bool)
    mask[2] = False
    out = F.scaled_dot_product_attention(q, k, v, mask=mask).numpy()
    assert np.isnan(out[:, :, 2]).all() and not np.isnan(np.delete(out, 2, axis=2)).any()


def test_sdpa_shape_errors_name_the_composite():
    with pytest.raises(OpError, match=r"scaled_dot_product_attention.*last dim"):
        F.scaled_dot_product_attention(np.ones((2, 3), np.float32), np.ones((2, 4), np.float32), np.ones((2, 4)))


def test_sdpa_compiled_equals_eager_and_gradient_matches_fd(qkv):
    q, k, v = (ht.tensor(a.astype(np.float32)) for a in qkv)

    def loss(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, causal=True) ** 2).sum()

    step = ht.xla_trace(grad(loss, argnums=(0, 1, 2)))
    eager = [g.numpy() for g in grad(loss, argnums=(0, 1, 2))(q, k, v)]
    step(q, k, v)
    compiled = [g.numpy() for g in step(q, k, v)]
    for c, e in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(c, e, rtol=1e-4, atol=1e-5)
    # Finite differences in float64 on a few elements of each input.
    analytic = grad(loss, argnums=(0, 1, 2))(*qkv)
    central_differences(lambda *a: float(loss(*a).numpy()), list(qkv), [g.numpy() for g in analytic])


def _mha_reference(mha, query, key, value, attn_mask=None, key_padding_mask=None, causal=False):
    """PyTorch's documented MultiheadAttention math, batch_first, in NumPy."""
    w, b = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    e, h = mha.embed_dim, mha.num_heads
    d = e // h

    def heads(x, part):
        y = x @ w[part * e : (part + 1) * e].T + b[part * e : (part + 1) * e]
        return y.reshape(y.shape[0], y.shape[1], h, d).transpose(0, 2, 1, 3)

    q, k, v = heads(query, 0), heads(key, 1), heads(value, 2)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    length, keys = query.shape[1], key.shape[1]
    if causal:
        s = np.where(np.tril(np.ones((length, keys), bool)), s, -np.inf)
    if attn_mask is not None:
        s = np.where(attn_mask, -np.inf, s)
    if key_padding_mask is not None:
        s = np.where(key_padding_mask[:, None, None, :], -np.inf, s)
    p = _softmax(s)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], length, e)
    out = out @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    return out, p.mean(axis=1)


def test_multihead_attention_matches_pytorch_math():
    nn.init.seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    for p in (mha.in_proj_bias, mha.out_proj.bias):  # PyTorch initializes them to zero
        assert not p.numpy().any()
    nn.init.normal_(mha.in_proj_bias)
    nn.init.normal_(mha.out_proj.bias)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 8)).astype(np.float32)
    mem = rng.standard_normal((3, 4, 8)).astype(np.float32)
    out, weights = mha(x, mem, mem)
    ref_out, ref_weights = _mha_reference(mha, x, mem, mem)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(weights.numpy(), ref_weights, rtol=1e-5, atol=1e-6)

    padding = np.zeros((3, 4), bool)
    padding[1, 2:] = True
    blocked = np.zeros((5, 4), bool)
    blocked[0, 1] = True
    out, _ = mha(x, mem, mem, key_padding_mask=padding, attn_mask=blocked)
    ref_out, _ = _mha_reference(mha, x, mem, mem, attn_mask=blocked, key_padding_mask=padding)
    np.testing.assert_allclose(out.numpy(), ref_out, rtol=1e-5, atol=1e-5)

    out, none = mha(x, x, x, is_causal=True, need_weights=False)
    assert none is None
    np.testing.assert_allclose(out.numpy(), _mha_reference(mha, x, x, x, causal=True)[0], rtol=1e-5, atol=1e-5)


def test_multihead_attention_sequence_first_layout_and_errors():
    nn.init.seed(1)
    seq_first = nn.MultiheadAttention(6, 3)
    x = np.random.default_rng(1).standard_normal((4, 2, 6)).astype(np.float32)  # (L, N, E)
    out, weights = seq_first(x, x, x)
    ref_out, ref_weights = _mha_reference(seq_first, x.transpose(1, 0, 2), *[x.transpose(1, 0, 2)] * 2)
    np.testing.assert_allclose(out.numpy(), ref_out.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(weights.numpy(), ref_weights, rtol=1e-5, atol=1e-6)
    with pytest.raises(ht.HlotraceError, match="multiple of num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ht.HlotraceError, match="last dim 6"):
        seq_first(np.ones((4, 2, 5), np.float32), x, x)
    assert [name for name, _ in seq_first.named_parameters()] == [
        "in_proj_weight",
        "in_proj_bias",
        "out_proj.weight",
        "out_proj.bias",
    ]


@pytest.mark.parametrize("batch_first", [True, False])
def test_self_attention_projects_with_one_matmul_and_equals_the_three_matmul_path(batch_first):
    nn.init.seed(2)
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
    nn.init.normal_(mha.in_proj_bias)
    x = np.random.default_rng(2).standard_normal((3, 5, 8)).astype(np.float32)
    params = [mha.in_proj_weight, mha.in_proj_bias]

    def loss(w, b, same):
        mha.in_proj_weight, mha.in_proj_bias = w, b
        q = ht.tensor(x)
        k, v = (q, q) if same else (ht.tensor(x), ht.tensor(x))  # equal values, other objects
        return F.sum(mha(q, k, v, need_weights=False)[0] ** 2)

    originals = [p for p in params]
    try:
        one = grad(lambda w, b: loss(w, b, True), argnums=(0, 1))(*originals)
        three = grad(lambda w, b: loss(w, b, False), argnums=(0, 1))(*originals)
    finally:
        mha.in_proj_weight, mha.in_proj_bias = originals
    for a, b in zip(one, three, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    traced = ht.xla_trace(lambda q, *, net: net(q, q, q, need_weights=False)[0])
    traced(ht.tensor(x), net=mha)
    # in-projection, scores, weights @ v, out-projection: 4 (three projections would make 6)
    assert traced.lowered.text().count("stablehlo.dot_general") == 4


# -- PyTorch's signature -------------------------------------------------------------------------

RNG = np.random.default_rng(36)
QKV = [RNG.standard_normal(s).astype(np.float32) for s in ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3))]


@pytest.mark.parametrize(
    ("kwargs", "reference"),
    [
        ({}, {}),
        ({"is_causal": True}, {"allowed": np.tril(np.ones((5, 6), bool))}),
        ({"scale": 0.3}, {"scale": 0.3}),
        ({"dropout_p": 0.0}, {}),
    ],
    ids=["plain", "causal", "scale", "no-dropout"],
)
def test_sdpa_pytorch_signature(kwargs, reference):
    import hlotrace.torch.nn.functional as torch_F

    got = eager_then_compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs), *QKV, rtol=1e-5)
    np.testing.assert_allclose(got, _sdpa(*QKV, **reference), rtol=1e-5, atol=1e-6)
    assert torch_F.scaled_dot_product_attention is F.scaled_dot_product_attention


def test_sdpa_masks_as_pytorch():
    allowed = RNG.random((5, 6)) > 0.3
    allowed[:, 0] = True
    bias = RNG.standard_normal((5, 6)).astype(np.float32)
    got = eager_then_compiled(
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), *QKV, allowed, rtol=1e-5
    )
    np.testing.assert_allclose(got, _sdpa(*QKV, allowed=allowed), rtol=1e-5, atol=1e-6)
    got = eager_then_compiled(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), *QKV, bias, rtol=1e-5)
    np.testing.assert_allclose(got, _sdpa(*QKV, add=bias), rtol=1e-5, atol=1e-6)
    with pytest.raises(OpError, match="attn_mask or is_causal"):
        F.scaled_dot_product_attention(*QKV, attn_mask=allowed, is_causal=True)
    with pytest.raises(TypeError, match="not both"):
        F.scaled_dot_product_attention(*QKV, attn_mask=allowed, mask=allowed)


def test_sdpa_bool_attn_mask_gradient_matches_finite_differences():
    q64, k64, v64 = (a.astype(np.float64) for a in QKV)
    mask = np.tril(np.ones((5, 6), bool))

    def loss(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=mask) ** 2).sum()

    analytic = grad(loss, argnums=(0, 1, 2))(q64, k64, v64)
    central_differences(lambda *a: float(loss(*a).numpy()), [q64, k64, v64], [g.numpy() for g in analytic], points=6)


def test_sdpa_dropout_drops_attention_weights_from_the_default_generator():
    q, k, v = (ht.tensor(a) for a in QKV)
    ht.random.seed(1)
    first = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    ht.random.seed(1)
    weights = _softmax(QKV[0] @ QKV[1].swapaxes(-1, -2) / 2.0)
    kept = ht.random.uniform(weights.shape).numpy() >= 0.5  # the draw F.dropout makes
    np.testing.assert_allclose(first, np.where(kept, weights / 0.5, 0) @ QKV[2], rtol=1e-5, atol=1e-6)
