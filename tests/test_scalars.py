"""ml_dtypes scalars are numbers wherever hlotrace takes a Python or NumPy number (issue 24).

``x.numpy().max()`` of a bfloat16 tensor is an ``ml_dtypes.bfloat16`` scalar: a ``np.generic``
but not a ``np.floating``, which clip used to refuse. ``hlotrace.dtypes.number_kind`` is the
one test for "a number"; each place that takes one has a test here.
"""

import ml_dtypes
import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import dtypes as dt
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace

BF16 = ml_dtypes.bfloat16


def _bf16(values):
    return ht.tensor(np.array(values, BF16))


def test_number_kind_knows_python_numpy_and_ml_dtypes_scalars():
    assert dt.number_kind(2) is int and dt.number_kind(np.int64(2)) is int
    assert dt.number_kind(2.5) is float and dt.number_kind(np.float16(2)) is float
    assert dt.number_kind(BF16(2.5)) is float and dt.number_kind(ml_dtypes.float8_e4m3fn(1)) is float
    assert dt.number_kind(ml_dtypes.int4(3)) is int
    assert dt.number_kind(True) is bool and dt.number_kind(np.bool_(False)) is bool
    for other in ("1", np.array(1.0), None, [1.0], np.str_("1")):
        assert dt.number_kind(other) is None and not dt.is_number(other)
    assert not dt.is_number(True)
    value = dt.as_python_number(BF16(2.5))
    assert type(value) is float and value == 2.5
    assert type(dt.as_python_number(np.int32(7))) is int


def test_clip_takes_a_bfloat16_bound_from_the_tensor_itself():
    x = _bf16([-3.0, 0.5, 7.0])
    top = x.numpy().max()  # an ml_dtypes.bfloat16 scalar
    assert type(top) is BF16
    out = F.clip(x, min=BF16(-1.0), max=top / BF16(2))
    assert out.dtype == dt.bfloat16
    assert out.numpy().astype(np.float32).tolist() == [-1.0, 0.5, 3.5]
    compiled = xla_trace(lambda t: F.clip(t, min=BF16(-1.0), max=BF16(3.5)))
    compiled(x)
    assert compiled(x).numpy().astype(np.float32).tolist() == [-1.0, 0.5, 3.5]
    # A bfloat16 bound is a float bound: an int32 tensor clipped by it gives float32, as by 0.5.
    assert F.clip(ht.tensor(np.array([0, 3], np.int32)), max=BF16(0.5)).dtype == dt.float32
    with pytest.raises(HlotraceError, match="NaN"):
        F.clip(x, max=BF16(np.nan))


def test_clip_gradient_with_bfloat16_bounds():
    """The compiled gradient test of clip drew such a bound (seed 20261125) and failed."""
    from hlotrace.autodiff import grad

    x = _bf16([-3.0, 0.5, 7.0])
    g = grad(lambda t: F.sum(F.clip(t, min=BF16(-1.0), max=BF16(np.inf))))(x)
    assert g.numpy().astype(np.float32).tolist() == [0.0, 1.0, 1.0]


def test_full_takes_an_ml_dtypes_value():
    out = F.full((2,), BF16(1.5), dtype="float32")
    assert out.dtype == dt.float32 and out.numpy().tolist() == [1.5, 1.5]
    assert F.full((1,), BF16(2.0), dtype="int32").numpy().tolist() == [2]
    with pytest.raises(HlotraceError, match="not an integer"):
        F.full((1,), BF16(2.5), dtype="int32")
    # Like a NumPy float scalar, its kind decides the default dtype: float32.
    assert F.full((1,), BF16(2.0)).dtype == F.full((1,), np.float64(2.0)).dtype


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "less"])
def test_binary_ops_take_an_ml_dtypes_operand_like_a_numpy_scalar(name):
    """A NumPy scalar operand is a 0-d tensor of its own dtype (strong, NumPy 2's rule); an
    ml_dtypes one is the same, eagerly and compiled."""
    op = getattr(F, name)
    x = _bf16([1.0, -2.0, 4.0])
    eager = op(x, BF16(2.0))
    assert eager.dtype == op(x, _bf16(2.0)).dtype
    np.testing.assert_array_equal(eager.numpy(), op(x, _bf16(2.0)).numpy())
    f32 = ht.tensor(np.array([1.0, -2.0, 4.0], np.float32))
    assert op(f32, BF16(2.0)).dtype == op(f32, np.float16(2.0)).dtype  # a strong narrower float
    compiled = xla_trace(lambda t: op(t, BF16(2.0)))
    compiled(x)
    np.testing.assert_array_equal(compiled(x).numpy(), eager.numpy())


