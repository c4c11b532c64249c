"""conv1d, conv2d and conv_transpose2d: references, inference, VJPs and user functions
(semantics in :mod:`hlotrace.ops.conv`)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.conv.samples import conv_sample
from hlotrace.ops.conv.window import (
    FAMILY,
    check_groups,
    check_operand,
    check_sizes,
    conv_output_size,
    conv_shape,
    conv_transpose_output_size,
    finite_domain,
    leftover,
    spatial_ints,
    tap_windows,
    window_attrs,
)
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.source import user_location

__all__ = ["conv1d", "conv2d", "conv_transpose2d"]


# -- conv1d / conv2d ---------------------------------------------------------------------


def _conv_canonicalize(rank, op):
    return lambda avals, attrs: window_attrs(attrs, rank, op)


def _conv_infer(rank):
    layout = "N, C, L" if rank == 1 else "N, C, H, W"
    kernel = "O, C/groups, K" if rank == 1 else "O, C/groups, kH, kW"

    def infer(x: Aval, w: Aval, *, stride, padding, dilation, groups) -> Aval:
        check_operand(x, rank, "input x", layout)
        check_operand(w, rank, "weight w", kernel)
        check_sizes(x, "input x")
        check_sizes(w, "weight w")
        check_groups(x.shape[1], groups, "input channels")
        check_groups(w.shape[0], groups, "output channels (weight dim 0)")
        if w.shape[1] * groups != x.shape[1]:
            raise ShapeDtypeError(
                f"weight dim 1 ({w.shape[1]}) times groups ({groups}) must equal the input channels ({x.shape[1]})"
            )
        shape = conv_shape(x.shape, w.shape[2:], w.shape[0], stride=stride, padding=padding, dilation=dilation)
        return Aval(shape, dt.promote(x.dtype, w.dtype))

    return infer


def conv_reference(x, w, *, stride, padding, dilation, groups):
    """The definition: ``out[n, o, i] = sum over c, t of x[n, g*C/groups + c, i*s - p + t*d] *
    w[o, c, t]`` (g the group of output channel o) over the taps t whose input position lies
    inside ``x``; taps in the padding add nothing. Computed tap by tap in float64 from +0."""
    x, w = x.astype(dt.float64), w.astype(dt.float64)
    n, _, *size = x.shape
    o, c_g, *kernel = w.shape
    out_size = [conv_output_size(*a) for a in zip(size, kernel, stride, padding, dilation, strict=True)]
    padded = np.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)])
    xg = padded.reshape(n, groups, c_g, *padded.shape[2:])
    wg = w.reshape(groups, o // groups, c_g, *kernel)
    out = np.zeros((n, groups, o // groups, *out_size))  # +0.0: an all-zero sum stays +0.0
    for tap in np.ndindex(*kernel):
        window, inside = tap_windows(tap, size, out_size, stride, padding, dilation)
        products = np.einsum("ngc...,goc->ngo...", xg[(..., *window)], wg[(..., *tap)])
        out += np.where(inside, products, 0.0)
    return out.reshape(n, o, *out_size)


def _conv2d_vjp(ct, out, x, w, *, stride, padding, dilation, groups):
    kernel = w.shape[2:]
    output_padding = tuple(leftover(*a) for a in zip(x.shape[2:], kernel, stride, padding, dilation, strict=True))
    dx = F.conv_transpose2d(
        ct, w, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation, groups=groups
    )
    dw = F.conv2d_weight_grad(x, ct, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return dx, dw


def _conv1d_vjp(ct, out, x, w, *, stride, padding, dilation, groups):
    """conv2d's VJP on a unit height: (N, C, L) -> (N, C, 1, L)."""
    attrs = {"stride": (1, *stride), "padding": (0, *padding), "dilation": (1, *dilation), "groups": groups}
    dx, dw = _conv2d_vjp(F.expand_dims(ct, 2), None, F.expand_dims(x, 2), F.expand_dims(w, 2), **attrs)
    return F.squeeze(dx, 2), F.squeeze(dw, 2)


# -- conv_transpose2d --------------------------------------------------------------------


