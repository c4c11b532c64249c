"""``hlotrace.torch`` (issue 36: a PyTorch model file runs with its imports swapped): every
function against a NumPy reference, eagerly and compiled (``xla_trace``: the compiled call
equals the eager one); ``interpolate``/``nn.Upsample`` against a reference written from
PyTorch's documented coordinate formulas (hand-checked values too), with gradients against
finite differences and the reference's adjoint. Elsewhere: ``F.scaled_dot_product_attention``'s
PyTorch signature in tests/test_attention.py; ``no_grad``, ``loss.backward()``, ``zero_grad``
and ``xla_trace(without_host=, symbolic_shape=)`` in tests/test_torch_spellings.py."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.torch as torch
import hlotrace.torch.nn.functional as F
from hlotrace.autodiff import grad
from hlotrace.errors import ArgumentError, OpError
from hlotrace.jit import xla_trace
from hlotrace.torch import nn, optim

RNG = np.random.default_rng(360)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def _eager_and_compiled(fn, *arrays, rtol=1e-6, atol=1e-6):
    """``fn`` on tensors of ``arrays``: its eager result (as NumPy), after asserting that the
    compiled call (the second one, running the executable) equals it."""
    eager = fn(*[ht.tensor(a) for a in arrays])
    step = xla_trace(fn)
    step(*[ht.tensor(a) for a in arrays])  # the recording call
    compiled = step(*[ht.tensor(a) for a in arrays])
    eager_list = list(eager) if isinstance(eager, tuple | list) else [eager]
    compiled_list = list(compiled) if isinstance(compiled, tuple | list) else [compiled]
    for e, c in zip(eager_list, compiled_list, strict=True):
        assert c.dtype == e.dtype and c.shape == e.shape
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=rtol, atol=atol)
    return [e.numpy() for e in eager_list] if isinstance(eager, tuple | list) else eager.numpy()


# -- the imports a PyTorch file uses ---------------------------------------------------------


def test_the_imports_a_pytorch_file_writes():
    import hlotrace.torch.nn as torch_nn
    from hlotrace.torch.optim import lr_scheduler

    assert torch_nn is nn and torch.nn.functional is F and torch.optim is optim
    assert lr_scheduler is ht.optim.lr_scheduler
    assert nn.Linear is ht.nn.Linear and nn.Parameter is ht.Parameter and nn.init is ht.nn.init
    assert torch.Tensor is ht.Tensor and isinstance(torch.ones(1), torch.Tensor)
    assert (torch.long, torch.int64, torch.int32, torch.float32, torch.float16, torch.bfloat16, torch.bool) == (
        np.dtype(np.int64),
        np.dtype(np.int64),
        np.dtype(np.int32),
        np.dtype(np.float32),
        np.dtype(np.float16),
        ht.dtypes.bfloat16,
        np.dtype(np.bool_),
    )
    assert torch.float is torch.float32 and torch.double is torch.float64 and torch.half is torch.float16
    assert isinstance(torch.ones(1).dtype, torch.dtype)


# -- creation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: torch.zeros(2, 3), np.zeros((2, 3), np.float32)),
        (lambda: torch.ones((2, 3), dtype=torch.int32), np.ones((2, 3), np.int32)),
        (lambda: torch.ones([4]), np.ones(4, np.float32)),
        (lambda: torch.empty(2, 1), np.zeros((2, 1), np.float32)),
        (lambda: torch.full((2, 2), 1.5), np.full((2, 2), 1.5, np.float32)),
        (lambda: torch.full((3,), 7, dtype=torch.long), np.full(3, 7, np.int64)),
        (lambda: torch.arange(5), np.arange(5, dtype=np.int32)),
        (lambda: torch.arange(0, 6, 2, dtype=torch.long, device="cpu"), np.arange(0, 6, 2, dtype=np.int64)),
        (lambda: torch.arange(0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25, dtype=np.float32)),
        (lambda: torch.linspace(-1, 1, 5), np.linspace(-1, 1, 5, dtype=np.float32)),
        (lambda: torch.eye(3, 2), np.eye(3, 2, dtype=np.float32)),
        (lambda: torch.tensor([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int32)),
        (lambda: torch.tensor([1.0, 2.0], dtype=torch.float64), np.array([1.0, 2.0])),
        (lambda: torch.from_numpy(np.arange(3, dtype=np.int64)), np.arange(3, dtype=np.int64)),
        (lambda: torch.zeros_like(torch.ones(2, dtype=torch.int32)), np.zeros(2, np.int32)),
        (lambda: torch.ones_like(torch.zeros(2), dtype=torch.bool), np.ones(2, np.bool_)),
        (lambda: torch.full_like(torch.zeros(2), 3.0), np.full(2, 3.0, np.float32)),
    ],
    ids=lambda v: "" if callable(v) else str(v.dtype),
)
def test_creation_functions_eager_and_compiled(make, expected):
    got = _eager_and_compiled(make)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_devices_are_checked_as_tensor_to_checks_them():
    assert torch.zeros(2, device="cuda:0").shape == (2,)
    assert torch.device("cuda").type == "cuda" and torch.device("cuda", 1).index == 1
    assert torch.ones(1).to(torch.device("cpu")).shape == (1,)
    with pytest.raises(TypeError, match="device='gpu0x' is not a device"):
        torch.ones(2, device="gpu0x")
    with pytest.raises(ArgumentError, match=r"torch\.zeros: size"):
        torch.zeros(2, -1)


def test_random_draws_follow_manual_seed():
    torch.manual_seed(5)
    a, b = torch.randn(3, 4), torch.rand(1000)
    torch.manual_seed(5)
    np.testing.assert_array_equal(torch.randn(3, 4).numpy(), a.numpy())
    assert a.dtype == np.float32 and b.numpy().min() >= 0 and b.numpy().max() < 1
    ints = torch.randint(2, 5, (100,))
    assert ints.dtype == np.int32 and set(np.unique(ints.numpy())) <= {2, 3, 4}
    assert sorted(torch.randperm(6).numpy().tolist()) == list(range(6))
    assert torch.randn_like(torch.zeros(2, 3, dtype=torch.float64)).dtype == np.float64


# -- math and shapes ----------------------------------------------------------------------------

A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize(
    ("name", "fn", "args", "reference"),
    [
        ("cat", lambda a: torch.cat([a, a * 2], dim=1), [A], lambda a: np.concatenate([a, a * 2], 1)),
        ("concat", lambda a: torch.concat((a, a), 0), [A], lambda a: np.concatenate([a, a], 0)),
        ("stack", lambda a: torch.stack([a, -a], dim=-1), [A], lambda a: np.stack([a, -a], -1)),
        ("tril", lambda a: torch.tril(a, diagonal=-1), [A], lambda a: np.tril(a, -1)),
        ("triu", lambda a: torch.triu(a, 1), [A], lambda a: np.triu(a, 1)),
        ("flatten", lambda x: torch.flatten(x, 1), [X], lambda x: x.reshape(2, 12)),
        ("transpose", lambda x: torch.transpose(x, 0, 2), [X], lambda x: x.swapaxes(0, 2)),
        ("permute", lambda x: torch.permute(x, (2, 0, 1)), [X], lambda x: x.transpose(2, 0, 1)),
        ("squeeze-other-size-stays", lambda x: torch.squeeze(x[:1], 1), [X], lambda x: x[:1]),
        ("unsqueeze", lambda a: torch.unsqueeze(a, 1), [A], lambda a: a[:, None]),
        ("where", lambda a: torch.where(a > 0, a, torch.zeros_like(a)), [A], lambda a: np.where(a > 0, a, 0)),
        ("matmul", torch.matmul, [A, B], np.matmul),
        ("mm", torch.mm, [A, B], np.matmul),
        ("softmax", lambda a: torch.softmax(a, dim=1), [A], lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True)),
        ("log_softmax", lambda a: torch.log_softmax(a, 0), [A], lambda a: a - np.log(np.exp(a).sum(0, keepdims=True))),
        ("sum", lambda x: torch.sum(x, dim=(0, 2), keepdim=True), [X], lambda x: x.sum((0, 2), keepdims=True)),
        ("mean", lambda x: torch.mean(x, -1), [X], lambda x: x.mean(-1)),
        ("max-all", torch.max, [A], np.max),
        ("max-elementwise", torch.max, [A, A[::-1].copy()], np.maximum),
        ("clamp", lambda a: torch.clamp(a, min=-0.5, max=0.5), [A], lambda a: np.clip(a, -0.5, 0.5)),
        ("clamp-tensor", lambda a, b: torch.clamp(a, min=b), [A, A[::-1].copy()], np.maximum),
        ("exp", torch.exp, [A], np.exp),
        ("rsqrt", lambda a: torch.rsqrt(torch.abs(a) + 1), [A], lambda a: 1 / np.sqrt(np.abs(a) + 1)),
        ("pow", lambda a: torch.pow(a, 2), [A], np.square),
        ("cumsum", lambda a: torch.cumsum(a, dim=1), [A], lambda a: np.cumsum(a, 1)),
        (
            "gather",
            lambda a, i: torch.gather(a, 1, i),
            [A, np.array([[0, 3], [1, 1], [2, 0]], np.int32)],
            lambda a, i: np.take_along_axis(a, i, 1),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_math_and_shapes_against_numpy(name, fn, args, reference):
    got = _eager_and_compiled(fn, *args)
    np.testing.assert_allclose(got, reference(*args), rtol=1e-5, atol=1e-6)


def test_the_pairs_and_lists_pytorch_returns():
    values, indices = _eager_and_compiled(lambda a: tuple(torch.max(a, dim=1)), A)  # unpacked to return it
    np.testing.assert_array_equal(values, A.max(1))
    np.testing.assert_array_equal(indices, A.argmax(1))
    values, indices = _eager_and_compiled(lambda a: tuple(torch.min(a, 0, keepdim=True)), A)
    np.testing.assert_array_equal(values, A.min(0, keepdims=True))
    values, indices = _eager_and_compiled(lambda a: tuple(torch.topk(a, 2, dim=1)), A)
    np.testing.assert_array_equal(values, -np.sort(-A, 1)[:, :2])
    np.testing.assert_array_equal(indices, np.argsort(-A, 1)[:, :2])
    parts = _eager_and_compiled(lambda x: torch.split(x, 3, dim=2), X)
    assert [p.shape for p in parts] == [(2, 3, 3), (2, 3, 1)]
    np.testing.assert_array_equal(parts[1], X[:, :, 3:])
    assert [c.shape for c in torch.chunk(ht.tensor(X), 2, dim=2)] == [(2, 3, 2), (2, 3, 2)]
    assert torch.numel(ht.tensor(X)) == 24
    assert torch.allclose(ht.tensor(A), ht.tensor(A + 1e-7)) and not torch.allclose(ht.tensor(A), ht.tensor(A + 1))
    with pytest.raises(TypeError, match="one-argument form"):
        torch.where(ht.tensor(A) > 0)


# The rest of the table: the remaining torch.* mappings, each against NumPy, eager and compiled.
P = np.abs(A) + 0.5  # positive
INDICES = np.array([[2, 0, 3], [1, 1, 0]], np.int32)


@pytest.mark.parametrize(
    ("name", "fn", "args", "reference"),
    [
        ("sin", torch.sin, [A], np.sin),
        ("cos", torch.cos, [A], np.cos),
        ("tanh", torch.tanh, [A], np.tanh),
        ("sigmoid", torch.sigmoid, [A], lambda a: 1 / (1 + np.exp(-a))),
        ("relu", torch.relu, [A], lambda a: np.maximum(a, 0)),
        ("sqrt", torch.sqrt, [P], np.sqrt),
        ("log", torch.log, [P], np.log),
        ("square", torch.square, [A], np.square),
        ("isnan", torch.isnan, [np.where(A > 0, A, np.nan)], np.isnan),
        ("isinf", lambda a: torch.isinf(1 / (a * 0)), [A], lambda a: np.ones(a.shape, bool)),
        ("isfinite", torch.isfinite, [A], np.isfinite),
        ("minimum", torch.minimum, [A, P], np.minimum),
        ("prod", lambda a: torch.prod(a, dim=1, keepdim=True), [P], lambda a: a.prod(1, keepdims=True)),
        ("argmax", lambda a: torch.argmax(a, dim=1), [A], lambda a: a.argmax(1)),
        ("argmin", lambda a: torch.argmin(a, 0, keepdim=True), [A], lambda a: a.argmin(0)[None]),
        ("logsumexp", lambda a: torch.logsumexp(a, 1), [A], lambda a: np.log(np.exp(a).sum(1))),
        ("reshape", lambda x: torch.reshape(x, (4, -1)), [X], lambda x: x.reshape(4, -1)),
        ("mean-dtype", lambda a: torch.mean(a, dtype=torch.float64), [A], lambda a: a.astype(np.float64).mean()),
        (
            "softmax-dtype",
            lambda a: torch.softmax(a, 1, dtype=torch.float64),
            [A],
            lambda a: np.exp(_log_softmax(a.astype(np.float64), 1)),
        ),
        (
            "randint-range",
            lambda a: torch.randint(0, 3, (50,)) * 0 + a[0, 0].to(torch.int32),
            [np.ones((1, 1), np.float32)],
            lambda a: np.ones(50, np.int32),
        ),
        ("F.relu6", F.relu6, [A * 8], lambda a: np.clip(a, 0, 6)),
        ("F.silu", F.silu, [A], lambda a: a / (1 + np.exp(-a))),
        ("F.mish", F.mish, [A], lambda a: a * np.tanh(np.log1p(np.exp(a)))),
        ("F.hardswish", F.hardswish, [A * 4], lambda a: a * np.clip(a + 3, 0, 6) / 6),
        ("F.hardsigmoid", F.hardsigmoid, [A * 4], lambda a: np.clip(a / 6 + 0.5, 0, 1)),
        ("F.elu", lambda a: F.elu(a, 0.5, inplace=True), [A], lambda a: np.where(a > 0, a, 0.5 * np.expm1(a))),
        ("F.leaky_relu", lambda a: F.leaky_relu(a, 0.2), [A], lambda a: np.where(a > 0, a, 0.2 * a)),
        ("F.log_softmax", lambda a: F.log_softmax(a, dim=0), [A], lambda a: _log_softmax(a, 0)),
        ("F.embedding", lambda i, w: F.embedding(i, w), [INDICES, B], lambda i, w: w[i]),
        ("F.linear", lambda x, w: F.linear(x, w), [A, B.T.copy()], lambda x, w: x @ w.T),
        (
            "F.max_pool2d",
            lambda x: F.max_pool2d(x, 2),
            [X[None]],
            lambda x: x[:, :, :2, :].reshape(1, 2, 1, 2, 2, 2).max((3, 5)),
        ),
        (
            "F.avg_pool2d",
            lambda x: F.avg_pool2d(x, 2, 2, 0, False, True),
            [X[None]],
            lambda x: x[:, :, :2, :].reshape(1, 2, 1, 2, 2, 2).mean((3, 5)),
        ),
        (
            "F.adaptive_max_pool2d",
            lambda x: F.adaptive_max_pool2d(x, 1),
            [X[None]],
            lambda x: x.max((2, 3), keepdims=True),
        ),
        ("F.upsample", lambda x: F.upsample(x, scale_factor=2), [X], lambda x: x.repeat(2, -1)),
        (
            "F.bce",
            lambda p, t: F.binary_cross_entropy(p, t),
            [1 / (1 + np.exp(-A)), (A > 0).astype(np.float32)],
            lambda p, t: -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean(),
        ),
        (
            "F.bce-logits",
            lambda z, t: F.binary_cross_entropy_with_logits(z, t, reduction="sum"),
            [A, (A > 0).astype(np.float32)],
            lambda z, t: (np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) - z * t).sum(),
        ),
        (
            "F.smooth_l1",
            lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
            [A, P],
            lambda a, b: np.where(np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2 / 0.5, np.abs(a - b) - 0.25).mean(),
        ),
        (
            "F.kl_div",
            lambda a, b: F.kl_div(a, b, reduction="sum"),
            [np.log(P / 3), P / 3],
            lambda logq, p: (p * (np.log(p) - logq)).sum(),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_more_mappings_against_numpy(name, fn, args, reference):
    got = _eager_and_compiled(fn, *args, rtol=1e-5)
    np.testing.assert_allclose(got, reference(*args), rtol=2e-5, atol=1e-6)


def test_tensor_construction_details():
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and torch.is_tensor(t) and not torch.is_tensor(np.ones(2))
    assert torch.as_tensor(t) is t and torch.as_tensor(t, dtype=torch.float64).dtype == np.float64
    assert torch.as_tensor([1, 2]).dtype == np.int32
    with pytest.raises(ArgumentError, match="a NumPy array"):
        torch.from_numpy([1, 2])
    assert torch.randint(10, (4,), dtype=torch.long).dtype == np.int64
    assert torch.rand_like(torch.zeros(2, 2)).shape == (2, 2)
    seed = torch.seed()
    first = torch.randn(3).numpy()
    torch.manual_seed(seed)
    np.testing.assert_array_equal(torch.randn(3).numpy(), first)


# -- torch.nn.functional ----------------------------------------------------------------------


def _log_softmax(z, axis):
    z = z - z.max(axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis, keepdims=True))


def test_losses_take_the_class_dim_1():
    logits = RNG.standard_normal((4, 5, 3)).astype(np.float32)  # (N, C, d)
    labels = RNG.integers(0, 5, (4, 3)).astype(np.int32)
    labels[0, 0] = -100
    logp = _log_softmax(logits.astype(np.float64), 1)
    picked = -np.take_along_axis(logp, np.maximum(labels, 0)[:, None], 1)[:, 0]
    expected = picked[labels != -100].mean()
    got = _eager_and_compiled(lambda z, y: F.cross_entropy(z, y), logits, labels)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    got = _eager_and_compiled(lambda z, y: F.nll_loss(F.log_softmax(z, dim=1), y, reduction="sum"), logits, labels)
    np.testing.assert_allclose(got, picked[labels != -100].sum(), rtol=1e-5)
    unbatched = _eager_and_compiled(lambda z, y: F.cross_entropy(z, y), logits[0, :, 1], labels[0, 1])
    np.testing.assert_allclose(unbatched, picked[0, 1], rtol=1e-5)
    # PyTorch's deprecated size_average/reduce map to the reduction as PyTorch maps them
    pred, target = A, A[::-1].copy()
    np.testing.assert_allclose(F.mse_loss(pred, target, reduce=False).numpy(), (pred - target) ** 2, rtol=1e-6)
    np.testing.assert_allclose(
        F.l1_loss(pred, target, size_average=False).numpy(), np.abs(pred - target).sum(), rtol=1e-5
    )


def test_functional_signatures_that_differ_from_hlotraces():
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    # batch_norm: PyTorch's momentum (0.1 of the batch statistic)
    mean, var = ht.tensor(np.zeros(3, np.float32)), ht.tensor(np.ones(3, np.float32))
    F.batch_norm(ht.tensor(x), mean, var, training=True, momentum=0.1)
    np.testing.assert_allclose(mean.numpy(), 0.1 * x.mean((0, 2, 3)), rtol=1e-5, atol=1e-7)
    # conv_transpose2d: groups before dilation
    w = RNG.standard_normal((3, 1, 2, 2)).astype(np.float32)
    got = F.conv_transpose2d(ht.tensor(x), ht.tensor(w), None, 1, 0, 0, 3).numpy()
    expected = ht.F.conv_transpose2d(ht.tensor(x), ht.tensor(w), groups=3).numpy()
    np.testing.assert_array_equal(got, expected)
    # pad: PyTorch's flat list for every length, a pair included (last dim only)
    padded = _eager_and_compiled(lambda t: F.pad(t, (1, 2)), X)
    np.testing.assert_array_equal(padded, np.pad(X, ((0, 0), (0, 0), (1, 2))))
    # one_hot: int64; normalize; softmax's legacy dim; activations take inplace=
    assert F.one_hot(ht.tensor([0, 2]), 3).dtype == np.int64
    normalized = _eager_and_compiled(lambda a: F.normalize(a, dim=1), A)
    np.testing.assert_allclose(normalized, A / np.linalg.norm(A, axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(F.softmax(ht.tensor(A)).numpy().sum(1), np.ones(3), rtol=1e-6)
    np.testing.assert_array_equal(F.relu(ht.tensor(A), inplace=True).numpy(), np.maximum(A, 0))
    np.testing.assert_array_equal(F.dropout(ht.tensor(A), 0.5, training=False).numpy(), A)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda x: F.max_pool2d(x, 2, ceil_mode=True), "ceil_mode"),
        (lambda x: F.max_pool2d(x, 2, return_indices=True), "return_indices"),
        (lambda x: F.avg_pool2d(x, 2, divisor_override=3), "divisor_override"),
        (lambda x: F.embedding(ht.tensor([0]), x[0, 0], padding_idx=0), "padding_idx"),
        (lambda x: F.one_hot(ht.tensor([0, 1])), "num_classes"),
    ],
)
def test_options_hlotrace_lacks_are_refused_by_name(call, argument):
    with pytest.raises(ArgumentError, match=argument):
        call(ht.tensor(np.zeros((1, 1, 4, 4), np.float32)))


# -- scaled_dot_product_attention (PyTorch's signature: tests/test_attention.py) ------------------

QKV = [RNG.standard_normal(s).astype(np.float32) for s in ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3))]


def test_sdpa_gradient_matches_finite_differences():
    q64, k64, v64 = (a.astype(np.float64) for a in QKV)
    mask = np.tril(np.ones((5, 6), bool))

    def loss(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=mask) ** 2).sum()

    analytic = grad(loss, argnums=(0, 1, 2))(q64, k64, v64)
    _check_fd(lambda *a: float(loss(*a).numpy()), [q64, k64, v64], [g.numpy() for g in analytic])


def _check_fd(f, args, analytic, points=6, h=1e-6):
    rng = np.random.default_rng(7)
    for which, base in enumerate(args):
        for flat in rng.choice(base.size, min(points, base.size), replace=False):
            idx = np.unravel_index(flat, base.shape)
            plus, minus = base.copy(), base.copy()
            plus[idx] += h
            minus[idx] -= h
            shifted = lambda value: f(*[value if i == which else a for i, a in enumerate(args)])  # noqa: E731
            numeric = (shifted(plus) - shifted(minus)) / (2 * h)
            np.testing.assert_allclose(analytic[which][idx], numeric, rtol=1e-5, atol=1e-7)


# -- interpolate / Upsample: a reference written from PyTorch's formulas --------------------------


def _source(i, n_in, n_out, align_corners, scale_factor):
    """PyTorch's area_pixel_compute_source_index for the linear modes (one output index)."""
    if align_corners:
        return i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    scale = 1.0 / scale_factor if scale_factor else n_in / n_out
    return max((i + 0.5) * scale - 0.5, 0.0)


