"""The PyTorch-style Tensor methods (hlotrace/tensor_methods.py) against NumPy, eagerly and
inside an ``xla_trace`` function (the compiled call equals the eager one), and the names
they must not disturb: ``float(x)``/``int(x)``/``bool(x)``, ``x.size`` as an int, Parameter."""

import math

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace

X = np.array(
    [
        [[1.5, -2.0, 0.0, 4.0], [-0.0, 3.25, -1.0, 9.0], [0.5, 7.0, -3.0, 2.0]],
        [[6.0, 1.0, -8.0, 0.25], [2.0, 2.0, 5.0, -6.0], [1e-3, 40.0, -0.5, 3.0]],
    ],
    dtype=np.float32,
)  # (2, 3, 4)
POSITIVE = np.abs(X) + 0.5
MASK = X > 1.0


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name -> (the method call on a Tensor, the NumPy result(s) for X)
CASES = {
    "view": (lambda t: t.view(6, -1), X.reshape(6, -1)),
    "view-tuple": (lambda t: t.view((4, 6)), X.reshape(4, 6)),
    "split-size": (lambda t: t.split(3, dim=2), [X[:, :, :3], X[:, :, 3:]]),
    "split-sizes": (lambda t: t.split([1, 2], dim=1), [X[:, :1], X[:, 1:]]),
    "split-negative-dim": (lambda t: t.split(1, -3), [X[:1], X[1:]]),
    "chunk": (lambda t: t.chunk(2, dim=1), [X[:, :2], X[:, 2:]]),
    "chunk-fewer": (lambda t: t.chunk(3, dim=0), [X[:1], X[1:]]),
    "permute": (lambda t: t.permute(2, 0, 1), X.transpose(2, 0, 1)),
    "permute-tuple": (lambda t: t.permute((1, 2, 0)), X.transpose(1, 2, 0)),
    "transpose-two-dims": (lambda t: t.transpose(1, 2), X.swapaxes(1, 2)),
    "transpose-negative-dims": (lambda t: t.transpose(-1, 0), X.swapaxes(-1, 0)),
    "transpose-permutation": (lambda t: t.transpose(2, 0, 1), X.transpose(2, 0, 1)),
    "transpose-permutation-tuple": (lambda t: t.transpose((1, 0, 2)), X.transpose(1, 0, 2)),
    "transpose-reverse": (lambda t: t.transpose(), X.transpose()),
    "mT": (lambda t: t.mT, X.swapaxes(-2, -1)),
    "T": (lambda t: t.T, X.T),
    "contiguous": (lambda t: t.contiguous() * 2.0, X * 2.0),
    "masked_fill": (lambda t: t.masked_fill(ht.tensor(MASK), -1.0), np.where(MASK, np.float32(-1.0), X)),
    "masked_fill-broadcast": (
        lambda t: t.masked_fill(ht.tensor(MASK[0, 0]), 0.0),
        np.where(MASK[0, 0], np.float32(0), X),
    ),
    "type_as": (lambda t: t.type_as(ht.tensor(np.zeros(1, np.int32))), X.astype(np.int32)),
    "expand": (lambda t: t[:, :1].expand(-1, 3, 4), np.broadcast_to(X[:, :1], (2, 3, 4))),
    "expand-new-dims": (lambda t: t.expand(2, 2, -1, -1, 4), np.broadcast_to(X, (2, 2, 2, 3, 4))),
    "unsqueeze": (lambda t: t.unsqueeze(1), X[:, None]),
    "unsqueeze-negative": (lambda t: t.unsqueeze(-1), X[..., None]),
    "flatten": (lambda t: t.flatten(), X.reshape(-1)),
    "flatten-start": (lambda t: t.flatten(1), X.reshape(2, -1)),
    "flatten-range": (lambda t: t.flatten(0, 1), X.reshape(6, 4)),
    "float": (lambda t: t.int().float(), X.astype(np.int32).astype(np.float32)),
    "int": (lambda t: t.int(), X.astype(np.int32)),
    "long": (lambda t: t.long(), X.astype(np.int64)),
    "bool": (lambda t: t.bool(), X != 0),
    "half": (lambda t: t.half(), X.astype(np.float16)),
    "double": (lambda t: t.double(), X.astype(np.float64)),
    "clamp": (lambda t: t.clamp(-1.0, 2.0), np.clip(X, -1.0, 2.0)),
    "clamp-min": (lambda t: t.clamp(min=0.5), np.maximum(X, 0.5)),
    "clamp-max": (lambda t: t.clamp(max=0.5), np.minimum(X, 0.5)),
    "clamp-tensor": (lambda t: t.clamp(min=ht.tensor(X[0])), np.maximum(X, X[0])),
    "abs": (lambda t: t.abs(), np.abs(X)),
    "exp": (lambda t: t.exp(), np.exp(X)),
    "log": (lambda t: (t.abs() + 0.5).log(), np.log(POSITIVE)),
    "sqrt": (lambda t: (t.abs() + 0.5).sqrt(), np.sqrt(POSITIVE)),
    "pow": (lambda t: t.pow(2.0), X**2),
    "pow-tensor": (lambda t: (t.abs() + 0.5).pow(ht.tensor(X[0, 0])), POSITIVE ** X[0, 0]),
    "argmax": (lambda t: t.argmax(), np.argmax(X)),
    "argmax-dim": (lambda t: t.argmax(dim=2), np.argmax(X, axis=2)),
    "argmax-keepdim": (lambda t: t.argmax(1, keepdim=True), np.argmax(X, axis=1)[:, None]),
    "argmin-dim": (lambda t: t.argmin(dim=1, keepdim=True), np.argmin(X, axis=1)[:, None]),
    "argmax-axis": (lambda t: t.argmax(axis=0), np.argmax(X, axis=0)),
    "sum-dim": (lambda t: t.sum(dim=1), X.sum(axis=1)),
    "sum-dim-keepdim": (lambda t: t.sum(dim=(0, 2), keepdim=True), X.sum(axis=(0, 2), keepdims=True)),
    "mean-dim": (lambda t: t.mean(dim=-1, keepdim=True), X.mean(axis=-1, keepdims=True)),
    "prod-dim": (lambda t: t.prod(dim=0), X.prod(axis=0)),
    "max-axis": (lambda t: t.max(1), X.max(axis=1)),
    "max-dim": (lambda t: list(t.max(dim=1)), [X.max(axis=1), X.argmax(axis=1)]),
    "min-dim-keepdim": (
        lambda t: list(t.min(dim=-1, keepdim=True)),
        [X.min(axis=-1, keepdims=True), X.argmin(axis=-1)[..., None]],
    ),
    "squeeze-dim": (lambda t: t[:, :1].squeeze(dim=1), X[:, 0]),
    "log_softmax-dim": (lambda t: t.log_softmax(dim=1), np.log(_softmax(X, 1))),
    "softmax": (lambda t: t.softmax(-1), _softmax(X, -1)),
    "softmax-dim0": (lambda t: t.softmax(dim=0), _softmax(X, 0)),
}


