"""The sorting, scan and extra reduction ops beyond what the generated property and gradient
tests check: the conventions chosen at the edges (NaN in argmax/sort, stability, -0.0,
descending order, logsumexp's infinities, var's ddof), the composites (topk, std), the
zero-safe gradients of cumprod and prod against brute force, PyTorch's formulas, attribute
errors and the trace file round trip of the attributes."""

import itertools
import math

import numpy as np
import pytest
import scipy.special

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.trace import Trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _both(fn, *arrays):
    """fn's eager and compiled results on ``arrays`` (NumPy arrays)."""
    eager = fn(*[ht.tensor(a) for a in arrays])
    traced = xla_trace(fn)
    traced(*[ht.tensor(a) for a in arrays])
    compiled = traced(*[ht.tensor(a) for a in arrays])
    flatten = (lambda r: [t.numpy() for t in r]) if isinstance(eager, tuple) else (lambda r: [r.numpy()])
    return flatten(eager), flatten(compiled)


def _assert_same(fn, *arrays, expected=None, rtol=0.0):
    """Compiled equals eager (within ``rtol``), and eager equals ``expected`` if given."""
    eager, compiled = _both(fn, *arrays)
    for e, c in zip(eager, compiled, strict=True):
        assert e.dtype == c.dtype
        np.testing.assert_allclose(c, e, rtol=rtol, atol=0)
    if expected is not None:
        for e, x in zip(eager, expected, strict=True):
            np.testing.assert_array_equal(e, x)
    return eager


# -- argmax / argmin ---------------------------------------------------------------------


def test_argmax_and_argmin_take_the_first_extreme_and_nan_counts_as_both_extremes():
    x = np.array([[1.0, 3.0, 3.0, -0.0], [np.nan, 2.0, np.nan, 0.0], [0.0, -0.0, -np.inf, -np.inf]], np.float32)
    (out,) = _assert_same(lambda v: F.argmax(v, axis=1), x, expected=[[1, 0, 0]])
    assert out.dtype == np.int64
    _assert_same(lambda v: F.argmin(v, axis=1), x, expected=[[3, 0, 2]])
    _assert_same(lambda v: F.argmax(v), x, expected=[np.int64(4)])  # flattened: the first NaN
    (kept,) = _assert_same(lambda v: F.argmin(v, keepdims=True), x)
    assert kept.shape == (1, 1) and kept.item() == 4
    # int64 indices whatever the input dtype; bool and int64 extremes.
    _assert_same(lambda v: F.argmin(v, axis=0), np.array([[True], [False], [False]]), expected=[[1]])
    big = np.array([-(2**63), 2**63 - 1, 2**63 - 1], np.int64)
    _assert_same(lambda v: F.argmax(v), big, expected=[np.int64(1)])
    _assert_same(lambda v: F.argmin(v), big, expected=[np.int64(0)])


def test_argmax_over_an_empty_axis_is_an_error():
    with pytest.raises(OpError, match="argmax: attempt to get argmax of an empty sequence"):
        F.argmax(_t(np.zeros((2, 0))), axis=1)
    with pytest.raises(OpError, match="argmin: attempt to get argmin of an empty tensor"):
        F.argmin(_t(np.zeros((0, 3))))
    assert F.argmax(_t(np.zeros((0, 3))), axis=1).shape == (0,)  # empty, but not along the axis


# -- sort / argsort / sort_by_key / topk ------------------------------------------------------


