"""The device eager engine and tensors placed on a mesh (issue 35): an eager op on a placed
tensor is one clear error naming the op and the way out, never a one-device executable fed a
sharded buffer."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace.errors import OpError


def test_an_eager_op_on_a_placed_tensor_says_what_to_do(devices):
    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    x = dist.shard(ht.tensor(np.ones((4, 3), np.float32)), mesh, dist.P("data"))
    with (
        ht.eager_engine("device"),
        pytest.raises(OpError, match=r"multiply: an input of shape \[4, 3\] is placed on a mesh.*xla_trace"),
    ):
        x * 2.0
    with ht.eager_engine("numpy"):  # the NumPy engine computes the global view
        np.testing.assert_array_equal((x * 2.0).numpy(), np.full((4, 3), 2.0, np.float32))