def test_tensor_operators_take_an_ml_dtypes_scalar_on_the_right():
    x = _bf16([1.0, -2.0])
    assert ((x * BF16(2.0)).numpy().astype(np.float32)).tolist() == [2.0, -4.0]
    assert ((x + BF16(0.5)).numpy().astype(np.float32)).tolist() == [1.5, -1.5]


def test_masked_fill_and_setitem_take_an_ml_dtypes_value():
    x = ht.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    mask = ht.tensor(np.array([True, False, True]))
    assert F.masked_fill(x, mask, BF16(-1.0)).numpy().tolist() == [-1.0, 2.0, -1.0]
    y = ht.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    y[mask] = BF16(0.5)
    assert y.numpy().tolist() == [0.5, 2.0, 0.5]


def test_index_add_takes_an_ml_dtypes_alpha():
    x = ht.tensor(np.zeros(3, np.float32))
    index = ht.tensor(np.array([0, 2], np.int32))
    source = ht.tensor(np.array([1.0, 2.0], np.float32))
    assert F.index_add(x, 0, index, source, alpha=BF16(0.5)).numpy().tolist() == [0.5, 0.0, 1.0]


def test_attribute_numbers_take_ml_dtypes_scalars():
    x = ht.tensor(np.array([-1.0, 0.0, 2.0], np.float32))
    np.testing.assert_allclose(
        F.leaky_relu(x, negative_slope=BF16(0.5)).numpy(), F.leaky_relu(x, negative_slope=0.5).numpy()
    )
    w = ht.tensor(np.ones(3, np.float32))
    np.testing.assert_allclose(
        F.layer_norm(x, (3,), w, w, eps=BF16(0.125)).numpy(), F.layer_norm(x, (3,), w, w, eps=0.125).numpy()
    )
    kept = F.dropout(x, p=BF16(0.0), training=True)
    assert kept.numpy().tolist() == x.numpy().tolist()


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_optimizer_hyper_parameters_take_ml_dtypes_scalars(name):
    """Optimizers read hyper-parameters with float(), which ml_dtypes scalars support."""
    from hlotrace import optim

    p = ht.tensor(np.array([1.0, 2.0], np.float32))
    q = ht.tensor(np.array([1.0, 2.0], np.float32))
    cls = getattr(optim, name)
    extra = {} if name == "SGD" else {"betas": (BF16(0.5), BF16(0.75)), "eps": BF16(0.125)}
    plain = {} if name == "SGD" else {"betas": (0.5, 0.75), "eps": 0.125}
    opt_bf = cls([p], lr=BF16(0.5), **extra)
    opt_py = cls([q], lr=0.5, **plain)
    for param, opt in ((p, opt_bf), (q, opt_py)):
        param.grad = ht.tensor(np.array([0.25, -1.0], np.float32))
        opt.step()
    np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_dropout_probability_may_be_an_ml_dtypes_scalar():
    import ml_dtypes

    from hlotrace import nn

    assert nn.Dropout(ml_dtypes.bfloat16(0.5)).p == 0.5
    with pytest.raises(ht.HlotraceError, match="probability"):
        nn.Dropout(True)
