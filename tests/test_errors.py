"""User mistakes raise hlotrace errors naming the op, shapes/dtypes and the user's line."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.errors import OpError


def test_broadcast_error_names_op_shapes_and_line():
    a = ht.tensor(np.ones((3, 4), "float32"))
    b = ht.tensor(np.ones((5,), "int32"))
    with pytest.raises(OpError) as info:
        a + b
    message = str(info.value)
    assert message.startswith("add:")
    assert "f32[3,4]" in message and "i32[5]" in message
    assert "test_errors.py" in message


def test_bool_subtract_is_refused_like_numpy():
    t = ht.tensor([True, False])
    with pytest.raises(OpError, match=r"subtract.*bool"):
        t - t


def test_integer_negative_power_is_an_op_error():
    with pytest.raises(OpError, match=r"power.*negative integer powers"):
        F.power(ht.tensor([2, 3]), ht.tensor([-1, 1]))


def test_unsupported_dtype_is_refused():
    with pytest.raises(OpError, match="not supported"):
        ht.tensor(np.array([1 + 2j]))
    with pytest.raises(OpError, match=r"unknown dtype|not supported"):
        F.astype(ht.tensor([1.0]), "complex64")


def test_bitwise_operators_need_bool():
    with pytest.raises(OpError, match="bool tensors only"):
        ht.tensor([1, 2]) & ht.tensor([1, 0])


def test_python_data_defaults_to_32_bit_and_numpy_arrays_keep_64_bit():
    assert ht.tensor(np.zeros(2)).dtype == np.float64
    assert ht.tensor([1.0, 2.0]).dtype == np.float32
    assert ht.tensor([1, 2]).dtype == np.int32


def test_weak_python_scalars_keep_the_tensor_dtype():
    h = ht.tensor(np.ones(2, "float16"))
    assert (h * 2.5).dtype == np.float16
    assert (ht.tensor([1, 2]) * 2.5).dtype == np.float32
    assert (ht.tensor([True]) + 1).dtype == np.int32
    bf = ht.tensor(np.ones(2), dtype="bfloat16")
    assert (bf + 1.0).dtype == bf.dtype
    assert (bf + h).dtype == np.float32
