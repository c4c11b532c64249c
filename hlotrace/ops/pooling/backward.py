"""Backward primitives of the pooling ops; semantics in :mod:`hlotrace.ops.pooling`.

- ``max_pool2d_backward(x, ct)``: zeros of ``x``'s shape with each window's cotangent added
  at the element the window selects (first maximum in row-major window order, last NaN if
  the window holds NaN, never padding); float16/bfloat16 accumulate in float32.
- ``max_pool2d_gather(x, g)``: ``g`` (shaped like ``x``) read at each window's selected
  element: the transpose of max_pool2d_backward in its second operand.
- ``avg_pool2d_backward(ct, input_size)``: each window's ``ct / divisor`` added over the
  window's input elements (padding dropped): the transpose of avg_pool2d.
- ``adaptive_avg_pool2d_backward(ct, input_size)``, ``adaptive_max_pool2d_backward(x, ct)``
  and ``adaptive_max_pool2d_gather(x, g, output_size)``: the same for the adaptive windows.

Each selection-based op is piecewise constant in ``x``: its VJP gives ``x`` no cotangent.
Sums start at +0.0, so a result is never -0.0.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.pooling.samples import adaptive_backward_sample, avg_backward_sample, max_backward_sample
from hlotrace.ops.pooling.window import (
    FAMILY,
    _int_pair,
    adaptive_counts,
    adaptive_pairs,
    avg_divisors,
    check_keys,
    check_nchw,
    output_size_attr,
    pooled_shape,
    pytorch_argmax,
    window_attrs,
    windows_of,
)
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = [
    "adaptive_avg_pool2d_backward",
    "adaptive_max_pool2d_backward",
    "adaptive_max_pool2d_gather",
    "avg_pool2d_backward",
    "max_pool2d_backward",
    "max_pool2d_gather",
]

_WINDOW = ("kernel_size", "stride", "padding")


def _same(a: Aval, b: Aval, what_a: str, what_b: str, shape=None) -> None:
    shape = a.shape if shape is None else shape
    if b.shape != tuple(shape) or b.dtype != a.dtype:
        raise ShapeDtypeError(f"{what_b} must be {dt.SHORT_NAMES.get(a.dtype, a.dtype)}{list(shape)} for this {what_a}")


def _size_attr(value, what: str = "input_size") -> tuple[int, int]:
    size = _int_pair(value, what)
    if min(size) < 1:
        raise ShapeDtypeError(f"{what} {size} must be positive")
    return size


# -- NumPy helpers --------------------------------------------------------------------------


def _max_pool_argmax(x, kernel_size, stride, padding) -> np.ndarray:
    """(N, C, OH, OW) flat positions (h * W + w) each window of ``x`` selects."""
    h, w = x.shape[2:]
    values = windows_of(x.astype(np.float64), kernel_size, stride, padding, -np.inf)
    index = windows_of(np.arange(h * w).reshape(1, 1, h, w), kernel_size, stride, padding, -1)
    k = kernel_size[0] * kernel_size[1]
    return pytorch_argmax(values.reshape(*values.shape[:4], k), index.reshape(*index.shape[:4], k))


def _adaptive_argmax(x, output_size) -> np.ndarray:
    n, c, h, w = x.shape
    index = np.arange(h * w).reshape(h, w)
    out = np.zeros((n, c, *output_size), np.int64)
    for (i, rows), (j, cols) in adaptive_pairs((h, w), output_size):
        window = index[rows, cols].reshape(-1)
        out[:, :, i, j] = pytorch_argmax(x[:, :, rows, cols].reshape(n, c, window.size), window)
    return out


def _scatter(ct, argmax, shape) -> np.ndarray:
    """Zeros of ``shape`` with ``ct`` added at the flat spatial positions ``argmax``, in
    row-major window order, in compute_dtype."""
    acc = compute_dtype(ct.dtype)
    planes = shape[0] * shape[1]
    dx = np.zeros((planes, shape[2] * shape[3]), acc)
    per_plane = argmax.shape[2] * argmax.shape[3]
    rows = np.broadcast_to(np.arange(planes)[:, None], (planes, per_plane))
    np.add.at(dx, (rows, argmax.reshape(planes, per_plane)), ct.astype(acc).reshape(planes, per_plane))
    return dx.reshape(shape)


def _gather(g, argmax) -> np.ndarray:
    planes = g.shape[0] * g.shape[1]
    flat = np.take_along_axis(
        g.reshape(planes, g.shape[2] * g.shape[3]), argmax.reshape(planes, argmax.shape[2] * argmax.shape[3]), axis=1
    )
    return flat.reshape(argmax.shape)


# -- max_pool2d_backward / max_pool2d_gather -------------------------------------------------


def _max_canonicalize(second: str):
    def canonicalize(avals, attrs):
        check_keys(attrs, _WINDOW)
        x, other = avals
        check_nchw(x, dt.FLOATING, "x")
        out = window_attrs(attrs, x.shape[2:])
        pooled = pooled_shape(x.shape, out["kernel_size"], out["stride"], out["padding"])
        _same(x, other, "x and window", second, pooled if second == "ct" else None)
        return out

    return canonicalize


def _max_backward_reference(x, ct, *, kernel_size, stride, padding):
    return _scatter(ct, _max_pool_argmax(x, kernel_size, stride, padding), x.shape)


def _max_gather_reference(x, g, *, kernel_size, stride, padding):
    return _gather(g, _max_pool_argmax(x, kernel_size, stride, padding))


def max_pool2d_backward(x, ct, kernel_size, stride=None, padding=0):
    """max_pool2d's VJP: zeros like ``x`` with each window's ``ct`` added at its selected element."""
    return apply(MAX_POOL2D_BACKWARD, x, ct, kernel_size=kernel_size, stride=stride, padding=padding)


def max_pool2d_gather(x, g, kernel_size, stride=None, padding=0):
    """``g`` (shaped like ``x``) read at each max_pool2d window's selected element of ``x``."""
    return apply(MAX_POOL2D_GATHER, x, g, kernel_size=kernel_size, stride=stride, padding=padding)