def test_sort_puts_nan_last_ascending_and_first_descending_and_keeps_signed_zeros_in_order():
    x = np.array([0.0, np.nan, -0.0, 1.0, -np.inf, np.nan, 0.0, -0.0], np.float32)
    (up,) = _assert_same(lambda v: F.sort(v), x)
    np.testing.assert_array_equal(up, [-np.inf, 0.0, -0.0, 0.0, -0.0, 1.0, np.nan, np.nan])
    assert np.signbit(up[1:5]).tolist() == [False, True, False, True]  # stable: input order
    (down,) = _assert_same(lambda v: F.sort(v, descending=True), x)
    np.testing.assert_array_equal(down, [np.nan, np.nan, 1.0, 0.0, -0.0, 0.0, -0.0, -np.inf])
    assert np.signbit(down[3:7]).tolist() == [False, True, False, True]
    _assert_same(lambda v: F.argsort(v), x, expected=[[4, 0, 2, 6, 7, 3, 1, 5]])
    _assert_same(lambda v: F.argsort(v, descending=True), x, expected=[[1, 5, 3, 0, 2, 6, 7, 4]])


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool", "float16", "bfloat16"])
def test_argsort_is_stable_both_ways_like_a_stable_sort_of_the_reversed_order(dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (3, 40)).astype(dtype)
    (up,) = _assert_same(lambda v: F.argsort(v, axis=1), x)
    np.testing.assert_array_equal(up, np.argsort(x, axis=1, kind="stable"))
    (down,) = _assert_same(lambda v: F.argsort(v, axis=0, descending=True), x)
    keys = -x.astype(np.float64) if dtype != "bool" else ~x
    np.testing.assert_array_equal(down, np.argsort(keys, axis=0, kind="stable"))  # ties: lower index first


def test_argsort_of_int64_extremes_and_long_tied_slices():
    x = np.array([2**63 - 1, -(2**63), 2**53 + 1, 2**53, -1, 2**63 - 1], np.int64)
    _assert_same(lambda v: F.argsort(v, descending=True), x, expected=[[0, 5, 2, 3, 4, 1]])
    tied = np.random.default_rng(1).integers(0, 3, 5000).astype(np.float32)
    (order,) = _assert_same(lambda v: F.argsort(v, descending=True), tied)
    np.testing.assert_array_equal(order, np.argsort(-tied, kind="stable"))


def test_sort_by_key_and_its_inverse_undo_each_other():
    rng = np.random.default_rng(2)
    key = rng.integers(0, 4, (3, 6)).astype(np.float32)
    v = rng.standard_normal((3, 6)).astype(np.float32)
    order = np.argsort(-key, axis=1, kind="stable")
    _assert_same(lambda a, k: F.sort_by_key(a, k, descending=True), v, key, expected=[np.take_along_axis(v, order, 1)])
    back = F.sort_by_key(F.sort_by_key(_t(v), _t(key), axis=0), _t(key), axis=0, inverse=True)
    np.testing.assert_array_equal(back.numpy(), v)


def test_sort_gradient_goes_back_to_where_each_value_came_from():
    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]], np.float32)
    w = np.array([[10.0, 20.0, 30.0], [1.0, 2.0, 3.0]], np.float32)
    for descending in (False, True):
        g = grad(lambda v, d=descending: (F.sort(v, axis=1, descending=d) * _t(w)).sum())(_t(x)).numpy()
        order = np.argsort(-x if descending else x, axis=1)
        expected = np.empty_like(w)
        np.put_along_axis(expected, order, w, 1)
        np.testing.assert_array_equal(g, expected)


def test_topk_returns_values_and_indices_with_ties_at_the_lower_index():
    x = np.array([[1.0, 5.0, 5.0, np.nan, 2.0], [4.0, 4.0, 4.0, 0.0, 9.0]], np.float32)
    values, indices = _assert_same(lambda v: F.topk(v, 3), x)
    np.testing.assert_array_equal(values, [[np.nan, 5.0, 5.0], [9.0, 4.0, 4.0]])
    np.testing.assert_array_equal(indices, [[3, 1, 2], [4, 0, 1]])
    assert indices.dtype == np.int64
    values, indices = _assert_same(lambda v: F.topk(v, 2, axis=0, descending=False), x)
    np.testing.assert_array_equal(indices, [[0, 1, 1, 1, 0], [1, 0, 0, 0, 1]])
    for k in (0, 5):
        v, i = F.topk(_t(x), k)
        assert v.shape == i.shape == (2, k)
    g = grad(lambda v: F.topk(v, 2)[0].sum())(_t([[3.0, 1.0, 2.0, 3.0]])).numpy()
    np.testing.assert_array_equal(g, [[1.0, 0.0, 0.0, 1.0]])


