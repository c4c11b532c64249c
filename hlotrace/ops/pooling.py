"""Pooling (NCHW): max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d.

Semantics (each op's reference below is the definition the lowering rules must match):

- Inputs are NCHW tensors of rank 4 with non-empty spatial dims (H, W >= 1); the batch and
  channel dims may be empty. The public functions also take an unbatched CHW tensor (a
  reshape around the rank-4 op, as PyTorch). ``kernel_size``, ``stride`` and ``padding`` are
  an int or an (h, w) pair; ``stride=None`` means ``kernel_size``; ``padding`` is at most
  half the kernel (``padding <= kernel_size // 2``, PyTorch's rule), and the padded input
  must hold one window. Output side: ``(n + 2 * padding - kernel) // stride + 1``.
  Not supported (PyTorch has them): ``dilation``, ``ceil_mode``, ``return_indices``,
  ``divisor_override``.
- ``max_pool2d``: the maximum of each window, padding counting as -inf (the dtype's lowest
  value for integers). NaN propagates: a window holding NaN gives NaN, as PyTorch (XLA:CPU
  drops NaN in large non-overlapping windowed max reductions; the rule guards against it).
  When +0.0 and -0.0 tie for the maximum the result's sign is unspecified (hlotrace's max;
  PyTorch returns the first). Float tensors and int32/int64.
- ``avg_pool2d``: the window sum over zero padding divided by the kernel area
  (``count_include_pad=True``) or by the number of input elements in the window. The sum
  starts at +0.0, so a window of -0.0 gives +0.0 (as PyTorch). float16/bfloat16 are
  computed in float32 and rounded once. Float tensors only.
- ``adaptive_avg_pool2d`` / ``adaptive_max_pool2d``: output index ``i`` along a dim of
  input size ``n`` and output size ``m`` pools input rows ``floor(i * n / m)`` to
  ``ceil((i + 1) * n / m)`` (exclusive), PyTorch's windows. ``output_size`` is an int or a
  pair whose None entries keep the input size; it may exceed the input size (windows then
  repeat rows). Average: float tensors (half precision in float32); max: float and
  int32/int64, NaN propagates.

Gradients (PyTorch's CPU and CUDA kernels give the same):

- max pools send each window's cotangent to ONE element: the first maximal element in
  row-major window order, except that a window holding NaN sends it to its LAST NaN
  (PyTorch's loop ``if (val > maxval || isnan(val))``); a window of only -inf sends it to its
  first element. Padding never receives gradient. Overlapping windows add up (in float32
  for float16/bfloat16). The maximum is piecewise constant in its selection, so the
  backward primitives below have no gradient with respect to ``x``.
- avg pools are linear; their VJPs are the ``*_backward`` primitives, whose own VJPs are
  the forward ops again (gradients of gradients work to any order).

Backward primitives (hlotrace/ops/pooling_grad.py; public, since VJPs are ordinary ops):
``max_pool2d_backward(x, ct)`` adds ``ct`` at each window's selected element of ``x``,
``max_pool2d_gather(x, g)`` reads ``g`` there (its transpose), ``avg_pool2d_backward(ct,
input_size)``, ``adaptive_avg_pool2d_backward(ct, input_size)``,
``adaptive_max_pool2d_backward(x, ct)`` and ``adaptive_max_pool2d_gather(x, g, output_size)``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "pooling"

MAX_POOL_DTYPES = (*dt.FLOATING, dt.int32, dt.int64)

# -- geometry shared with the lowering rules ---------------------------------------------


def compute_dtype(dtype) -> np.dtype:
    """The dtype sums and gradient accumulations run in: float32 for float16/bfloat16."""
    return dt.promote_strong(np.dtype(dtype), dt.float32)


def lowest(dtype):
    """What max pooling pads with: -inf, or the integer dtype's lowest value."""
    dtype = np.dtype(dtype)
    return int(np.iinfo(dtype).min) if dtype in dt.INTEGER else -np.inf


def pool_output_size(n: int, kernel: int, stride: int, padding: int) -> int:
    return (n + 2 * padding - kernel) // stride + 1


def pooled_shape(shape, kernel_size, stride, padding) -> tuple:
    n, c, h, w = shape
    return (n, c, *(pool_output_size(*g) for g in zip((h, w), kernel_size, stride, padding, strict=True)))


