"""PyTorch's spellings that model code uses, beside hlotrace's NumPy ones (issue 36: a model
file ports with only its imports swapped): two-dim ``Tensor.transpose``, ``dim=``/``keepdim=``
as aliases of ``axis=``/``keepdims=``, ``F.cat``, ``F.pad`` with PyTorch's flat list,
``Tensor.device``/``.to`` and ``Parameter.requires_grad``. Each against NumPy, eagerly and
inside ``xla_trace`` (the compiled call equals the eager one)."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.jit import xla_trace

RNG = np.random.default_rng(36)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def _eager_and_compiled(fn, *arrays):
    """``fn`` on tensors of ``arrays``: its eager result, and asserts the compiled one equals it."""
    eager = fn(*[ht.tensor(a) for a in arrays])
    step = xla_trace(fn)
    step(*[ht.tensor(a) for a in arrays])  # the recording call
    compiled = step(*[ht.tensor(a) for a in arrays])
    eager_list = eager if isinstance(eager, tuple | list) else [eager]
    compiled_list = compiled if isinstance(compiled, tuple | list) else [compiled]
    for e, c in zip(eager_list, compiled_list, strict=True):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)
    return eager


# -- 1. Tensor.transpose(dim0, dim1) ------------------------------------------------------------


def test_transpose_of_two_dims_swaps_them_on_a_matrix_too():
    m = X[0]  # (3, 4): NumPy's m.transpose(0, 1) would be the identity; PyTorch's swaps
    got = _eager_and_compiled(lambda t: t.transpose(0, 1), m)
    np.testing.assert_array_equal(got.numpy(), m.T)
    assert ht.tensor(m).transpose(1, 0).shape == (4, 3)
    np.testing.assert_array_equal(ht.tensor(X).transpose(np.int64(0), -1).numpy(), X.swapaxes(0, -1))


def test_transpose_dims_out_of_range_and_mT_of_a_vector_are_errors():
    with pytest.raises(IndexError, match=r"Tensor.transpose: dim 3 is out of range for a 3-d tensor"):
        ht.tensor(X).transpose(0, 3)
    with pytest.raises(ht.errors.OpError, match=r"Tensor.mT: needs a tensor of rank >= 2"):
        ht.tensor(X[0, 0]).mT  # noqa: B018