# -- cumsum / cumprod ---------------------------------------------------------------------


def test_scan_dtypes_wrap_flatten_reverse_and_keep_a_leading_negative_zero():
    (ints,) = _assert_same(lambda v: F.cumsum(v, axis=0), np.array([2**31 - 1, 1, 5], np.int32))
    assert ints.dtype == np.int32 and ints.tolist() == [2**31 - 1, -(2**31), -(2**31) + 5]
    (bools,) = _assert_same(lambda v: F.cumsum(v), np.array([[True, False], [True, True]]))
    assert bools.dtype == np.int32 and bools.tolist() == [1, 1, 2, 3]  # axis=None flattens
    _assert_same(
        lambda v: F.cumprod(v, axis=1, reverse=True), np.array([[2, 3, 4]], np.int64), expected=[[[24, 12, 4]]]
    )
    (zeros,) = _assert_same(lambda v: F.cumsum(v, axis=0), np.array([-0.0, -0.0, 0.0, -0.0], np.float32))
    assert np.signbit(zeros).tolist() == [True, True, False, False]
    (wide,) = _assert_same(lambda v: F.cumsum(v, axis=0, dtype="float64"), np.array([1, 2], np.int32))
    assert wide.dtype == np.float64


def test_half_precision_scans_accumulate_in_float32_and_round_each_output_once():
    x = np.array([2048.0, 1.0, 1.0, 1.0, 1.0], np.float16)
    (out,) = _assert_same(lambda v: F.cumsum(v, axis=0), x)
    np.testing.assert_array_equal(out, np.array([2048, 2049, 2050, 2051, 2052], np.float32).astype(np.float16))
    assert out[2] == 2050 and np.cumsum(x)[2] == 2048  # NumPy's float16 steps lose every 1


def _brute_force_cumprod_grad(x, w):
    """d sum(w * cumprod(x)) / dx from the products themselves (no division)."""
    g = np.zeros_like(x)
    for k in range(len(x)):
        for i in range(k, len(x)):
            g[k] += w[i] * np.prod([x[j] for j in range(i + 1) if j != k])
    return g


@pytest.mark.parametrize(
    "values", [[2.0, 0.0, 3.0, 0.0, 5.0], [2.0, 0.0, 3.0, 4.0], [0.0, 0.0, 1.5], [1.5, -2.0, 0.5], [0.0]]
)
def test_cumprod_gradient_is_right_at_zeros(values):
    x = np.array(values, np.float64)
    w = np.arange(1.0, len(x) + 1)

    def loss(v):
        return (F.cumprod(v, axis=0) * ht.tensor(w)).sum()

    expected = _brute_force_cumprod_grad(x, w)
    np.testing.assert_allclose(grad(loss)(ht.tensor(x)).numpy(), expected, rtol=1e-12)
    traced = xla_trace(grad(loss))
    traced(ht.tensor(x))
    np.testing.assert_allclose(traced(ht.tensor(x)).numpy(), expected, rtol=1e-12)
    rev = grad(lambda v: (F.cumprod(v, axis=0, reverse=True) * ht.tensor(w[::-1].copy())).sum())(
        ht.tensor(x[::-1].copy())
    )
    np.testing.assert_allclose(rev.numpy(), expected[::-1], rtol=1e-12)


