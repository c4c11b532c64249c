"""Regression cases for the shape and indexing ops, each the smallest input that went wrong
(or would have) while they were written."""

import json

import numpy as np
import pytest
from hypothesis import given, settings

import hlotrace as ht
import hlotrace.lowering.rules  # fills the rule registry
import hlotrace.testing.strategies as strategies
from hlotrace import functional as F
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace
from hlotrace.lowering import lower_trace
from hlotrace.ops import OPS
from hlotrace.ops.registry import Aval
from hlotrace.testing.check import check_op
from hlotrace.testing.strategies import OpSample
from hlotrace.trace import Trace

ARANGE5 = np.arange(5, dtype=np.float32)


def test_negative_step_through_zero_keeps_first_element():
    # Guards the canonical slice form: slice(None, None, -1).indices(5) is (4, -1, -1), and a
    # stored stop of -1 would mean "the last element" to NumPy, giving an empty result.
    attrs = OPS["getitem"].canonicalize((Aval((5,), ARANGE5.dtype),), {"index": slice(None, None, -1)})
    assert attrs == {"index": (("slice", 4, None, -1),)}
    check_op(OPS["getitem"], OpSample((ARANGE5,), {"index": slice(None, None, -2)}))


def test_negative_step_start_below_range_is_empty():
    # Guards the other -1: slice(-10, None, -1).indices(5) is (-1, -1, -1), an empty
    # selection that must not turn into x[-1::-1] when replayed.
    attrs = OPS["getitem"].canonicalize((Aval((5,), ARANGE5.dtype),), {"index": slice(-10, None, -1)})
    assert attrs == {"index": (("slice", 0, 0, 1),)}
    check_op(OPS["getitem"], OpSample((ARANGE5,), {"index": slice(-10, None, -1)}))


def test_canonical_index_is_accepted_again():
    # Guards replaying recorded attrs eagerly: canonicalize must be idempotent, including
    # for the ("newaxis",) entry, which stands for None.
    op = OPS["getitem"]
    avals = (Aval((2, 3, 4), ARANGE5.dtype),)
    once = op.canonicalize(avals, {"index": (None, -1, Ellipsis, slice(None, None, -2))})
    assert op.canonicalize(avals, once) == once


def test_recorded_getitem_survives_json_and_lowers():
    # Guards the stored attribute form: tuples of str/int/None only, read back as tuples.
    def program(t):
        return t[-1, ::-2], t[None, ..., 1:3]

    traced = xla_trace(program)
    x = ht.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    traced(x)
    doc, arrays = traced.trace.to_json()
    loaded = Trace.from_json(json.loads(json.dumps(doc)), arrays)
    assert [r.attrs for r in loaded.records] == [r.attrs for r in traced.trace.records]
    lower_trace(loaded)


@pytest.mark.parametrize(
    "index", [1, (-1, slice(None, None, -2)), (None, Ellipsis, slice(1, 3)), Ellipsis, (), np.int64(-2)]
)
def test_python_index_forms(index):
    # Guards Tensor.__getitem__ with the forms users write: x[1], x[-1, ::-2], x[None, ..., 1:3],
    # x[...], x[()] and NumPy integer scalars.
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(ht.tensor(a)[index].numpy(), a[index])
    check_op(OPS["getitem"], OpSample((a,), {"index": index}))


@pytest.mark.parametrize("index", [True, (0, [1])])
def test_unsupported_advanced_indexing_is_refused(index):
    # Guards against silently treating a bool (a mask to NumPy) or a mixed int/list index as
    # basic indexing.
    with pytest.raises(OpError, match="only basic indexing is supported"):
        ht.tensor(np.zeros((2, 3), np.float32))[index]


@pytest.mark.parametrize("index", [[0, 1], np.array([0]), np.array(1), [[1, 0], [0, 0]]])
def test_integer_array_index_is_a_take(index):
    # Lists, integer arrays and integer tensors index axis 0 as NumPy does (a take, recordable).
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ht.tensor(a)[index].numpy(), a[index])
    np.testing.assert_array_equal(ht.tensor(a)[ht.tensor(np.asarray(index))].numpy(), a[np.asarray(index)])


def test_zero_size_reshape_with_unknown_dim():
    # Guards NumPy's rule: -1 next to a 0 is ambiguous, next to positive dims it resolves to 0.
    x = ht.tensor(np.zeros((0, 3), np.float32))
    with pytest.raises(OpError, match=r"cannot reshape 0 elements into \(0, -1\)"):
        F.reshape(x, (0, -1))
    assert F.reshape(x, (-1, 5)).shape == (0, 5)
    check_op(OPS["reshape"], OpSample((np.zeros((0, 3), np.float32),), {"shape": (-1, 5)}))


@settings(max_examples=20)
@given(strategies.distinct_arrays(np.float32, (4, 5)))
def test_shape_samples_are_not_near_constant(x):
    # Guards the samples' power to see misplaced elements: hypothesis fills most of an
    # array from s.arrays with one value, and a getitem rule without its reverse passed.
    finite = x[np.isfinite(x) & ~((x == 0) & np.signbit(x))]
    assert len(np.unique(finite)) == finite.size


def test_a_captured_negative_zero_is_not_rewritten_into_an_iota():
    # Seed 219497072: XLA folded take_along_axis of a captured [-0.0, 1.0, -1.0, 0.0] at [0, 1]
    # into the constant [-0.0, 1.0], which equals an iota under ==, and replaced it by one:
    # +0.0 where NumPy keeps -0.0.
    sample = OpSample(
        (np.array([-0.0, 1.0, -1.0, 0.0], np.float32), np.array([0, 1], np.int32)), {"axis": 0}, captured=[0, 1]
    )
    check_op(OPS["take_along_axis"], sample)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (1,), (2,), (2, 2)])
def test_captured_data_keeps_the_sign_of_zero(dtype, shape):
    # The same rewrite on the captured constant itself: [-0.0, 1.0] came back [+0.0, 1.0].
    data = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    data.flat[0] = -0.0
    data = data.astype(ht.dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    captured = ht.tensor(data)
    traced = xla_trace(lambda: captured, capture_as_const=True)
    traced()
    result = traced().numpy()  # compiled
    assert result.shape == data.shape and result.dtype == data.dtype
    wide = result.astype(np.float64)
    np.testing.assert_array_equal(wide, data.astype(np.float64))
    np.testing.assert_array_equal(np.signbit(wide), np.signbit(data.astype(np.float64)))
