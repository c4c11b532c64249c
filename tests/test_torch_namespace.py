"""``hlotrace.torch`` (issue 36: a PyTorch model file runs with its imports swapped): every
function against a NumPy reference, eagerly and compiled (``xla_trace``: the compiled call
equals the eager one); ``torch.nn.functional``'s signatures where hlotrace's differ; BatchNorm's
PyTorch momentum. Elsewhere: ``interpolate``/``nn.Upsample`` in tests/test_torch_interpolate.py;
``F.scaled_dot_product_attention``'s PyTorch signature in tests/test_attention.py; ``no_grad``,
``loss.backward()``, ``zero_grad`` and ``xla_trace(without_host=, symbolic_shape=)`` in
tests/test_torch_spellings.py."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.torch as torch
import hlotrace.torch.nn.functional as F
from hlotrace.errors import ArgumentError
from hlotrace.jit import xla_trace
from hlotrace.testing.check import eager_then_compiled
from hlotrace.torch import nn, optim

RNG = np.random.default_rng(360)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


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
def test_creation_functionseager_then_compiled(make, expected):
    got = eager_then_compiled(make)
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
    got = eager_then_compiled(fn, *args)
    np.testing.assert_allclose(got, reference(*args), rtol=1e-5, atol=1e-6)


def test_the_pairs_and_lists_pytorch_returns():
    values, indices = eager_then_compiled(lambda a: tuple(torch.max(a, dim=1)), A)  # unpacked to return it
    np.testing.assert_array_equal(values, A.max(1))
    np.testing.assert_array_equal(indices, A.argmax(1))
    values, indices = eager_then_compiled(lambda a: tuple(torch.min(a, 0, keepdim=True)), A)
    np.testing.assert_array_equal(values, A.min(0, keepdims=True))
    values, indices = eager_then_compiled(lambda a: tuple(torch.topk(a, 2, dim=1)), A)
    np.testing.assert_array_equal(values, -np.sort(-A, 1)[:, :2])
    np.testing.assert_array_equal(indices, np.argsort(-A, 1)[:, :2])
    parts = eager_then_compiled(lambda x: torch.split(x, 3, dim=2), X)
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
    got = eager_then_compiled(fn, *args, rtol=1e-5)
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
    got = eager_then_compiled(lambda z, y: F.cross_entropy(z, y), logits, labels)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    got = eager_then_compiled(lambda z, y: F.nll_loss(F.log_softmax(z, dim=1), y, reduction="sum"), logits, labels)
    np.testing.assert_allclose(got, picked[labels != -100].sum(), rtol=1e-5)
    unbatched = eager_then_compiled(lambda z, y: F.cross_entropy(z, y), logits[0, :, 1], labels[0, 1])
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
    padded = eager_then_compiled(lambda t: F.pad(t, (1, 2)), X)
    np.testing.assert_array_equal(padded, np.pad(X, ((0, 0), (0, 0), (1, 2))))
    # one_hot: int64; normalize; softmax's legacy dim; activations take inplace=
    assert F.one_hot(ht.tensor([0, 2]), 3).dtype == np.int64
    normalized = eager_then_compiled(lambda a: F.normalize(a, dim=1), A)
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


# -- BatchNorm's momentum: PyTorch's (the batch's weight), hlotrace's is 1 - momentum ---------------


@pytest.mark.parametrize("momentum", [0.1, 0.01, 0.0, 1.0])
def test_batch_norm_modules_take_pytorchs_momentum(momentum):
    x = RNG.standard_normal((4, 3, 2, 2)).astype(np.float32)
    flat = x.transpose(1, 0, 2, 3).reshape(3, -1)
    mean, unbiased = flat.mean(1), flat.var(1, ddof=1)
    for bn, batch in ((nn.BatchNorm2d(3, momentum=momentum), x), (nn.BatchNorm1d(3, momentum=momentum), flat.T)):
        assert isinstance(bn, ht.nn.BatchNorm1d | ht.nn.BatchNorm2d)
        assert f"momentum={momentum}" in repr(bn)
        bn(ht.tensor(np.ascontiguousarray(batch)))
        np.testing.assert_allclose(bn.running_mean.numpy(), momentum * mean, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(bn.running_var.numpy(), (1 - momentum) + momentum * unbiased, rtol=1e-5)
        assert int(bn.num_batches_tracked.numpy()) == 1
    # both defaults: the same update, each spelled in its own convention
    assert (nn.BatchNorm2d(3).momentum, ht.nn.BatchNorm2d(3).momentum) == (0.1, 0.9)


def _pytorch_running_stats(batches, momentum):
    """PyTorch's BatchNorm running-statistics update (NumPy, float64) over ``batches`` of
    ``(N, C, ...)``: ``running = (1 - m) * running + m * batch`` (unbiased variance), or with
    ``m = None`` the cumulative average ``running += (batch - running) / num_batches_tracked``."""
    mean, var = np.zeros(batches[0].shape[1]), np.ones(batches[0].shape[1])
    for n, b in enumerate(batches, start=1):
        flat = np.moveaxis(b, 1, 0).reshape(b.shape[1], -1).astype(np.float64)
        factor = 1.0 / n if momentum is None else momentum
        mean = (1 - factor) * mean + factor * flat.mean(1)
        var = (1 - factor) * var + factor * flat.var(1, ddof=1)
    return mean, var


@pytest.mark.parametrize("module", ["BatchNorm1d", "BatchNorm2d"])
@pytest.mark.parametrize(
    ("given", "assigned", "momentum"),
    [
        ("default", None, 0.1),
        ("default", 0.01, 0.01),  # set after construction: PyTorch's meaning, as the constructor's
        (0.3, "None", None),  # assigned None: the cumulative average
        (None, 0.2, 0.2),
    ],
    ids=["0.1", "0.01-assigned", "None-assigned", "None-then-0.2"],
)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_batch_norm_momentum_is_pytorchs_after_assignment_too(module, given, assigned, momentum, compiled):
    """``.momentum`` holds PyTorch's value, at construction and after assignment (a ported
    ``bn.momentum = 0.01``), and the running statistics follow PyTorch's update over three
    training batches, eagerly and in a compiled step (every call the executable)."""
    shape = (6, 3) if module == "BatchNorm1d" else (4, 3, 2, 2)
    batches = [RNG.standard_normal(shape).astype(np.float32) * (i + 1) + i for i in range(3)]
    cls = getattr(nn, module)
    bn = cls(3) if given == "default" else cls(3, momentum=given)
    if assigned is not None:
        bn.momentum = None if assigned == "None" else assigned
    assert bn.momentum == momentum and f"momentum={momentum}" in repr(bn)
    forward = xla_trace(lambda x, *, m: m(x), first_call="compiled") if compiled else (lambda x, *, m: m(x))
    for b in batches:
        y = forward(ht.tensor(b), m=bn).numpy()
    axes = (0,) if b.ndim == 2 else (0, 2, 3)
    keep = (1, 3) if b.ndim == 2 else (1, 3, 1, 1)
    normalized = (b - b.mean(axes).reshape(keep)) / np.sqrt(b.var(axes).reshape(keep) + 1e-5)
    np.testing.assert_allclose(y, normalized, rtol=1e-4, atol=1e-5)  # the batch's statistics
    mean, var = _pytorch_running_stats(batches, momentum)
    np.testing.assert_allclose(bn.running_mean.numpy(), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), var, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked.numpy()) == 3 and bn.momentum == momentum
    if compiled:
        assert forward.cache_size == 1


def test_batch_norm_momentum_assigned_out_of_range_is_refused_when_the_forward_runs():
    bn = nn.BatchNorm2d(3)
    bn.momentum = 1.5
    with pytest.raises(ArgumentError, match=r"momentum.*1\.5"):
        bn(ht.tensor(np.ones((2, 3, 1, 1), np.float32)))
    assert int(bn.num_batches_tracked.numpy()) == 0


def test_batch_norm_momentum_none_stays_the_cumulative_average():
    batches = [RNG.standard_normal((5, 2)).astype(np.float32) * (i + 1) + i for i in range(3)]
    bn = nn.BatchNorm1d(2, momentum=None)
    assert bn.momentum is None and "momentum=None" in repr(bn)
    step = xla_trace(lambda b: bn(b))
    for b in batches:  # eager (the recording call), then compiled
        step(ht.tensor(b))
    # the cumulative average of the batch statistics, as PyTorch's momentum=None
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([b.mean(0) for b in batches], 0), rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), np.mean([b.var(0, ddof=1) for b in batches], 0), rtol=1e-5)
    assert int(bn.num_batches_tracked.numpy()) == 3


def test_functional_batch_norm_momentum_and_refusals():
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    mean, var = ht.tensor(np.zeros(3, np.float32)), ht.tensor(np.ones(3, np.float32))
    F.batch_norm(ht.tensor(x), mean, var, training=True, momentum=0.25)
    np.testing.assert_allclose(mean.numpy(), 0.25 * x.mean(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(var.numpy(), 0.75 + 0.25 * x.var(0, ddof=1), rtol=1e-5)
    # None is the modules' cumulative average (a batch count): PyTorch's functional takes a number
    with pytest.raises(ArgumentError, match=r"momentum=None.*nn\.BatchNorm"):
        F.batch_norm(ht.tensor(x), mean, var, training=True, momentum=None)
    for bad in (1.5, -0.1, True, "0.1", float("nan")):
        with pytest.raises(ArgumentError, match="momentum"):
            F.batch_norm(ht.tensor(x), mean, var, training=True, momentum=bad)
        with pytest.raises(ArgumentError, match="momentum"):
            nn.BatchNorm2d(3, momentum=bad)