@pytest.mark.parametrize("values", [[[2.0, 0.0, 3.0], [0.0, 0.0, 4.0]], [[1.5, -2.0, 0.5], [3.0, 0.0, 0.25]]])
def test_prod_gradient_is_the_product_of_the_others_even_at_zeros(values):
    x = np.array(values, np.float64)
    for axis in (1, (0, 1), 0):
        g = grad(lambda v, a=axis: F.prod(v, axis=a).sum())(ht.tensor(x)).numpy()
        axes = (axis,) if isinstance(axis, int) else axis
        expected = np.zeros_like(x)
        for index in itertools.product(*map(range, x.shape)):
            mates = [
                j
                for j in itertools.product(*map(range, x.shape))
                if all(j[d] == index[d] for d in range(2) if d not in axes)
            ]
            expected[index] = np.prod([x[j] for j in mates if j != index])
        np.testing.assert_array_equal(g, expected)


# -- any / all / prod / var / std / logsumexp ------------------------------------------------


def test_any_and_all_count_nan_as_true_and_negative_zero_as_false():
    x = np.array([[np.nan, -0.0], [-0.0, 0.0], [1.0, 2.0]], np.float32)
    (some,) = _assert_same(lambda v: F.any(v, axis=1), x, expected=[[True, False, True]])
    assert some.dtype == np.bool_
    _assert_same(lambda v: F.all(v, axis=1), x, expected=[[False, False, True]])
    _assert_same(lambda v: F.any(v, axis=0, keepdims=True), np.zeros((0, 2), np.int32), expected=[[[False, False]]])
    _assert_same(lambda v: F.all(v), np.zeros((0,), np.int32), expected=[np.bool_(True)])


def test_prod_dtypes_follow_sum_and_wrap():
    (out,) = _assert_same(lambda v: F.prod(v), np.array([65536, 65536, 3], np.int32))
    assert out.dtype == np.int32 and out.item() == 0
    (b,) = _assert_same(lambda v: F.prod(v, axis=0), np.array([True, True]))
    assert b.dtype == np.int32 and b.item() == 1
    _assert_same(lambda v: F.prod(v, axis=1), np.zeros((2, 0), np.float32), expected=[[1.0, 1.0]])


def test_var_matches_numpy_and_pytorch_unbiased_formula_far_from_zero():
    rng = np.random.default_rng(3)
    x = (1e4 + rng.standard_normal((4, 50))).astype(np.float32)
    (out,) = _assert_same(lambda v: F.var(v, axis=1, ddof=1), x, rtol=1e-6)
    exact = np.var(x.astype(np.float64), axis=1, ddof=1)  # torch.var(x, dim=1) (unbiased)
    np.testing.assert_allclose(out, exact, rtol=1e-3)
    std = F.std(_t(x), axis=1, ddof=1).numpy()
    np.testing.assert_allclose(std, np.sqrt(exact), rtol=1e-3)
    (ints,) = _assert_same(lambda v: F.var(v), np.array([1, 2, 3, 4], np.int32))
    assert ints.dtype == np.float32 and ints.item() == 1.25


def test_var_with_ddof_at_or_past_the_count_is_inf_or_nan():
    x = np.array([[1.0, 2.0], [3.0, 3.0]], np.float32)
    (out,) = _assert_same(lambda v: F.var(v, axis=1, ddof=2), x)
    assert out[0] == np.inf and np.isnan(out[1])
    (empty,) = _assert_same(lambda v: F.var(v, axis=1), np.zeros((2, 0), np.float32))
    assert np.isnan(empty).all()


def test_var_and_std_gradients():
    x = _t([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]])
    g = grad(lambda v: F.var(v, axis=1, ddof=1).sum())(x).numpy()
    np.testing.assert_allclose(g, 2 * (x.numpy() - x.numpy().mean(1, keepdims=True)) / 2, rtol=1e-6)
    g = grad(lambda v: F.std(v, axis=1).sum())(x).numpy()
    centered = x.numpy() - x.numpy().mean(1, keepdims=True)
    np.testing.assert_allclose(g, centered / 3 / np.sqrt((centered**2).mean(1, keepdims=True)), rtol=1e-5)


