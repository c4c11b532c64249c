"""Layer functions that model code calls as ``F.*`` (PyTorch's names), composites of
registered ops: ``linear``, ``rms_norm``, ``mish``, ``scaled_dot_product_attention``
(PyTorch's signature) and ``pad`` (the ``pad`` op's NumPy widths or PyTorch's flat list;
:mod:`hlotrace.functional` binds it over the op family's). ``interpolate`` (PyTorch's
nearest and (bi/tri)linear resampling) is here for ``nn.Upsample`` and
``hlotrace.torch.nn.functional``; it is not one of ``hlotrace.functional``'s names.

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
from hlotrace.tensor import tensor as _constant
from hlotrace.trace import scope

__all__ = ["linear", "mish", "rms_norm", "scaled_dot_product_attention"]


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


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, *, mask=None, causal=None
):
    """``softmax(query @ keyᵀ * scale + mask) @ value`` with PyTorch's signature and
    semantics (a composite: matmul, where, softmax, dropout).

    Shapes ``query (..., L, E)``, ``key (..., S, E)``, ``value (..., S, Ev)`` (leading dims
    broadcast) give ``(..., L, Ev)``; ``scale`` defaults to ``1 / sqrt(E)``. ``attn_mask``,
    broadcastable to ``(..., L, S)``: bool, True where a query may attend (PyTorch's
    convention; ``nn.MultiheadAttention`` takes the opposite one), or float, added to the
    scores. ``is_causal=True`` lets query ``i`` attend key ``j <= i`` (top-left aligned when
    L != S, as PyTorch; giving ``attn_mask`` too is an error, as there). ``dropout_p`` > 0
    drops attention weights (``F.dropout``, drawn from the default generator) whatever the
    module's mode: pass ``dropout_p=self.dropout if self.training else 0.0`` as PyTorch code
    does. A query that may attend no key gets NaN (softmax over only -inf), as PyTorch's math
    path. ``mask=`` and ``causal=`` are hlotrace's earlier names for ``attn_mask`` and
    ``is_causal``.

    >>> import numpy as np, hlotrace as ht, hlotrace.functional as F
    >>> q = ht.tensor(np.ones((2, 3, 4), np.float32))
    >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (2, 3, 4)
    """
    name = "scaled_dot_product_attention"
    if mask is not None:
        if attn_mask is not None:
            raise TypeError(f"{name}: give attn_mask= or mask= (its earlier name), not both")
        attn_mask = mask
    if causal is not None:
        is_causal = is_causal or causal
    q, k, v = _as_tensor(query), _as_tensor(key), _as_tensor(value)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise _composite_error(name, "q, k and v need rank >= 2", q, k, v)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise _composite_error(
            name,
            f"q's last dim ({q.shape[-1]}) must equal k's ({k.shape[-1]}), and k and v need the same "
            f"number of keys ({k.shape[-2]} vs {v.shape[-2]})",
            q,
            k,
            v,
        )
    if is_causal and attn_mask is not None:
        raise _composite_error(name, "give attn_mask or is_causal=True, not both (as PyTorch)", q, k, v)
    scale = 1.0 / float(q.shape[-1]) ** 0.5 if scale is None else float(scale)
    with scope("hlotrace.attention"):
        scores = F.matmul(q, k, transpose_b=True) * scale
        if is_causal:
            rows, cols = q.shape[-2], k.shape[-2]
            allowed = F.greater_equal(F.reshape(F.arange(rows), (rows, 1)), F.arange(cols))
            scores = F.where(allowed, scores, float("-inf"))
        if attn_mask is not None:
            attn_mask = _as_tensor(attn_mask)
            scores = F.where(attn_mask, scores, float("-inf")) if attn_mask.dtype == bool else scores + attn_mask
        weights = F.softmax(scores, axis=-1)
        if dropout_p:
            weights = F.dropout(weights, dropout_p, training=True)
        return F.matmul(weights, v)


_INTERPOLATE_MODES = {"nearest": None, "linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):  # noqa: A002  (PyTorch's names)
    """PyTorch's ``F.interpolate`` of ``(N, C, *spatial)`` inputs: ``mode`` "nearest", or
    "linear" / "bilinear" / "trilinear" (1, 2 or 3 spatial dims) with ``align_corners``.

    The output's spatial size is ``size`` (an int or one per spatial dim) or
    ``floor(in * scale_factor)``. Source coordinates follow PyTorch's formulas: nearest takes
    ``min(floor(i * s), in - 1)``; the linear modes take ``i * (in - 1) / (out - 1)`` with
    ``align_corners=True``, else ``max((i + 0.5) * s - 0.5, 0)``, and mix the two neighbours
    ``floor(src)`` and ``floor(src) + 1`` (clamped) by the fraction, one spatial dim after the
    other. ``s`` is ``1 / scale_factor`` when a scale factor is given (and
    ``recompute_scale_factor`` is not True), else ``in / out``. A composite: ``take`` along
    each spatial dim with constant indices, and weighted sums, so gradients flow to the input.

    >>> import numpy as np, hlotrace as ht
    >>> x = ht.tensor(np.array([[[[0.0, 1.0], [2.0, 3.0]]]], np.float32))
    >>> interpolate(x, scale_factor=2, mode="bilinear", align_corners=True).numpy()[0, 0, 0]
    array([0.        , 0.33333334, 0.6666667 , 1.        ], dtype=float32)
    """
    x = _as_tensor(input)
    if mode not in _INTERPOLATE_MODES:
        raise _composite_error(
            "interpolate", f"mode must be one of {', '.join(map(repr, _INTERPOLATE_MODES))}, got {mode!r}", x
        )
    spatial = x.shape[2:]
    wanted = _INTERPOLATE_MODES[mode]
    if x.ndim < 3 or (wanted is not None and len(spatial) != wanted):
        what = f"{wanted} spatial dim(s)" if wanted else "at least one spatial dim"
        raise _composite_error("interpolate", f"mode {mode!r} expects (N, C, *spatial) with {what}", x)
    if wanted is None and align_corners is not None:
        raise _composite_error("interpolate", "align_corners applies to the linear modes only (as PyTorch)", x)
    if wanted is not None and not dt.is_floating(x.dtype):
        raise _composite_error("interpolate", f"mode {mode!r} needs a float tensor (as PyTorch)", x)
    out_sizes, scales = _interpolate_sizes(x, size, scale_factor, recompute_scale_factor)
    with scope("hlotrace.interpolate"):
        for axis, (n_in, n_out, given) in enumerate(zip(spatial, out_sizes, scales, strict=True), start=2):
            if wanted is None:
                s = 1.0 / given if given else n_in / n_out
                index = np.minimum(np.floor(np.arange(n_out) * s), n_in - 1).astype(np.int32)
                x = F.take(x, _constant(index), axis=axis)
                continue
            if align_corners:
                src = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
            else:
                s = 1.0 / given if given else n_in / n_out
                src = np.maximum((np.arange(n_out) + 0.5) * s - 0.5, 0.0)
            low = np.minimum(np.floor(src), n_in - 1).astype(np.int32)
            high = np.minimum(low + 1, n_in - 1).astype(np.int32)
            frac = (src - low).reshape((n_out,) + (1,) * (x.ndim - axis - 1))
            x = F.take(x, _constant(low), axis=axis) * _constant((1.0 - frac).astype(x.dtype)) + F.take(
                x, _constant(high), axis=axis
            ) * _constant(frac.astype(x.dtype))
        return x


def _interpolate_sizes(x, size, scale_factor, recompute_scale_factor):
    """(output size, the given scale factor or None) per spatial dim of ``x``."""
    spatial = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise _composite_error("interpolate", "give exactly one of size and scale_factor", x)
    value = size if size is not None else scale_factor
    entries = list(value) if isinstance(value, tuple | list) else [value] * len(spatial)
    if len(entries) != len(spatial) or not all(dt.is_number(e) and e > 0 for e in entries):
        what = "size" if size is not None else "scale_factor"
        raise _composite_error(
            "interpolate", f"{what} must be a positive number or one per spatial dim ({len(spatial)}), got {value!r}", x
        )
    if size is not None:
        return [int(e) for e in entries], [None] * len(spatial)
    outs = [int(np.floor(n * float(f))) for n, f in zip(spatial, entries, strict=True)]
    return outs, [None if recompute_scale_factor else float(f) for f in entries]
