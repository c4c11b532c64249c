"""The pooling family's geometry (output sizes, windows, divisors), attribute checks and the
NumPy helpers of its references, shared by its ops, samples and lowering rules."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import Aval

FAMILY = "pooling"

MAX_POOL_DTYPES = (*dt.FLOATING, dt.int32, dt.int64)

# -- geometry shared with the lowering rules ---------------------------------------------


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


def adaptive_pairs(size, output_size):
    """Every ((i, rows), (j, cols)) window pair of an adaptive pool, rows/cols as slices."""
    rows, cols = (adaptive_windows(n, m) for n, m in zip(size, output_size, strict=True))
    return [((i, slice(*r)), (j, slice(*c))) for i, r in enumerate(rows) for j, c in enumerate(cols)]