def test_logsumexp_rules_for_infinities_nan_and_empty_slices():
    inf = np.inf
    x = np.array([[-inf, -inf], [inf, 1.0], [inf, -inf], [np.nan, inf], [1e30, 1e30], [-1e4, -1e4]], np.float32)
    (out,) = _assert_same(lambda v: F.logsumexp(v, axis=1), x, rtol=1e-6)
    np.testing.assert_array_equal(out[:4], [-inf, inf, inf, np.nan])
    np.testing.assert_allclose(out[4:], [1e30, -1e4 + math.log(2)], rtol=1e-6)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(out, scipy.special.logsumexp(x, axis=1), rtol=1e-6)
    _assert_same(lambda v: F.logsumexp(v, axis=0), np.zeros((0, 2), np.float32), expected=[[-inf, -inf]])


def test_logsumexp_gradient_is_softmax_and_zero_over_minus_inf_slices():
    x = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]], np.float32)
    g = grad(lambda v: F.logsumexp(v, axis=1).sum())(_t(x)).numpy()
    np.testing.assert_allclose(g[0], scipy.special.softmax(x[0]), rtol=1e-6)
    np.testing.assert_array_equal(g[1], [0.0, 0.0, 0.0])


# -- errors and trace files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: F.sort(_t(1.0)), "sort: needs a tensor of rank >= 1"),
        (lambda: F.argsort(_t([1.0]), axis=1), "argsort: axis 1 is out of bounds"),
        (lambda: F.sort(_t([1.0]), descending=1), "sort: descending must be a bool"),
        (lambda: F.argmax(_t([1.0]), axis=(0,)), "argmax: axis must be an int"),
        (lambda: F.sort_by_key(_t([1.0]), _t([1.0, 2.0])), r"sort_by_key: values of shape \(1,\) and keys"),
        (lambda: F.topk(_t([1.0, 2.0]), 3), r"topk: k=3 is outside \[0, 2\]"),
        (lambda: F.topk(_t([1.0, 2.0]), 1.0), "topk: k must be an int"),
        (lambda: F.topk(_t(1.0), 1), "topk: needs a tensor of rank >= 1"),
        (lambda: F.cumsum(_t([1.5]), dtype="int32"), "cumsum: cannot accumulate float32 in int32"),
        (lambda: F.cumsum(_t([1]), dtype="bool"), "cumsum: dtype must be int32, int64 or a float dtype"),
        (lambda: F.cumprod(_t([1.0]), axis=1), "cumprod: axis 1 is out of bounds"),
        (lambda: F.var(_t([1.0]), ddof=-1), "var: ddof must be a non-negative int"),
        (lambda: F.logsumexp(_t([1], "int32")), "logsumexp: defined for float tensors only"),
        (lambda: F.prod(_t([1.0]), keepdims=None), "prod: keepdims must be a bool"),
    ],
)
def test_bad_attributes_name_the_op_and_the_user_line(call, message):
    with pytest.raises(OpError, match=message) as info:
        call()
    assert "test_sorting_ops.py" in str(info.value)


def test_attributes_round_trip_through_trace_files(tmp_path):
    @xla_trace
    def f(x):
        values, _ = F.topk(x, 2, axis=0)
        return (
            F.sort_by_key(x, x, descending=True, inverse=True).sum()
            + F.cumsum(x, dtype="float64").sum()
            + F.var(x, axis=(0, 1), ddof=1)
            + values.sum()
            + F.argmax(x, keepdims=True).sum()
        )

    x = _t([[1.0, 3.0], [2.0, 0.5]])
    f(x)
    f.trace.save(tmp_path / "f.trace.json")
    loaded = Trace.load(tmp_path / "f.trace.json")
    assert loaded.records == f.trace.records
    scan = next(r for r in loaded.records if r.op == "cumsum")
    assert scan.attrs == {"axis": None, "reverse": False, "dtype": np.float64}