def _transpose_canonicalize(avals, attrs):
    out = window_attrs(attrs, 2, "conv_transpose2d", extra=("output_padding",))
    out["output_padding"] = spatial_ints(attrs.get("output_padding", 0), 2, "output_padding", 0)
    for axis, (op, s, d) in enumerate(zip(out["output_padding"], out["stride"], out["dilation"], strict=True)):
        if op >= max(s, d):
            raise ShapeDtypeError(
                f"output_padding {op} of spatial dim {axis} must be smaller than its stride ({s}) or dilation ({d})"
            )
    return out


def _transpose_infer(x: Aval, w: Aval, *, stride, padding, output_padding, dilation, groups) -> Aval:
    check_operand(x, 2, "input x", "N, C, H, W")
    check_operand(w, 2, "weight w", "C, O/groups, kH, kW")
    check_sizes(x, "input x")
    check_sizes(w, "weight w")
    if w.shape[0] != x.shape[1]:
        raise ShapeDtypeError(f"weight dim 0 ({w.shape[0]}) must equal the input channels ({x.shape[1]})")
    check_groups(x.shape[1], groups, "input channels")
    sizes = []
    for axis, a in enumerate(zip(x.shape[2:], w.shape[2:], stride, padding, output_padding, dilation, strict=True)):
        size = conv_transpose_output_size(*a)
        if size < 1:
            raise ShapeDtypeError(f"the result's spatial dim {axis} would have size {size} (padding {a[3]} too large)")
        sizes.append(size)
    return Aval((x.shape[0], w.shape[1] * groups, *sizes), dt.promote(x.dtype, w.dtype))