def _bilinear_reference(x, out_h, out_w, align_corners, scale_factors=(None, None)):
    """Each output pixel from its four neighbours (PyTorch's upsample_bilinear2d, written per
    pixel, not separably)."""
    n, c, h, w = x.shape
    y = np.zeros((n, c, out_h, out_w), np.float64)
    for i in range(out_h):
        sy = _source(i, h, out_h, align_corners, scale_factors[0])
        y0, ly = int(sy), sy - int(sy)
        y1 = y0 + (1 if y0 < h - 1 else 0)
        for j in range(out_w):
            sx = _source(j, w, out_w, align_corners, scale_factors[1])
            x0, lx = int(sx), sx - int(sx)
            x1 = x0 + (1 if x0 < w - 1 else 0)
            y[:, :, i, j] = (1 - ly) * ((1 - lx) * x[:, :, y0, x0] + lx * x[:, :, y0, x1]) + ly * (
                (1 - lx) * x[:, :, y1, x0] + lx * x[:, :, y1, x1]
            )
    return y


def test_bilinear_values_checked_by_hand():
    x = np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32)
    corners = F.interpolate(ht.tensor(x), scale_factor=2, mode="bilinear", align_corners=True).numpy()[0, 0]
    # align_corners=True: source i * (2 - 1) / (4 - 1): row 0 is 0, 1/3, 2/3, 1; (1, 1) is 1/3 * 2 + 1/3 = 1
    np.testing.assert_allclose(corners[0], [0, 1 / 3, 2 / 3, 1], rtol=1e-6)
    np.testing.assert_allclose(corners[1, 1], 1.0, rtol=1e-6)
    centers = F.interpolate(ht.tensor(x), scale_factor=2, mode="bilinear", align_corners=False).numpy()[0, 0]
    # align_corners=False: source (j + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25
    np.testing.assert_allclose(centers[0], [0, 0.25, 0.75, 1], rtol=1e-6)
    np.testing.assert_allclose(centers[1, 1], 0.75 * (0.75 * 0 + 0.25 * 1) + 0.25 * (0.75 * 2 + 0.25 * 3), rtol=1e-6)
    np.testing.assert_allclose(centers[3, 3], 3.0, rtol=1e-6)