def adaptive_windows(n: int, m: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows: ``[floor(i * n / m), ceil((i + 1) * n / m))`` for i < m."""
    return [(i * n // m, -(-(i + 1) * n // m)) for i in range(m)]


def window_counts(n: int, kernel: int, stride: int, padding: int) -> np.ndarray:
    """Input elements (not padding) in each window along one dim."""
    starts = np.arange(pool_output_size(n, kernel, stride, padding)) * stride - padding
    return np.minimum(starts + kernel, n) - np.maximum(starts, 0)


def avg_divisors(size, kernel_size, stride, padding, count_include_pad) -> np.ndarray:
    """(OH, OW) float64 divisors of avg_pool2d: the kernel area, or the non-padding count."""
    if count_include_pad:
        out = [pool_output_size(*g) for g in zip(size, kernel_size, stride, padding, strict=True)]
        return np.full(out, float(kernel_size[0] * kernel_size[1]))
    rows, cols = (window_counts(*g) for g in zip(size, kernel_size, stride, padding, strict=True))
    return np.outer(rows, cols).astype(np.float64)


def adaptive_counts(size, output_size) -> np.ndarray:
    """(OH, OW) float64 element counts of the adaptive windows."""
    rows, cols = ([e - s for s, e in adaptive_windows(n, m)] for n, m in zip(size, output_size, strict=True))
    return np.outer(rows, cols).astype(np.float64)


# -- attribute checks ---------------------------------------------------------------------


def _int_pair(value, what: str) -> tuple[int, int]:
    def is_int(v):
        return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)

    if is_int(value):
        return (int(value), int(value))
    if isinstance(value, tuple | list) and len(value) == 2 and all(is_int(v) for v in value):
        return (int(value[0]), int(value[1]))
    raise ShapeDtypeError(f"{what} must be an int or a pair of ints, got {value!r}")


def check_nchw(aval: Aval, admitted, what: str = "input") -> None:
    if len(aval.shape) != 4:
        raise ShapeDtypeError(f"{what} must be an NCHW tensor of rank 4, got rank {len(aval.shape)}")
    if aval.shape[2] == 0 or aval.shape[3] == 0:
        raise ShapeDtypeError(f"{what} has empty spatial dims {aval.shape[2:]} (H and W must be >= 1)")
    if aval.dtype not in admitted:
        kinds = "float" if admitted == dt.FLOATING else "float and int32/int64"
        raise ShapeDtypeError(f"{what} must be a {kinds} tensor, got {aval.dtype}")


def check_keys(attrs: dict, allowed) -> None:
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (takes {', '.join(f'{k}=' for k in allowed)})")


def window_attrs(attrs: dict, size) -> dict:
    """Canonical ``kernel_size``, ``stride`` and ``padding`` (int pairs) for windows over the
    spatial ``size`` (H, W), with PyTorch's limits checked."""
    if attrs.get("kernel_size") is None:
        raise ShapeDtypeError("needs kernel_size=")
    kernel = _int_pair(attrs["kernel_size"], "kernel_size")
    stride = kernel if attrs.get("stride") is None else _int_pair(attrs["stride"], "stride")
    padding = _int_pair(attrs.get("padding", 0), "padding")
    if min(kernel) < 1 or min(stride) < 1:
        raise ShapeDtypeError(f"kernel_size {kernel} and stride {stride} must be positive")
    if min(padding) < 0:
        raise ShapeDtypeError(f"padding {padding} must not be negative")
    if any(p > k // 2 for p, k in zip(padding, kernel, strict=True)):
        raise ShapeDtypeError(
            f"padding {padding} must be at most half the kernel size {kernel} (PyTorch: pad should be at most "
            f"half of kernel size)"
        )
    if any(n + 2 * p < k for n, p, k in zip(size, padding, kernel, strict=True)):
        raise ShapeDtypeError(
            f"kernel_size {kernel} does not fit the input's spatial size {tuple(size)} padded by {padding}: "
            f"the output would be empty"
        )
    return {"kernel_size": kernel, "stride": stride, "padding": padding}


def output_size_attr(value, size) -> tuple[int, int]:
    """Canonical adaptive ``output_size``: an int or a pair, None entries meaning ``size``'s."""
    if value is None:
        raise ShapeDtypeError("needs output_size=")
    pair = (value, value) if not isinstance(value, tuple | list) else tuple(value)
    if len(pair) != 2:
        raise ShapeDtypeError(f"output_size must be an int or a pair, got {value!r}")
    pair = tuple(n if v is None else v for v, n in zip(pair, size, strict=True))
    out = _int_pair(pair, "output_size")
    if min(out) < 1:
        raise ShapeDtypeError(f"output_size {out} must be positive")
    return out


# -- NumPy helpers of the references -------------------------------------------------------


def windows_of(x: np.ndarray, kernel_size, stride, padding, fill) -> np.ndarray:
    """(N, C, OH, OW, kh, kw) view of the windows of ``x`` padded with ``fill``."""
    (ph, pw), (sh, sw) = padding, stride
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    return sliding_window_view(padded, tuple(kernel_size), axis=(2, 3))[:, :, ::sh, ::sw]


def pytorch_argmax(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """PyTorch's selection over the last axis: the first maximum, the last NaN if any;
    ``index`` holds flat input positions (-1 for padding, never selected), broadcasting
    against ``values``. A window of only -inf selects its first element."""
    values, index = np.broadcast_arrays(values.astype(np.float64), index)
    valid = index >= 0
    best = np.take_along_axis(index, np.argmax(valid, axis=-1)[..., None], axis=-1)[..., 0]
    best_value = np.full(best.shape, -np.inf)
    for k in range(values.shape[-1]):
        v = values[..., k]
        take = valid[..., k] & ((v > best_value) | np.isnan(v))
        best_value = np.where(take, v, best_value)
        best = np.where(take, index[..., k], best)
    return best


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


def adaptive_pairs(size, output_size):
    """Every ((i, rows), (j, cols)) window pair of an adaptive pool, rows/cols as slices."""
    rows, cols = (adaptive_windows(n, m) for n, m in zip(size, output_size, strict=True))
    return [((i, slice(*r)), (j, slice(*c))) for i, r in enumerate(rows) for j, c in enumerate(cols)]


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
    from hlotrace.tensor import Tensor, tensor

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
        sample=lambda s: pooling_samples.window_sample(s, "max_pool2d"),
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
        sample=lambda s: pooling_samples.window_sample(s, "avg_pool2d"),
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
        sample=lambda s: pooling_samples.adaptive_sample(s, "adaptive_avg_pool2d"),
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
        sample=lambda s: pooling_samples.adaptive_sample(s, "adaptive_max_pool2d"),
        vjp=_adaptive_max_pool2d_vjp,
        doc="NCHW max over PyTorch's adaptive windows; NaN propagates; floats and int32/int64",
    )
)

import hlotrace.ops.pooling_samples as pooling_samples  # noqa: E402
from hlotrace.ops.pooling_grad import *  # noqa: E402, F403
from hlotrace.ops.pooling_grad import __all__ as _grad_all  # noqa: E402

__all__ = ["adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "max_pool2d", *_grad_all]