def _max_backward_vjp(ct, out, x, source, *, kernel_size, stride, padding):
    return (None, F.max_pool2d_gather(x, ct, kernel_size, stride, padding))


def _max_gather_vjp(ct, out, x, g, *, kernel_size, stride, padding):
    return (None, F.max_pool2d_backward(x, ct, kernel_size, stride, padding))


# -- avg_pool2d_backward --------------------------------------------------------------------


def _avg_backward_canonicalize(avals, attrs):
    check_keys(attrs, ("input_size", *_WINDOW, "count_include_pad"))
    (ct,) = avals
    check_nchw(ct, dt.FLOATING, "ct")
    size = _size_attr(attrs.get("input_size"))
    out = window_attrs(attrs, size)
    pooled = pooled_shape((*ct.shape[:2], *size), out["kernel_size"], out["stride"], out["padding"])
    if ct.shape != pooled:
        raise ShapeDtypeError(f"ct has shape {ct.shape}, but pooling an input of size {size} gives {pooled}")
    flag = attrs.get("count_include_pad", True)
    if not isinstance(flag, bool | np.bool_):
        raise ShapeDtypeError(f"count_include_pad must be a bool, got {flag!r}")
    return {"input_size": size, **out, "count_include_pad": bool(flag)}


def _avg_backward_infer(ct: Aval, *, input_size, **attrs) -> Aval:
    return Aval((*ct.shape[:2], *input_size), ct.dtype)


def _avg_backward_reference(ct, *, input_size, kernel_size, stride, padding, count_include_pad):
    acc = compute_dtype(ct.dtype)
    (h, w), (kh, kw), (sh, sw), (ph, pw) = input_size, kernel_size, stride, padding
    oh, ow = ct.shape[2:]
    scaled = ct.astype(acc) / avg_divisors(input_size, kernel_size, stride, padding, count_include_pad).astype(acc)
    dx = np.zeros((*ct.shape[:2], h + 2 * ph, w + 2 * pw), acc)
    for a in range(kh):
        for b in range(kw):
            dx[:, :, a : a + sh * (oh - 1) + 1 : sh, b : b + sw * (ow - 1) + 1 : sw] += scaled
    return dx[:, :, ph : ph + h, pw : pw + w]


def avg_pool2d_backward(ct, input_size, kernel_size, stride=None, padding=0, count_include_pad=True):
    """avg_pool2d's VJP: each window's ``ct / divisor`` spread over its input elements."""
    return apply(
        AVG_POOL2D_BACKWARD,
        ct,
        input_size=input_size,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        count_include_pad=count_include_pad,
    )


def _avg_backward_vjp(ct, out, source, *, input_size, kernel_size, stride, padding, count_include_pad):
    return (F.avg_pool2d(ct, kernel_size, stride, padding, count_include_pad),)


# -- adaptive backward ops ------------------------------------------------------------------


def _adaptive_avg_backward_canonicalize(avals, attrs):
    check_keys(attrs, ("input_size",))
    check_nchw(avals[0], dt.FLOATING, "ct")
    return {"input_size": _size_attr(attrs.get("input_size"))}


def _adaptive_avg_backward_reference(ct, *, input_size):
    acc = compute_dtype(ct.dtype)
    scaled = ct.astype(acc) / adaptive_counts(input_size, ct.shape[2:]).astype(acc)
    dx = np.zeros((*ct.shape[:2], *input_size), acc)
    for (i, rows), (j, cols) in adaptive_pairs(input_size, ct.shape[2:]):
        dx[:, :, rows, cols] += scaled[:, :, i, j, None, None]
    return dx


