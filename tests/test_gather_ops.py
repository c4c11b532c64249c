"""The gather family beyond the generated property and gradient tests: PyTorch's formulas
(gather, scatter_add, index_add, embedding), Tensor indexing and in-place assignment
(eager, recorded, taped), second-order gradients, nn.Embedding and the error messages."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn
from hlotrace.autodiff import grad
from hlotrace.errors import OpError, TraceError
from hlotrace.jit import xla_trace
from hlotrace.trace import Trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _compiled(fn, *args):
    traced = xla_trace(fn)
    first = traced(*args)
    second = traced(*args)
    assert traced.cache_size == 1
    return first, second


# -- PyTorch's formulas -------------------------------------------------------------------


def test_gather_is_torch_gather_with_a_smaller_index():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    index = rng.integers(-4, 4, (3, 2))
    out = F.gather(_t(x), 0, _t(index, "int64")).numpy()
    expected = [[x[index[i, j] % 4, j] for j in range(2)] for i in range(3)]  # out[i][j] = x[index[i][j]][j]
    np.testing.assert_array_equal(out, expected)
    index1 = rng.integers(0, 5, (2, 7))
    out = F.gather(_t(x), -1, _t(index1, "int32")).numpy()
    np.testing.assert_array_equal(out, [[x[i, index1[i, j]] for j in range(7)] for i in range(2)])


def test_take_along_axis_broadcasts_like_numpy():
    x = np.arange(5.0, dtype=np.float32)[None]
    index = np.array([[0, -1], [2, 2], [4, 1]])
    np.testing.assert_array_equal(F.take_along_axis(_t(x), _t(index, "int64"), 1).numpy(), x[0][index % 5])
    flat = F.take_along_axis(_t(np.arange(6).reshape(2, 3), "int32"), _t([5, 0], "int32"), None)
    assert flat.numpy().tolist() == [5, 0]


def test_scatter_add_accumulates_duplicates_as_torch():
    x = np.zeros((3, 4), np.float32)
    index = np.array([[0, 1, 2, 0], [0, 0, 2, -1]])
    src = np.arange(8, dtype=np.float32).reshape(2, 4) + 1
    expected = x.copy()
    for i in range(2):
        for j in range(4):
            expected[index[i, j] % 3, j] += src[i, j]  # out[index[i][j]][j] += src[i][j]
    eager = F.scatter_add(_t(x), 0, _t(index, "int32"), _t(src))
    np.testing.assert_array_equal(eager.numpy(), expected)
    for result in _compiled(lambda a, i, s: F.scatter_add(a, 0, i, s), _t(x), _t(index, "int32"), _t(src)):
        np.testing.assert_array_equal(result.numpy(), expected)
    # A larger src is cut to index's shape first (as torch).
    bigger = np.concatenate([src, np.full((1, 4), 100.0, np.float32)])
    np.testing.assert_array_equal(F.scatter_add(_t(x), 0, _t(index, "int32"), _t(bigger)).numpy(), expected)


def test_index_add_with_alpha_and_duplicates():
    x = np.ones((2, 4), np.int32)
    index = np.array([3, 0, 3])
    source = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    expected = x.copy()
    for i, k in enumerate(index):
        expected[:, k] += 2 * source[:, i]
    np.testing.assert_array_equal(F.index_add(_t(x, "int32"), 1, index, _t(source, "int32"), alpha=2).numpy(), expected)
    with pytest.raises(OpError, match="alpha must be an int"):
        F.index_add(_t(x, "int32"), 1, index, _t(source, "int32"), alpha=0.5)


def test_embedding_and_its_gradient_accumulate_repeated_rows():
    weight = np.arange(12, dtype=np.float32).reshape(4, 3)
    indices = np.array([[1, 3], [1, -4]])
    np.testing.assert_array_equal(F.embedding(_t(indices, "int64"), _t(weight)).numpy(), weight[indices])
    g = grad(lambda w: F.embedding(_t(indices, "int64"), w).sum())(_t(weight)).numpy()
    np.testing.assert_array_equal(g, np.array([[1] * 3, [2] * 3, [0] * 3, [1] * 3], np.float32))


def test_masked_fill_replaces_nan_and_broadcasts_the_mask():
    x = _t([[np.nan, 1.0, 2.0], [3.0, np.nan, 5.0]])
    mask = _t([True, False, True], "bool")
    out = F.masked_fill(x, mask, -np.inf).numpy()
    np.testing.assert_array_equal(out, [[-np.inf, 1.0, -np.inf], [-np.inf, np.nan, -np.inf]])
    g = grad(lambda v: (F.masked_fill(v, mask, 0.0) * 3.0).sum())(x).numpy()
    np.testing.assert_array_equal(g, [[0.0, 3.0, 0.0], [0.0, 3.0, 0.0]])
    with pytest.raises(OpError, match="cannot be stored in a int32 tensor"):
        F.masked_fill(_t([1, 2], "int32"), _t([True, False], "bool"), 0.5)


# -- Tensor indexing ----------------------------------------------------------------------


def test_integer_tensor_indexing_is_take_and_records():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([2, -1, 0, 2])
    np.testing.assert_array_equal(_t(x)[_t(idx, "int32")].numpy(), x[idx])
    np.testing.assert_array_equal(_t(x)[[1, 1]].numpy(), x[[1, 1]])
    np.testing.assert_array_equal(_t(x)[:, np.array([3, 0])].numpy(), x[:, [3, 0]])
    np.testing.assert_array_equal(_t(x)[..., [0]].numpy(), x[..., [0]])
    for result in _compiled(lambda a, i: a[i] * 2.0, _t(x), _t(idx, "int64")):
        np.testing.assert_array_equal(result.numpy(), x[idx] * 2)


def test_bool_mask_indexing_works_eagerly_and_under_autodiff_but_not_while_recording():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    mask = x > 2.5
    np.testing.assert_array_equal(_t(x)[mask].numpy(), x[mask])
    np.testing.assert_array_equal(_t(x)[_t(mask[:, 0], "bool")].numpy(), x[mask[:, 0]])
    g = grad(lambda v: (v[_t(mask, "bool")] ** 2).sum())(_t(x)).numpy()
    np.testing.assert_array_equal(g, np.where(mask, 2 * x, 0))
    with pytest.raises(TraceError, match="shape would depend on the mask"):
        xla_trace(lambda a, m: a[m])(_t(x), _t(mask, "bool"))


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ((np.array([0]), np.array([1])), "not implemented"),
        ((0, np.array([1])), "not implemented"),
        ((slice(1, None), np.array([1])), "not implemented"),
        (np.array([0.5]), "integer or bool"),
        (np.array([[True, False]]), "does not match"),
    ],
)
def test_unsupported_indexing_says_what_is_supported(index, message):
    with pytest.raises(OpError, match=message):
        _t(np.zeros((2, 3)))[index]


def test_out_of_range_indices_raise_naming_the_op_and_the_user_line():
    x = _t(np.zeros((3, 2)))
    with pytest.raises(OpError, match=r"take: index 3 is out of bounds for axis 0 with size 3.*test_gather_ops.py"):
        x[_t([0, 3], "int32")]
    with pytest.raises(OpError, match="index -3 is out of bounds for axis 1 with size 2"):
        F.scatter_add(x, 1, _t([[-3]], "int64"), _t([[1.0]]))
    with pytest.raises(OpError, match="must be int32 or int64, got bool"):
        F.take(x, _t([True], "bool"), axis=0)


# -- in-place assignment ------------------------------------------------------------------


def test_setitem_basic_indices_follow_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [
        (1, 7.0),
        ((slice(None, None, -2), 0, slice(3, 0, -2)), np.array([10.0, 20.0], np.float32)),
        ((Ellipsis, None, 2), np.array([[-1.0], [-2.0], [-3.0]], np.float32)),
        ((0, slice(1, 3)), True),
    ]
    for index, value in cases:
        expected = x.copy()
        expected[index] = value
        t = _t(x)
        t[index] = value
        np.testing.assert_array_equal(t.numpy(), expected)
    t = _t(np.zeros(3), "int32")
    with pytest.raises(OpError, match="unsafe float-to-int32 cast"):
        t[0] = 1.5


def test_setitem_with_an_index_tensor_and_a_mask():
    x = np.zeros((4, 2), np.float32)
    t = _t(x)
    t[_t([3, -4], "int32")] = _t([[1.0, 2.0], [3.0, 4.0]])
    t[np.array([False, True, False, False])] = -1.0
    expected = x.copy()
    expected[[3, -4]] = [[1.0, 2.0], [3.0, 4.0]]
    expected[1] = -1.0
    np.testing.assert_array_equal(t.numpy(), expected)
    with pytest.raises(OpError, match="takes a Python scalar value"):
        t[np.array([True, False, False, False])] = _t([1.0, 2.0])


def test_setitem_in_a_compiled_step_updates_the_tensor_in_place():
    state = _t(np.zeros((3, 4)))

    @xla_trace
    def step(state, rows, value):
        state[rows, :] = value
        state[:, ::3] = state[:, ::3] + 1.0
        return state.sum()

    expected = np.zeros((3, 4), np.float32)
    for k in range(3):
        rows = _t([k, -1], "int32")
        total = step(state, rows, _t([float(k)]))
        expected[[k, -1], :] = k
        expected[:, ::3] += 1
        np.testing.assert_array_equal(state.numpy(), expected)
        assert float(total.numpy()) == expected.sum()
    assert step.cache_size == 1


def test_setitem_gradient_wrt_target_and_value():
    x, v = _t(np.ones((3, 4))), _t([2.0, 3.0])

    def f(a, b):
        a = a * 1.0
        a[1, 1::2] = b
        return (a * a).sum()

    gx, gv = grad(f, argnums=(0, 1))(x, v)
    expected = np.full((3, 4), 2.0, np.float32)
    expected[1, 1::2] = 0.0
    np.testing.assert_array_equal(gx.numpy(), expected)
    np.testing.assert_array_equal(gv.numpy(), [4.0, 6.0])


# -- second order, modules, trace files -----------------------------------------------------


def test_second_order_gradients_through_take_and_scatter_add():
    x = _t([1.0, 2.0, 3.0])
    idx = _t([0, 0, 2], "int32")

    def f(v):
        return (F.take(v, idx) ** 3).sum()

    # d/dv sum(v[idx]^3) = 3 * count * v^2; second derivative 6 * count * v.
    g2 = grad(lambda v: grad(f)(v).sum())(x).numpy()
    np.testing.assert_allclose(g2, [6 * 2 * 1.0, 0.0, 6 * 1 * 3.0])

    def h(v):
        return (F.scatter_add(F.zeros((2,)), 0, _t([1, 1, 0], "int64"), v) ** 2).sum()

    g2 = grad(lambda v: grad(h)(v).sum())(x).numpy()
    np.testing.assert_allclose(g2, [4.0, 4.0, 2.0])


def test_embedding_module_initializes_from_a_standard_normal():
    nn.init.seed(0)
    emb = nn.Embedding(1000, 16)
    w = emb.weight.numpy()
    assert w.shape == (1000, 16) and w.dtype == np.float32
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02
    out = emb(_t([[1, 2], [999, 0]], "int32"))
    np.testing.assert_array_equal(out.numpy(), w[[[1, 2], [999, 0]]])
    assert repr(emb) == "Embedding(1000, 16)"


def test_gather_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def program(a, rows):
        a = a * 1.0
        a[::-1, 1] = 5.0
        a[rows] = 0.0
        return F.index_add(F.masked_fill(a, a > 3.0, -1.0), 0, rows, a[:1], alpha=2.0)

    program(_t(np.arange(6).reshape(2, 3)), _t([1], "int32"))
    program.trace.save(tmp_path / "p.trace.json")
    loaded = Trace.load(tmp_path / "p.trace.json")
    assert loaded.records == program.trace.records
    assert {"setitem", "index_copy", "masked_fill", "index_add"} <= {r.op for r in loaded.records}