IMAGE = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize(
    ("options", "out"),
    [
        ({"scale_factor": 2}, (10, 14)),
        ({"size": (8, 3)}, (8, 3)),  # up one dim, down the other
        ({"scale_factor": (1.5, 0.5)}, (7, 3)),
        ({"size": 1}, (1, 1)),
    ],
    ids=["x2", "size", "fractional", "to-1x1"],
)
def test_bilinear_against_pytorchs_formula_eager_and_compiled(options, out, align_corners):
    got = _eager_and_compiled(
        lambda t: F.interpolate(t, mode="bilinear", align_corners=align_corners, **options), IMAGE, rtol=1e-5
    )
    factor = options.get("scale_factor")
    factors = factor if isinstance(factor, tuple) else (factor, factor)
    expected = _bilinear_reference(IMAGE.astype(np.float64), *out, align_corners, factors)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_nearest_linear_and_trilinear():
    x = RNG.standard_normal((1, 2, 5)).astype(np.float32)
    got = _eager_and_compiled(lambda t: F.interpolate(t, size=8, mode="nearest"), x)
    np.testing.assert_array_equal(got, x[:, :, np.floor(np.arange(8) * 5 / 8).astype(int)])
    got = _eager_and_compiled(lambda t: F.interpolate(t, scale_factor=2, mode="linear", align_corners=True), x)
    np.testing.assert_allclose(got, _bilinear_reference(x[:, :, None], 1, 10, True)[:, :, 0], rtol=1e-5, atol=1e-6)
    volume = RNG.standard_normal((1, 1, 2, 3, 4)).astype(np.float32)
    got = F.interpolate(ht.tensor(volume), scale_factor=2, mode="trilinear", align_corners=True).numpy()
    assert got.shape == (1, 1, 4, 6, 8)
    np.testing.assert_allclose(got[:, :, 0], _bilinear_reference(volume[:, :, 0], 6, 8, True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, :, 3], _bilinear_reference(volume[:, :, 1], 6, 8, True), rtol=1e-5, atol=1e-6)
    with pytest.raises(OpError, match="align_corners applies to the linear modes"):
        F.interpolate(ht.tensor(x), size=8, align_corners=True)
    with pytest.raises(OpError, match="mode 'bilinear' expects"):
        F.interpolate(ht.tensor(x), size=8, mode="bilinear")
    with pytest.raises(OpError, match="mode must be one of"):
        F.interpolate(ht.tensor(x), size=8, mode="bicubic")
    with pytest.raises(OpError, match="needs a float tensor"):
        F.interpolate(ht.tensor([[[1, 2]]]), size=4, mode="linear")
    np.testing.assert_array_equal(F.interpolate(ht.tensor([[[1, 2]]]), size=4).numpy(), [[[1, 1, 2, 2]]])


