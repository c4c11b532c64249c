"""Layer functions that model code calls as ``F.*`` (PyTorch's names), composites of
registered ops: ``linear``, ``rms_norm``, ``mish``.

>>> import numpy as np, hlotrace as ht, hlotrace.functional as F
>>> F.linear(ht.tensor(np.ones((2, 3), np.float32)), ht.tensor(np.ones((4, 3), np.float32))).shape
(2, 4)
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.common import F
from hlotrace.ops.common import as_tensor as _as_tensor
from hlotrace.ops.common import composite_error as _composite_error
from hlotrace.trace import scope

__all__ = ["linear", "mish", "rms_norm"]


def linear(x, weight, bias=None):
    """``x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``
    (PyTorch's ``F.linear``; ``bias`` may be None)."""
    x, weight = _as_tensor(x), _as_tensor(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise _composite_error(
            "linear", "weight must be (out_features, in_features) with in_features = x's last dim", x, weight
        )
    y = F.matmul(x, weight, transpose_b=True)
    return y if bias is None else y + bias


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x², trailing dims) + eps) * weight`` over the trailing dims
    ``normalized_shape`` (PyTorch's ``F.rms_norm``; ``eps`` None means the dtype's machine
    epsilon). float16/bfloat16 inputs are normalized in float32 and cast back."""
    x = _as_tensor(x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else tuple(normalized_shape)
    shape = tuple(int(d) for d in shape)
    if not dt.is_floating(x.dtype) or len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise _composite_error("rms_norm", f"x must be a float tensor ending in dims {shape}", x)
    if weight is not None:
        weight = _as_tensor(weight)
        if weight.shape != shape:
            raise _composite_error("rms_norm", f"weight must have shape {shape}", x, weight)
    eps = float(np.finfo(x.dtype).eps) if eps is None else float(eps)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    with scope("hlotrace.rms_norm"):
        wide = F.astype(x, "float32") if x.dtype.itemsize < 4 else x
        y = wide * F.rsqrt(F.mean(wide * wide, axis=axes, keepdims=True) + eps)
        y = F.astype(y, x.dtype) if y.dtype != x.dtype else y
        return y if weight is None else y * weight


def mish(x):
    """``x * tanh(softplus(x))`` (Misra 2019; PyTorch's ``F.mish``)."""
    return x * F.tanh(F.softplus(x))