def _numpy(result):
    return [r.numpy() for r in result] if isinstance(result, list | tuple) else result.numpy()


def _check(actual, expected):
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            _check(a, e)
        return
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-6, atol=1e-6)
        assert actual.dtype == expected.dtype
    else:
        np.testing.assert_array_equal(actual, expected)
        assert actual.dtype.kind == expected.dtype.kind


@pytest.mark.parametrize("name", sorted(CASES))
def test_method_matches_numpy_eagerly_and_compiled(name):
    method, expected = CASES[name]
    eager = _numpy(method(ht.tensor(X)))
    _check(eager, expected)
    step = xla_trace(lambda t: method(t))
    step(ht.tensor(X))  # the recording call
    compiled = _numpy(step(ht.tensor(X)))
    _check(compiled, eager)


def test_size_is_an_int_and_pytorchs_size():
    t = ht.tensor(X)
    assert t.size == 24 and isinstance(t.size, int) and t.size + 1 == 25
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.numel() == 24 and t.dim() == 3
    assert ht.tensor(np.float32(2.0)).size == 1 and ht.tensor(np.float32(2.0)).size() == ()
    with pytest.raises(IndexError, match="dim 3 is out of range for a 3-d tensor"):
        t.size(3)

    @xla_trace
    def scaled(t):
        return t * float(t.size(0)) / t.numel()

    scaled(ht.tensor(X))
    np.testing.assert_allclose(scaled(ht.tensor(X)).numpy(), X * 2 / 24, rtol=1e-6)


def test_builtin_conversions_and_parameters_keep_working():
    one = ht.tensor(np.float32(2.5))
    assert float(one) == 2.5 and int(one) == 2 and bool(one) is True
    assert one.float() is one  # no cast recorded for the dtype it has
    p = ht.Parameter(np.ones((2, 3), np.float32))
    assert isinstance(p, ht.Parameter) and p.size == 6 and p.size(1) == 3
    assert p.half().dtype == np.float16 and not isinstance(p.half(), ht.Parameter)
    assert p.view(3, 2).shape == (3, 2) and p.T.shape == (3, 2)


def test_split_sizes_must_add_up_and_chunk_must_be_positive():
    t = ht.tensor(X)
    with pytest.raises(OpError, match=r"Tensor.split: sizes \[1, 1\] do not add up to dim 1's 3"):
        t.split([1, 1], dim=1)
    with pytest.raises(OpError, match=r"Tensor\.chunk: chunks must be positive"):
        t.chunk(0)
    with pytest.raises(OpError, match=r"Tensor\.expand"):
        t.expand(-1, 3, 4, 5)
    assert [c.shape for c in t.split(10, dim=2)] == [(2, 3, 4)]  # one chunk when the size exceeds the dim
    assert math.prod(t.chunk(4, dim=2)[0].shape) == 6
