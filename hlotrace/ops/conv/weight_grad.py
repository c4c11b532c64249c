"""conv2d_weight_grad: conv2d's gradient wrt its weight (the primitive conv2d's VJP uses),
(its sample strategy is in samples.py).

``conv2d_weight_grad(x, ct, kernel_size, stride, padding, dilation, groups)``: ``x``
(N, C, H, W) is conv2d's input, ``ct`` (N, O, Ho, Wo) a cotangent of conv2d's result (its
spatial size must be conv2d's, Ho = (H + 2p - d(kH-1) - 1) // s + 1); the result
(O, C/groups, kH, kW) is ``dw[o, c, i, j] = sum over n, h, w of ct[n, o, h, w] *
x[n, g*C/groups + c, h*s - p + i*d, w*s - p + j*d]`` (``g`` the group of output channel
``o``) over the positions inside ``x`` (the padding adds nothing): the gradient of
``sum(conv2d(x, w) * ct)`` wrt ``w``. Non-finite values: as conv_transpose2d's (see
"Non-finite values" in :mod:`hlotrace.ops.conv`). Same dtypes, sizes
and attribute forms as conv2d (see :mod:`hlotrace.ops.conv`); the result dtype is the
promoted dtype of ``x`` and ``ct``. It is bilinear: its VJP is conv2d (wrt ``ct``) and
conv_transpose2d (wrt ``x``).
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.conv.samples import weight_grad_sample
from hlotrace.ops.conv.window import (
    FAMILY,
    check_groups,
    check_operand,
    check_sizes,
    conv_shape,
    finite_domain,
    leftover,
    spatial_ints,
    tap_windows,
    window_attrs,
)
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["conv2d_weight_grad"]


def _canonicalize(avals, attrs):
    attrs = dict(attrs)
    if "kernel_size" not in attrs:
        raise ShapeDtypeError("needs kernel_size= (the weight's spatial size)")
    kernel_size = spatial_ints(attrs.pop("kernel_size"), 2, "kernel_size", 1)
    return {"kernel_size": kernel_size, **window_attrs(attrs, 2, "conv2d_weight_grad")}


def _infer(x: Aval, ct: Aval, *, kernel_size, stride, padding, dilation, groups) -> Aval:
    check_operand(x, 2, "input x", "N, C, H, W")
    check_operand(ct, 2, "cotangent ct", "N, O, Ho, Wo")
    check_sizes(x, "input x")
    check_sizes(ct, "cotangent ct")
    check_groups(x.shape[1], groups, "input channels")
    check_groups(ct.shape[1], groups, "output channels (ct dim 1)")
    expected = conv_shape(x.shape, kernel_size, ct.shape[1], stride=stride, padding=padding, dilation=dilation)
    if ct.shape != expected:
        raise ShapeDtypeError(f"ct of shape {ct.shape} is not the shape of conv2d's result, {expected}")
    return Aval((ct.shape[1], x.shape[1] // groups, *kernel_size), dt.promote(x.dtype, ct.dtype))


def _reference(x, ct, *, kernel_size, stride, padding, dilation, groups):
    """The definition: ``dw[o, c, t] = sum over n, i of ct[n, o, i] * x[n, g*C/groups + c,
    i*s - p + t*d]`` (g the group of o) over the positions whose input element lies inside
    ``x`` (the padding adds nothing, as in conv2d). Tap by tap in float64 from +0."""
    x, ct = x.astype(dt.float64), ct.astype(dt.float64)
    n, c, *size = x.shape
    o, out_size = ct.shape[1], ct.shape[2:]
    padded = np.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)])
    xg = padded.reshape(n, groups, c // groups, *padded.shape[2:])
    ctg = ct.reshape(n, groups, o // groups, *out_size)
    dw = np.zeros((groups, o // groups, c // groups, *kernel_size))
    for tap in np.ndindex(*kernel_size):
        window, inside = tap_windows(tap, size, out_size, stride, padding, dilation)
        dw[(..., *tap)] += np.einsum("ngchw,ngohw->goc", xg[(..., *window)], np.where(inside, ctg, 0.0))
    return dw.reshape(o, c // groups, *kernel_size)


def _vjp(ct_w, out, x, ct, *, kernel_size, stride, padding, dilation, groups):
    """<conv2d_weight_grad(x, ct), ct_w> = <conv2d(x, ct_w), ct>."""
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    output_padding = tuple(leftover(*a) for a in zip(x.shape[2:], kernel_size, stride, padding, dilation, strict=True))
    dx = F.conv_transpose2d(ct, ct_w, output_padding=output_padding, **attrs)
    dct = F.conv2d(x, ct_w, **attrs)
    return dx, dct


_OP = register_op(
    OpDef(
        name="conv2d_weight_grad",
        family=FAMILY,
        reference=_reference,
        infer=_infer,
        canonicalize=_canonicalize,
        sample=weight_grad_sample,
        vjp=_vjp,
        domain=finite_domain(False),
        doc="conv2d's gradient wrt its weight: x (N,C,H,W) and ct (N,O,Ho,Wo) give (O,C/groups,kH,kW)",
    )
)


def conv2d_weight_grad(x, ct, kernel_size, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of ``sum(conv2d(x, w, ...) * ct)`` wrt ``w`` (O, C/groups, *kernel_size),
    for ``ct`` of conv2d's result shape; the other arguments are conv2d's."""
    return apply(_OP, x, ct, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups)
