"""The conv family's attribute forms, output sizes, operand checks and tap windows (shared
by its ops, samples and lowering rules)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import Aval

FAMILY = "conv"

WINDOW_ATTRS = ("stride", "padding", "dilation")


def conv_output_size(size, kernel, stride, padding, dilation) -> int:
    """Spatial size of a convolution's result (PyTorch's formula); may be < 1 when the
    kernel does not fit."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_transpose_output_size(size, kernel, stride, padding, output_padding, dilation) -> int:
    """Spatial size of a transposed convolution's result (PyTorch's formula)."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def leftover(size, kernel, stride, padding, dilation) -> int:
    """Rows of the padded input a strided convolution leaves unused at the end: the
    ``output_padding`` that makes conv_transpose give back ``size``."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) % stride


# -- attributes --------------------------------------------------------------------------


def _int(value, what: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}")
    return int(value)


def spatial_ints(value, rank: int, name: str, low: int) -> tuple[int, ...]:
    """``value`` (an int or ``rank`` ints) as a tuple of ``rank`` ints, each >= ``low``."""
    if isinstance(value, list | tuple):
        if len(value) != rank:
            raise ShapeDtypeError(f"{name} needs an int or {rank} ints (one per spatial dim), got {value!r}")
        if any(isinstance(v, list | tuple) for v in value):
            raise ShapeDtypeError(
                f"{name}={value!r}: (low, high) pairs are not supported; give one symmetric {name} per spatial dim"
            )
        values = tuple(_int(v, f"{name} entry") for v in value)
    elif isinstance(value, str):
        raise ShapeDtypeError(f"{name}={value!r}: strings are not supported; give an int or {rank} ints")
    else:
        values = (_int(value, name),) * rank
    if any(v < low for v in values):
        raise ShapeDtypeError(f"{name} must be >= {low}, got {value!r}")
    return values


def window_attrs(attrs: dict, rank: int, op: str, extra=()) -> dict:
    """Canonical stride/padding/dilation (+ ``extra`` tuple attributes) and groups."""
    allowed = {*WINDOW_ATTRS, "groups", *extra}
    unknown = set(attrs) - allowed
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({op} takes {', '.join(sorted(allowed))})")
    out = {
        "stride": spatial_ints(attrs.get("stride", 1), rank, "stride", 1),
        "padding": spatial_ints(attrs.get("padding", 0), rank, "padding", 0),
        "dilation": spatial_ints(attrs.get("dilation", 1), rank, "dilation", 1),
    }
    groups = _int(attrs.get("groups", 1), "groups")
    if groups < 1:
        raise ShapeDtypeError(f"groups must be >= 1, got {groups}")
    out["groups"] = groups
    return out


def check_operand(aval: Aval, rank: int, what: str, layout: str) -> None:
    if aval.dtype not in dt.FLOATING:
        raise ShapeDtypeError(f"{what} must be a float tensor (float16, bfloat16, float32, float64), got {aval.dtype}")
    if len(aval.shape) != rank + 2:
        raise ShapeDtypeError(f"{what} must have rank {rank + 2} ({layout}), got shape {aval.shape}")


def check_sizes(x: Aval, what: str) -> None:
    """Channels and spatial sizes >= 1 (the batch may be 0)."""
    if any(d < 1 for d in x.shape[1:]):
        raise ShapeDtypeError(
            f"{what} of shape {x.shape} has an empty channel or spatial dim (only the batch may be 0)"
        )


def check_groups(channels: int, groups: int, what: str) -> None:
    if channels % groups:
        raise ShapeDtypeError(f"groups={groups} does not divide the {channels} {what}")


def conv_shape(x_shape, kernel, o, *, stride, padding, dilation) -> tuple[int, ...]:
    """(N, O, *spatial) of conv(x, w); ShapeDtypeError when the kernel does not fit."""
    sizes = []
    for axis, (size, k, s, p, d) in enumerate(zip(x_shape[2:], kernel, stride, padding, dilation, strict=True)):
        out = conv_output_size(size, k, s, p, d)
        if out < 1:
            raise ShapeDtypeError(
                f"the kernel (size {k}, dilation {d}: extent {d * (k - 1) + 1}) does not fit in spatial dim {axis} "
                f"of size {size} padded by {p} on each side"
            )
        sizes.append(out)
    return (x_shape[0], o, *sizes)


def tap_windows(tap, size, out_size, stride, padding, dilation):
    """Where kernel tap ``tap`` reads for every output position: the strided slice of the
    padded input, and a mask (of the output's spatial shape) of the positions whose input
    element lies inside the unpadded input."""
    window, masks = [], []
    for t, m, o, s, p, d in zip(tap, size, out_size, stride, padding, dilation, strict=True):
        window.append(slice(t * d, t * d + (o - 1) * s + 1, s))
        position = np.arange(o) * s - p + t * d  # index into the unpadded input
        masks.append((position >= 0) & (position < m))
    inside = np.ones((), bool)
    for axis, mask in enumerate(masks):
        inside = inside[..., None] & mask.reshape((1,) * axis + (-1,))
    return tuple(window), inside


def _nonfinite(array) -> bool:
    return bool(array.size) and not np.isfinite(np.asarray(array, np.float64)).all()


def finite_domain(x_may_be_nonfinite: bool):
    """OpDef.domain of the convolutions (see "Non-finite values" above): where backends
    differ on NaN/±inf, the result is defined for finite operands only."""

    def domain(x, w, **attrs):
        x_ok = x_may_be_nonfinite and attrs.get("groups", 1) == 1
        if _nonfinite(w) or (not x_ok and _nonfinite(x)):
            return "non-finite values here reach padding or dilation zeros, where backends differ (ops/conv.py)"
        return None

    return domain