def conv_transpose_reference(x, w, *, stride, padding, output_padding, dilation, groups):
    """The definition (PyTorch's scatter form): every input element ``x[n, g*C/groups + c, i]``
    adds ``x * w[g*C/groups + c, o, t]`` to output ``[n, g*O/groups + o, i*s - p + t*d]`` for
    each tap t; positions outside the result are dropped, and positions no input element
    reaches stay +0. Computed tap by tap in float64."""
    x, w = x.astype(dt.float64), w.astype(dt.float64)
    n, c, *size = x.shape
    _, o_g, *kernel = w.shape
    out_size = [
        conv_transpose_output_size(*a)
        for a in zip(size, kernel, stride, padding, output_padding, dilation, strict=True)
    ]
    # Output position j is buffer index j + p; the buffer holds every index a tap reaches
    # ((H - 1)s + d(k - 1) + output_padding + 1 = Ho + 2p).
    full = np.zeros((n, groups, o_g, *(m + 2 * p for p, m in zip(padding, out_size, strict=True))))
    xg = x.reshape(n, groups, c // groups, *size)
    wg = w.reshape(groups, c // groups, o_g, *kernel)
    for tap in np.ndindex(*kernel):
        reach = tuple(
            slice(t * d, t * d + (m - 1) * s + 1, s) for t, m, s, d in zip(tap, size, stride, dilation, strict=True)
        )
        full[(..., *reach)] += np.einsum("ngc...,gco->ngo...", xg, wg[(..., *tap)])
    crop = tuple(slice(p, p + m) for p, m in zip(padding, out_size, strict=True))
    return full[(..., *crop)].reshape(n, groups * o_g, *out_size)


def _transpose_vjp(ct, out, x, w, *, stride, padding, output_padding, dilation, groups):
    """y = conv_transpose2d(x, w) is the adjoint of z -> conv2d(z, w): <y, ct> = <x, conv2d(ct, w)>.

    conv2d(ct, w) has H + output_padding // stride rows (more than x only when
    output_padding >= stride, which a dilation larger than the stride allows): sliced off for
    dx, and x zero-extended to match for dw.
    """
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    dx = F.conv2d(ct, w, **attrs)
    x_ext = x
    if dx.shape != x.shape:
        rows = (slice(None), slice(None), slice(0, x.shape[2]), slice(0, x.shape[3]))
        x_ext = F.getitem_transpose(x, dx.shape, rows)
        dx = F.getitem(dx, rows)
    dw = F.conv2d_weight_grad(ct, x_ext, w.shape[2:], **attrs)
    return dx, dw


# -- public functions --------------------------------------------------------------------


def _with_bias(y, b, rank: int, op: str):
    """``y + b`` with ``b`` (O,) broadcast over the batch and spatial dims."""
    if b is None:
        return y
    shape = tuple(b.shape) if hasattr(b, "shape") else np.shape(b)
    if shape != (y.shape[1],):
        loc = user_location(1)
        raise OpError(
            f"{op}: bias of shape {shape} does not match the {y.shape[1]} output channels "
            f"(expected ({y.shape[1]},)){f' at {loc}' if loc else ''}"
        )
    return F.add(y, F.reshape(b, (y.shape[1],) + (1,) * rank))


def conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution (cross-correlation) of ``x`` (N, C, L) with ``w`` (O, C/groups, K),
    plus ``b`` (O,) if given; see :mod:`hlotrace.ops.conv` for the exact semantics.

    >>> conv1d(ht.tensor(np.ones((1, 1, 5), np.float32)), ht.tensor(np.ones((1, 1, 3), np.float32))).numpy()
    array([[[3., 3., 3.]]], dtype=float32)
    """
    y = apply(_CONV1D, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return _with_bias(y, b, 1, "conv1d")


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution (cross-correlation) of ``x`` (N, C, H, W) with ``w`` (O, C/groups, kH, kW),
    plus ``b`` (O,) if given. ``stride``, ``padding`` (symmetric), ``dilation``: an int or a
    pair; result (N, O, (H + 2p - d(kH-1) - 1) // s + 1, ...), as PyTorch's ``conv2d``.
    """
    y = apply(_CONV2D, x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return _with_bias(y, b, 2, "conv2d")


def conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    """Transposed 2-d convolution (conv2d's gradient wrt its input) of ``x`` (N, C, H, W) with
    ``w`` (C, O/groups, kH, kW), PyTorch's layout, plus ``b`` (O,) if given. Result
    (N, O, (H-1)s - 2p + d(kH-1) + output_padding + 1, ...), as PyTorch's ``conv_transpose2d``.
    """
    y = apply(
        _CONV_TRANSPOSE2D,
        x,
        w,
        stride=stride,
        padding=padding,
        output_padding=output_padding,
        dilation=dilation,
        groups=groups,
    )
    return _with_bias(y, b, 2, "conv_transpose2d")


# -- registration ------------------------------------------------------------------------

_CONV1D = register_op(
    OpDef(
        name="conv1d",
        family=FAMILY,
        reference=conv_reference,
        infer=_conv_infer(1),
        canonicalize=_conv_canonicalize(1, "conv1d"),
        sample=lambda s: conv_sample(s, 1),
        vjp=_conv1d_vjp,
        domain=finite_domain(True),
        doc="1-d cross-correlation, x (N,C,L), w (O,C/groups,K); stride/padding/dilation/groups as PyTorch; "
        "float16/bfloat16 accumulate in float32",
    )
)

_CONV2D = register_op(
    OpDef(
        name="conv2d",
        family=FAMILY,
        reference=conv_reference,
        infer=_conv_infer(2),
        canonicalize=_conv_canonicalize(2, "conv2d"),
        sample=lambda s: conv_sample(s, 2),
        vjp=_conv2d_vjp,
        domain=finite_domain(True),
        doc="2-d cross-correlation, x (N,C,H,W), w (O,C/groups,kH,kW); stride/padding (symmetric)/dilation/groups "
        "as PyTorch; float16/bfloat16 accumulate in float32",
    )
)

_CONV_TRANSPOSE2D = register_op(
    OpDef(
        name="conv_transpose2d",
        family=FAMILY,
        reference=conv_transpose_reference,
        infer=_transpose_infer,
        canonicalize=_transpose_canonicalize,
        sample=lambda s: conv_sample(s, 2, transpose=True),
        vjp=_transpose_vjp,
        domain=finite_domain(False),
        doc="transposed 2-d convolution (conv2d's input gradient), w (C,O/groups,kH,kW), output size and "
        "scatter definition as PyTorch; float16/bfloat16 accumulate in float32",
    )
)
