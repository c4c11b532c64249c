"""Convolutions (NCHW activations, OIHW weights, as PyTorch and MegEngine): conv1d, conv2d,
conv_transpose2d, and conv2d_weight_grad (conv2d's gradient wrt its weight, in conv_grad.py).

Semantics (each op's reference below is the definition the lowering rules must match):

- ``conv2d(x, w, stride, padding, dilation, groups)``: cross-correlation, as PyTorch's
  ``conv2d``: ``x`` (N, C, H, W), ``w`` (O, C/groups, kH, kW), result (N, O, Ho, Wo) with
  ``Ho = (H + 2p - d(kH - 1) - 1) // s + 1`` and ``out[n, o, i, j] = sum over c, ki, kj of
  x[n, g*C/groups + c, i*s - p + ki*d, j*s - p + kj*d] * w[o, c, ki, kj]``, ``g`` the group
  of output channel ``o`` (input channel group ``g`` feeds output channels
  ``g*O/groups .. (g+1)*O/groups - 1``). ``conv1d`` is the same on (N, C, L) and (O, C/groups, K).
- Padding is not multiplied: a tap whose input position falls in the padding adds nothing
  (rather than ``0 * w``); conv_transpose2d likewise multiplies only real input elements.
- ``conv_transpose2d(x, w, stride, padding, output_padding, dilation, groups)``: PyTorch's
  layout, size and (scatter) definition: ``w`` (C, O/groups, kH, kW), result (N, O, Ho, Wo)
  with ``Ho = (H - 1)s - 2p + d(kH - 1) + output_padding + 1``; each input element
  ``x[n, g*C/groups + c, i, j]`` adds ``x * w[g*C/groups + c, o, ki, kj]`` to output
  ``[n, g*O/groups + o, i*s - p + ki*d, j*s - p + kj*d]``; positions outside the result are
  dropped, positions nothing reaches are +0.
  ``output_padding`` must be smaller than the stride or the dilation of its dim (PyTorch's
  rule). It is conv2d's gradient wrt its input (the adjoint).
- ``stride``, ``padding``, ``dilation`` (and ``output_padding``): an int or one int per
  spatial dim; padding is symmetric per dim (no ``(low, high)`` pairs, no ``"same"``/
  ``"valid"`` strings). Stored as tuples. ``groups`` must divide both channel counts.
- Dtypes: float16, bfloat16, float32, float64 (integers and bool are refused, as PyTorch's
  CPU conv); ``x`` and ``w`` may differ, the result is their promoted dtype (PyTorch
  requires equal dtypes). float16/bfloat16 accumulate in float32 and round once; float64
  computes in float64. The references compute in float64 from a +0 accumulator, so an
  all-zero sum is +0.0 (never -0.0).
- Sizes: the batch may be 0; channel counts and spatial sizes must be >= 1 and the
  (dilated) kernel must fit in the padded input (PyTorch raises there too).
- Non-finite values: the references give NaN/±inf exactly where a term of the sum above
  is non-finite. Backends differ beyond that, so the sample strategies draw NaN/±inf only
  in the input ``x`` of ungrouped conv1d/conv2d, where XLA:CPU and XLA:CUDA (H100) matched
  the references. Elsewhere NaN may appear in more outputs: where a non-finite weight (or
  conv2d_weight_grad's ``ct``) meets padding, XLA:CUDA and PyTorch (CPU and CUDA) compute
  ``0 * inf = NaN`` (XLA:CPU mostly leaves the term out); with ``groups > 1`` XLA:CPU may
  spread a non-finite input to other groups' outputs (a grouped convolution run as a dense
  one with zero weights); in conv_transpose2d and conv2d_weight_grad XLA:CUDA spreads a
  non-finite input to neighbouring outputs (presumably cuDNN's transform-based algorithms).
  Finite inputs are unaffected.
- The public functions take an optional bias ``b`` (O,), added as a broadcast ``add``
  after the primitive (so NumPy promotion applies to it; PyTorch requires equal dtypes).

VJPs (all in registered ops, so gradients of gradients work): conv2d's input gradient is
conv_transpose2d (``output_padding`` = the rows conv2d's stride left over), its weight
gradient the primitive conv2d_weight_grad; conv_transpose2d's input gradient is conv2d
(sliced when ``output_padding >= stride``), its weight gradient conv2d_weight_grad of its
cotangent against ``x``; conv1d's are those of conv2d on a unit height.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "conv"

__all__ = ["conv1d", "conv2d", "conv2d_weight_grad", "conv_transpose2d"]

WINDOW_ATTRS = ("stride", "padding", "dilation")


def compute_dtype(dtype) -> np.dtype:
    """The dtype the lowering accumulates in: float32 for float16/bfloat16."""
    return dt.promote_strong(np.dtype(dtype), dt.float32)


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
        from hlotrace.errors import OpError
        from hlotrace.source import user_location

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
        sample=lambda s: conv_grad.conv_sample(s, 1),
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
        sample=lambda s: conv_grad.conv_sample(s, 2),
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
        sample=lambda s: conv_grad.conv_sample(s, 2, transpose=True),
        vjp=_transpose_vjp,
        domain=finite_domain(False),
        doc="transposed 2-d convolution (conv2d's input gradient), w (C,O/groups,kH,kW), output size and "
        "scatter definition as PyTorch; float16/bfloat16 accumulate in float32",
    )
)

# conv2d's weight gradient and the family's sample strategies live in conv_grad.py;
# imported here so that it registers.
import hlotrace.ops.conv_grad as conv_grad  # noqa: E402
from hlotrace.ops.conv_grad import conv2d_weight_grad  # noqa: E402
