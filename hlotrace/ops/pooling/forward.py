"""max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d: references, inference,
VJPs and user functions (semantics in :mod:`hlotrace.ops.pooling`)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.pooling.samples import adaptive_sample, window_sample
from hlotrace.ops.pooling.window import (
    FAMILY,
    MAX_POOL_DTYPES,
    adaptive_counts,
    adaptive_pairs,
    avg_divisors,
    check_keys,
    check_nchw,
    lowest,
    output_size_attr,
    pooled_shape,
    window_attrs,
    windows_of,
)
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.tensor import Tensor, tensor

__all__ = ["adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "max_pool2d"]


# -- max_pool2d ---------------------------------------------------------------------------


def _window_canonicalize(admitted, extra=()):
    def canonicalize(avals, attrs):
        check_keys(attrs, ("kernel_size", "stride", "padding", *extra))
        check_nchw(avals[0], admitted)
        out = window_attrs(attrs, avals[0].shape[2:])
        if "count_include_pad" in extra:
            flag = attrs.get("count_include_pad", True)
            if not isinstance(flag, bool | np.bool_):
                raise ShapeDtypeError(f"count_include_pad must be a bool, got {flag!r}")
            out["count_include_pad"] = bool(flag)
        return out

    return canonicalize


def _pool_infer(x: Aval, *, kernel_size, stride, padding, **attrs) -> Aval:
    return Aval(pooled_shape(x.shape, kernel_size, stride, padding), x.dtype)


def _max_pool2d_reference(x, *, kernel_size, stride, padding):
    wide = x.astype(compute_dtype(x.dtype)) if x.dtype in dt.FLOATING else x
    return np.max(windows_of(wide, kernel_size, stride, padding, lowest(x.dtype)), axis=(4, 5))


def _max_pool2d_vjp(ct, out, x, *, kernel_size, stride, padding):
    return (F.max_pool2d_backward(x, ct, kernel_size, stride, padding),)


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """Maximum over ``kernel_size`` windows of an NCHW (or CHW) tensor, -inf padding; NaN
    propagates. The gradient goes to each window's first maximum (its last NaN if any)."""
    return _unbatched(x, lambda t: apply(MAX_POOL2D, t, kernel_size=kernel_size, stride=stride, padding=padding))


# -- avg_pool2d ---------------------------------------------------------------------------


def _avg_pool2d_reference(x, *, kernel_size, stride, padding, count_include_pad):
    acc = compute_dtype(x.dtype)
    total = np.sum(windows_of(x.astype(acc), kernel_size, stride, padding, 0), axis=(4, 5))
    return total / avg_divisors(x.shape[2:], kernel_size, stride, padding, count_include_pad).astype(acc)


