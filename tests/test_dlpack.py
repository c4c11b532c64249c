"""DLPack round trips (issue 23, part 3): NumPy and jax always, PyTorch when importable."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.errors import HlotraceError
from hlotrace.jit import xla_trace


def _compiled_result():
    f = xla_trace(lambda x: x * 2.0)
    x = ht.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    f(x)
    out = f(x)  # compiled: holds a device buffer only
    assert out._device is not None and out._host is None
    return out


def test_numpy_from_a_host_tensor_shares_memory_and_stays_read_only():
    t = ht.tensor(np.arange(4, dtype=np.float32))
    a = np.from_dlpack(t)
    assert np.shares_memory(a, t.numpy())
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


def test_numpy_from_a_device_tensor():
    out = _compiled_result()
    a = np.from_dlpack(out)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    assert out.__dlpack_device__() == (1, 0)


def test_from_dlpack_of_numpy_is_zero_copy():
    source = np.arange(5, dtype=np.float64)
    t = ht.from_dlpack(source)
    assert t.dtype == np.float64 and np.shares_memory(t.numpy(), source)
    source[0] = 42.0  # documented: the Tensor views the producer's memory
    assert t.numpy()[0] == 42.0


def test_from_dlpack_converts_unsupported_dtypes():
    t = ht.from_dlpack(np.arange(3, dtype=np.uint8))
    assert t.dtype == ht.tensor(np.arange(3, dtype=np.uint8)).dtype
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])


def test_jax_round_trip():
    import jax
    import jax.dlpack

    out = _compiled_result()
    j = jax.dlpack.from_dlpack(out)
    np.testing.assert_array_equal(np.asarray(j), out.numpy())
    back = ht.from_dlpack(jax.device_put(np.arange(3, dtype=np.float32)))
    np.testing.assert_array_equal(back.numpy(), [0, 1, 2])
    # A jax array is usable as an input of a compiled function.
    f = xla_trace(lambda x: x + 1.0)
    f(back)
    np.testing.assert_array_equal(f(back).numpy(), [1, 2, 3])


def test_a_legacy_consumer_gets_a_copy_of_a_read_only_host_array():
    t = ht.tensor(np.arange(3, dtype=np.float32))
    capsule = t.__dlpack__()  # no max_version: the pre-1.0 protocol cannot say read-only
    assert capsule is not None
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)


def test_from_dlpack_refuses_other_objects():
    with pytest.raises(HlotraceError, match="not a DLPack producer"):
        ht.from_dlpack([1, 2, 3])
    t = ht.tensor([1.0])
    assert ht.from_dlpack(t) is t


def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    out = _compiled_result()
    tt = torch.from_dlpack(out)
    np.testing.assert_array_equal(tt.numpy(), out.numpy())
    back = ht.from_dlpack(torch.arange(4, dtype=torch.float32))
    np.testing.assert_array_equal(back.numpy(), [0, 1, 2, 3])