@pytest.mark.parametrize("align_corners", [True, False])
def test_bilinear_gradient_matches_finite_differences_and_compiled(align_corners):
    x64 = IMAGE[:1, :2].astype(np.float64)
    weights = RNG.standard_normal((1, 2, 8, 9))

    def loss(x):
        return (F.interpolate(x, size=(8, 9), mode="bilinear", align_corners=align_corners) * weights).sum()

    (analytic,) = grad(loss, argnums=(0,))(x64)
    _check_fd(lambda a: float(loss(a).numpy()), [x64], [analytic.numpy()])
    # Bilinear resampling is linear: the gradient is the reference's adjoint, sum over outputs
    # of weight * d out / d x, each output's four bilinear weights put back on its neighbours.
    basis = np.eye(x64[0, 0].size).reshape(-1, 1, 1, *x64.shape[2:])
    columns = np.stack([(_bilinear_reference(b, 8, 9, align_corners) * weights[:, :1]).sum() for b in basis])
    np.testing.assert_allclose(analytic.numpy()[0, 0].ravel(), columns, rtol=1e-10)
    step = xla_trace(grad(loss, argnums=(0,)))
    x32 = ht.tensor(x64.astype(np.float32))
    step(x32)
    np.testing.assert_allclose(step(x32)[0].numpy(), analytic.numpy(), rtol=1e-4, atol=1e-5)


def test_upsample_modules():
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    np.testing.assert_allclose(
        up(ht.tensor(IMAGE)).numpy(), _bilinear_reference(IMAGE.astype(np.float64), 10, 14, True), rtol=1e-5, atol=1e-6
    )
    assert "align_corners=True" in repr(up)
    nearest = nn.Upsample(scale_factor=1.5)(ht.tensor(IMAGE)).numpy()  # not a whole factor: floor(i / 1.5)
    np.testing.assert_array_equal(nearest, IMAGE[:, :, [0, 0, 1, 2, 2, 3, 4]][:, :, :, [0, 0, 1, 2, 2, 3, 4, 4, 5, 6]])
    with pytest.raises(ArgumentError, match="align_corners"):
        nn.Upsample(scale_factor=2, align_corners=True)