def _avg_pool2d_vjp(ct, out, x, *, kernel_size, stride, padding, count_include_pad):
    return (F.avg_pool2d_backward(ct, x.shape[2:], kernel_size, stride, padding, count_include_pad),)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Mean over ``kernel_size`` windows of an NCHW (or CHW) tensor, zero padding; the
    divisor is the kernel area, or (``count_include_pad=False``) the non-padding count."""
    return _unbatched(
        x,
        lambda t: apply(
            AVG_POOL2D, t, kernel_size=kernel_size, stride=stride, padding=padding, count_include_pad=count_include_pad
        ),
    )


# -- adaptive pools -----------------------------------------------------------------------


def _adaptive_canonicalize(admitted):
    def canonicalize(avals, attrs):
        check_keys(attrs, ("output_size",))
        check_nchw(avals[0], admitted)
        return {"output_size": output_size_attr(attrs.get("output_size"), avals[0].shape[2:])}

    return canonicalize


def _adaptive_infer(x: Aval, *, output_size) -> Aval:
    return Aval((*x.shape[:2], *output_size), x.dtype)


def _adaptive_avg_pool2d_reference(x, *, output_size):
    acc = compute_dtype(x.dtype)
    out = np.zeros((*x.shape[:2], *output_size), acc)
    for (i, rows), (j, cols) in adaptive_pairs(x.shape[2:], output_size):
        out[:, :, i, j] = np.sum(x[:, :, rows, cols].astype(acc), axis=(2, 3))
    return out / adaptive_counts(x.shape[2:], output_size).astype(acc)


def _adaptive_max_pool2d_reference(x, *, output_size):
    out = np.zeros((*x.shape[:2], *output_size), x.dtype)
    for (i, rows), (j, cols) in adaptive_pairs(x.shape[2:], output_size):
        out[:, :, i, j] = np.max(x[:, :, rows, cols], axis=(2, 3))
    return out


def _adaptive_avg_pool2d_vjp(ct, out, x, *, output_size):
    return (F.adaptive_avg_pool2d_backward(ct, x.shape[2:]),)


def _adaptive_max_pool2d_vjp(ct, out, x, *, output_size):
    return (F.adaptive_max_pool2d_backward(x, ct),)


def adaptive_avg_pool2d(x, output_size):
    """Mean over PyTorch's adaptive windows giving ``output_size`` (int or pair; None entries
    keep the input size) of an NCHW (or CHW) tensor."""
    return _unbatched(x, lambda t: apply(ADAPTIVE_AVG_POOL2D, t, output_size=output_size))


def adaptive_max_pool2d(x, output_size):
    """Maximum over PyTorch's adaptive windows giving ``output_size`` of an NCHW (or CHW)
    tensor; NaN propagates; the gradient follows max_pool2d's tie rule."""
    return _unbatched(x, lambda t: apply(ADAPTIVE_MAX_POOL2D, t, output_size=output_size))


def _unbatched(x, fn):
    """``fn`` on ``x``, or on ``x`` with a batch dim of 1 added and removed if it is CHW."""
    x = x if isinstance(x, Tensor) else tensor(x)
    if x.ndim != 3:
        return fn(x)
    y = fn(F.reshape(x, (1, *x.shape)))
    return F.reshape(y, y.shape[1:])


MAX_POOL2D = register_op(
    OpDef(
        name="max_pool2d",
        family=FAMILY,
        reference=_max_pool2d_reference,
        infer=_pool_infer,
        canonicalize=_window_canonicalize(MAX_POOL_DTYPES),
        sample=lambda s: window_sample(s, "max_pool2d"),
        vjp=_max_pool2d_vjp,
        doc="NCHW max over windows (kernel_size, stride, padding <= kernel/2 with -inf); NaN propagates",
    )
)
AVG_POOL2D = register_op(
    OpDef(
        name="avg_pool2d",
        family=FAMILY,
        reference=_avg_pool2d_reference,
        infer=_pool_infer,
        canonicalize=_window_canonicalize(dt.FLOATING, ("count_include_pad",)),
        sample=lambda s: window_sample(s, "avg_pool2d"),
        vjp=_avg_pool2d_vjp,
        doc="NCHW mean over windows, zero padding; divisor kernel area or non-pad count; half in float32",
    )
)
ADAPTIVE_AVG_POOL2D = register_op(
    OpDef(
        name="adaptive_avg_pool2d",
        family=FAMILY,
        reference=_adaptive_avg_pool2d_reference,
        infer=_adaptive_infer,
        canonicalize=_adaptive_canonicalize(dt.FLOATING),
        sample=lambda s: adaptive_sample(s, "adaptive_avg_pool2d"),
        vjp=_adaptive_avg_pool2d_vjp,
        doc="NCHW mean over PyTorch's adaptive windows [floor(i*n/m), ceil((i+1)*n/m)); half in float32",
    )
)
ADAPTIVE_MAX_POOL2D = register_op(
    OpDef(
        name="adaptive_max_pool2d",
        family=FAMILY,
        reference=_adaptive_max_pool2d_reference,
        infer=_adaptive_infer,
        canonicalize=_adaptive_canonicalize(MAX_POOL_DTYPES),
        sample=lambda s: adaptive_sample(s, "adaptive_max_pool2d"),
        vjp=_adaptive_max_pool2d_vjp,
        doc="NCHW max over PyTorch's adaptive windows; NaN propagates; floats and int32/int64",
    )
)
