"""hlotrace.serialization's safetensors writer and reader: shapes, dtypes and layouts come
back as written (PyTorch's scalar buffers, such as BatchNorm's counter, are 0-d)."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.serialization import load_safetensors, save_safetensors


@pytest.mark.parametrize(
    "value",
    [
        np.array(7, np.int64),  # BatchNorm's num_batches_tracked
        np.array(-0.0, np.float32),
        np.array(np.inf, np.float32),
        np.array(True),
    ],
    ids=["int64", "negative-zero", "inf", "bool"],
)
def test_a_0d_array_round_trips_with_shape_empty(tmp_path, value):
    save_safetensors({"scalar": value, "as_tensor": ht.tensor(value)}, tmp_path / "s.safetensors")
    loaded = load_safetensors(tmp_path / "s.safetensors")
    for name in ("scalar", "as_tensor"):
        assert loaded[name].shape == ()
        assert loaded[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded[name], value)
        assert np.signbit(loaded[name]) == np.signbit(value)


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 1), (2, 0, 4)], ids=str)
def test_other_shapes_keep_theirs(tmp_path, shape):
    value = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    save_safetensors({"x": value}, tmp_path / "s.safetensors")
    assert load_safetensors(tmp_path / "s.safetensors")["x"].shape == shape


def test_a_strided_view_is_written_in_row_major_order(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base.T[::2]  # neither C- nor F-contiguous
    save_safetensors({"x": view}, tmp_path / "s.safetensors")
    np.testing.assert_array_equal(load_safetensors(tmp_path / "s.safetensors")["x"], view)