def _adaptive_max_backward_canonicalize(avals, attrs):
    check_keys(attrs, ())
    x, ct = avals
    check_nchw(x, dt.FLOATING, "x")
    check_nchw(ct, dt.FLOATING, "ct")
    _same(x, ct, "x", "ct", (*x.shape[:2], *ct.shape[2:]))
    return {}


def _adaptive_max_gather_canonicalize(avals, attrs):
    check_keys(attrs, ("output_size",))
    x, g = avals
    check_nchw(x, dt.FLOATING, "x")
    _same(x, g, "x", "g")
    return {"output_size": output_size_attr(attrs.get("output_size"), x.shape[2:])}


def adaptive_avg_pool2d_backward(ct, input_size):
    """adaptive_avg_pool2d's VJP: each window's ``ct / count`` spread over its input elements."""
    return apply(ADAPTIVE_AVG_POOL2D_BACKWARD, ct, input_size=input_size)


def adaptive_max_pool2d_backward(x, ct):
    """adaptive_max_pool2d's VJP: zeros like ``x`` with ``ct`` added at each window's selected element."""
    return apply(ADAPTIVE_MAX_POOL2D_BACKWARD, x, ct)


def adaptive_max_pool2d_gather(x, g, output_size):
    """``g`` (shaped like ``x``) read at each adaptive max window's selected element of ``x``."""
    return apply(ADAPTIVE_MAX_POOL2D_GATHER, x, g, output_size=output_size)


# -- registration -------------------------------------------------------------------------


def _register(name, reference, infer, canonicalize, sample, vjp, doc):
    return register_op(
        OpDef(
            name=name,
            family=FAMILY,
            reference=reference,
            infer=infer,
            canonicalize=canonicalize,
            sample=sample,
            vjp=vjp,
            doc=doc,
        )
    )


MAX_POOL2D_BACKWARD = _register(
    "max_pool2d_backward",
    _max_backward_reference,
    lambda x, ct, **attrs: x,
    _max_canonicalize("ct"),
    lambda s: max_backward_sample(s, "max_pool2d_backward"),
    _max_backward_vjp,
    "max_pool2d's VJP: ct added at each window's first max (last NaN) of x (overlaps add up)",
)
MAX_POOL2D_GATHER = _register(
    "max_pool2d_gather",
    _max_gather_reference,
    lambda x, g, **attrs: Aval(pooled_shape(x.shape, attrs["kernel_size"], attrs["stride"], attrs["padding"]), x.dtype),
    _max_canonicalize("g"),
    lambda s: max_backward_sample(s, "max_pool2d_gather"),
    _max_gather_vjp,
    "g (shaped like x) at each max_pool2d window's first max (last NaN) of x; max_pool2d_backward's transpose",
)
AVG_POOL2D_BACKWARD = _register(
    "avg_pool2d_backward",
    _avg_backward_reference,
    _avg_backward_infer,
    _avg_backward_canonicalize,
    avg_backward_sample,
    _avg_backward_vjp,
    "avg_pool2d's VJP: each window's ct / divisor added over its input elements (input_size=(H, W))",
)
ADAPTIVE_AVG_POOL2D_BACKWARD = _register(
    "adaptive_avg_pool2d_backward",
    _adaptive_avg_backward_reference,
    _avg_backward_infer,
    _adaptive_avg_backward_canonicalize,
    lambda s: adaptive_backward_sample(s, "adaptive_avg_pool2d_backward"),
    lambda ct, out, source, *, input_size: (F.adaptive_avg_pool2d(ct, tuple(source.shape[2:])),),
    "adaptive_avg_pool2d's VJP: each window's ct / count added over its input elements",
)
ADAPTIVE_MAX_POOL2D_BACKWARD = _register(
    "adaptive_max_pool2d_backward",
    lambda x, ct: _scatter(ct, _adaptive_argmax(x, ct.shape[2:]), x.shape),
    lambda x, ct: x,
    _adaptive_max_backward_canonicalize,
    lambda s: adaptive_backward_sample(s, "adaptive_max_pool2d_backward"),
    lambda ct, out, x, source: (None, F.adaptive_max_pool2d_gather(x, ct, tuple(source.shape[2:]))),
    "adaptive_max_pool2d's VJP: ct added at each adaptive window's first max (last NaN) of x",
)
ADAPTIVE_MAX_POOL2D_GATHER = _register(
    "adaptive_max_pool2d_gather",
    lambda x, g, *, output_size: _gather(g, _adaptive_argmax(x, output_size)),
    lambda x, g, *, output_size: Aval((*x.shape[:2], *output_size), x.dtype),
    _adaptive_max_gather_canonicalize,
    lambda s: adaptive_backward_sample(s, "adaptive_max_pool2d_gather"),
    lambda ct, out, x, g, *, output_size: (None, F.adaptive_max_pool2d_backward(x, ct)),
    "g (shaped like x) at each adaptive max window's first max (last NaN) of x",
)
