"""Layer functions that model code calls as ``F.*`` (PyTorch's names), composites of
registered ops: ``linear``, ``rms_norm``, ``mish``, and ``pad`` (the ``pad`` op's NumPy
widths or PyTorch's flat list; :mod:`hlotrace.functional` binds it over the op family's).

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
from hlotrace.ops.layout.padding import pad as _numpy_pad
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


_TORCH_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def pad(x, pad_width=None, mode="constant", value=0, *, pad=None):
    """``np.pad`` (``pad_width`` an int, one ``(before, after)`` pair for every dim, or one
    pair per dim), or PyTorch's ``F.pad(x, pad)``: a flat list of ints, last dim first
    (``(left, right, top, bottom, ...)``), that pads the trailing ``len(pad) // 2`` dims.

    The flat list is PyTorch's when given as ``pad=``, or positionally when it has 4, 6, ...
    entries (no NumPy width has that form). A positional flat pair ``(1, 2)`` keeps NumPy's
    meaning, ``(1, 2)`` on every dim, which is PyTorch's only for a 1-d tensor: write
    ``pad=(1, 2)`` for PyTorch's last-dim-only pad. PyTorch's form also takes negative widths
    (they crop), ``value=None`` (0) and the mode ``"replicate"`` (NumPy's ``"edge"``); the
    modes are "constant" (``value``), "reflect" and "edge".

    >>> import numpy as np, hlotrace as ht, hlotrace.functional as F
    >>> F.pad(ht.tensor(np.ones((1, 2, 3), np.float32)), (1, 1, 0, 2)).shape  # last dim 1+1, then 0+2
    (1, 4, 5)
    """
    if pad is not None:
        if pad_width is not None:
            raise TypeError("pad: give NumPy's pad_width or PyTorch's pad=, not both")
        return _torch_pad(x, pad, mode, value)
    if _is_flat_ints(pad_width) and len(pad_width) >= 4:
        return _torch_pad(x, pad_width, mode, value)
    return _numpy_pad(x, pad_width, mode, 0 if value is None else value)


def _is_flat_ints(widths) -> bool:
    return isinstance(widths, tuple | list) and all(
        isinstance(w, int | np.integer) and not isinstance(w, bool) for w in widths
    )


def _torch_pad(x, flat, mode, value):
    x = _as_tensor(x)
    if not _is_flat_ints(flat) or len(flat) % 2 or len(flat) > 2 * x.ndim:
        raise _composite_error(
            "pad",
            f"PyTorch's pad must be a flat list of an even number of ints, at most 2 per dim "
            f"({2 * x.ndim}), last dim first; got {flat!r}",
            x,
        )
    if mode not in _TORCH_PAD_MODES:
        raise _composite_error("pad", f"mode must be one of {', '.join(map(repr, _TORCH_PAD_MODES))}, got {mode!r}", x)
    pairs = [(0, 0)] * (x.ndim - len(flat) // 2)
    pairs += [(int(flat[i]), int(flat[i + 1])) for i in range(len(flat) - 2, -1, -2)]
    if any(b < 0 or a < 0 for b, a in pairs):  # negative widths crop, as PyTorch's
        x = x[tuple(slice(max(-b, 0), d - max(-a, 0)) for d, (b, a) in zip(x.shape, pairs, strict=True))]
        pairs = [(max(b, 0), max(a, 0)) for b, a in pairs]
    return _numpy_pad(x, tuple(pairs), _TORCH_PAD_MODES[mode], 0 if value is None else value)
