"""The piecewise activations MegEngine's XLA backend lowers: relu6, hsigmoid, hswish and
prelu (semantics in :mod:`hlotrace.ops.activation`)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.activation.base import FAMILY, _canonicalizer, _float_infer, _up
from hlotrace.ops.activation.samples import _activation_sample, _away_from_one
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["hardsigmoid", "hardswish", "hsigmoid", "hswish", "prelu", "relu6"]


def _in_compute_dtype(x: np.ndarray) -> np.ndarray:
    return x.astype(compute_dtype(x.dtype))


def _relu6_wide(w: np.ndarray) -> np.ndarray:
    """min(max(w, 0), 6) with NaN kept and -0.0 turned into +0.0 (relu's convention)."""
    zero, six = np.asarray(0.0, w.dtype), np.asarray(6.0, w.dtype)
    return np.where(w > 6, six, np.where(w > 0, w, np.where(np.isnan(w), w, zero)))


def _between(x, low, high):
    """``low < x < high`` as a bool tensor."""
    return F.logical_and(F.greater(x, low), F.less(x, high))


# -- relu6 ------------------------------------------------------------------------------------


def _relu6_vjp(ct, out, x):
    return (F.where(_between(x, 0.0, 6.0), ct, F.zeros_like(ct)),)


RELU6 = register_op(
    OpDef(
        name="relu6",
        family=FAMILY,
        reference=_relu6_wide,
        infer=_float_infer,
        canonicalize=_canonicalizer({}),
        sample=lambda s: _activation_sample(s, ranges=(-12.0, 12.0)),
        vjp=_relu6_vjp,
        doc="min(max(x, 0), 6); NaN propagates, relu6(-0.0) = +0.0; gradient 1 on (0, 6)",
    )
)


def relu6(x):
    """``min(max(x, 0), 6)`` (PyTorch's ``F.relu6``); NaN propagates, ``relu6(-0.0)`` is +0.0."""
    return apply(RELU6, x)


# -- hsigmoid ---------------------------------------------------------------------------------


def _hsigmoid_reference(x):
    w = _in_compute_dtype(x)
    return _relu6_wide(w + np.asarray(3.0, w.dtype)) / np.asarray(6.0, w.dtype)


def _hsigmoid_vjp(ct, out, x):
    return (F.where(_between(x, -3.0, 3.0), ct / 6.0, F.zeros_like(ct)),)


HSIGMOID = register_op(
    OpDef(
        name="hsigmoid",
        family=FAMILY,
        reference=_hsigmoid_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({}),
        sample=lambda s: _activation_sample(s, ranges=(-6.0, 6.0)),
        vjp=_hsigmoid_vjp,
        doc="relu6(x + 3) / 6 (hard sigmoid) in the compute dtype; 0 below -3, 1 above 3",
    )
)


def hsigmoid(x):
    """Hard sigmoid ``relu6(x + 3) / 6`` (MegEngine's ``hsigmoid``, PyTorch's ``hardsigmoid``)."""
    return apply(HSIGMOID, x)


hardsigmoid = hsigmoid  # PyTorch's name


# -- hswish -----------------------------------------------------------------------------------


def _hswish_reference(x):
    w = _in_compute_dtype(x)
    three, six = np.asarray(3.0, w.dtype), np.asarray(6.0, w.dtype)
    middle = w * (w + three) / six
    return np.where(w >= three, w, np.where(w <= -three, np.asarray(0.0, w.dtype), middle))


def _hswish_vjp(ct, out, x):
    x = _up(x)
    slope = x / 3.0 + 0.5  # d/dx x (x + 3) / 6 on [-3, 3]
    inner = F.where(F.less_equal(x, 3.0), slope, F.ones_like(slope))
    inner = F.where(F.less(x, -3.0), F.zeros_like(slope), inner)
    if inner.dtype != ct.dtype:
        inner = F.astype(inner, ct.dtype)
    return (ct * inner,)


HSWISH = register_op(
    OpDef(
        name="hswish",
        family=FAMILY,
        reference=_hswish_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({}),
        sample=lambda s: _activation_sample(s, ranges=(-6.0, 6.0)),
        vjp=_hswish_vjp,
        doc="x * relu6(x + 3) / 6 (hard swish): 0 for x <= -3 (also -inf), x for x >= 3",
    )
)


def hswish(x):
    """Hard swish ``x * relu6(x + 3) / 6`` (MegEngine's ``hswish``, PyTorch's ``hardswish``):
    exactly ``x`` from 3 up and ``0`` from -3 down, so ``hswish(±inf)`` is ``+inf``/``0``."""
    return apply(HSWISH, x)


hardswish = hswish  # PyTorch's name


# -- prelu ------------------------------------------------------------------------------------


def _prelu_infer(x: Aval, weight: Aval) -> Aval:
    _float_infer(x)
    if weight.dtype != x.dtype:
        raise ShapeDtypeError(f"weight must have x's dtype {x.dtype}, got {weight.dtype}")
    size = int(np.prod(weight.shape, dtype=np.int64))
    channels = x.shape[1] if len(x.shape) >= 2 else 1
    if len(weight.shape) > 1 or size not in (1, channels):
        raise ShapeDtypeError(
            f"weight must be one value or one per channel (x's dim 1: {channels}), of shape () or "
            f"(n,), got {weight.shape} for x of shape {x.shape}"
        )
    return x


def weight_shape(x_ndim: int, weight_size: int) -> tuple[int, ...]:
    """The shape prelu's weight broadcasts as against an ``x_ndim``-dim x: along dim 1."""
    if weight_size == 1:
        return ()
    return (1, weight_size) + (1,) * (x_ndim - 2)


def _prelu_reference(x, weight):
    w = _in_compute_dtype(x)
    slope = _in_compute_dtype(weight).reshape(weight_shape(x.ndim, weight.size))
    return np.where(w > 0, w, w * slope)  # the product in the compute dtype, as the rule


def _prelu_vjp(ct, out, x, weight):
    shape = weight_shape(x.ndim, weight.size)
    slope = F.reshape(weight, shape)
    positive = F.greater(x, 0)
    dx = F.where(positive, ct, ct * slope)
    contributions = F.where(positive, F.zeros_like(ct), _up(ct) * _up(x))
    reduced = [axis for axis in range(x.ndim) if not (len(shape) > axis and shape[axis] != 1)]
    dw = F.sum(contributions, axis=tuple(reduced)) if reduced else contributions
    dw = F.reshape(dw, weight.shape)
    return dx, dw if dw.dtype == weight.dtype else F.astype(dw, weight.dtype)


def _prelu_sample(s):
    """x as the other activations draw it; a weight of shape (), (1,) or one per channel
    (x's dim 1), the slopes away from 1 (see _away_from_one), zero and negative ones too."""

    @s.st.composite
    def sample(draw):
        (x,) = draw(_activation_sample(s)).args
        rng = s.generator(draw)
        choices = [(), (1,)] + ([(x.shape[1],)] * 2 if x.ndim >= 2 else [])
        shape = choices[int(rng.integers(0, len(choices)))]
        pick = _away_from_one(lambda r: r.uniform(-1.0, 3.0))
        pool = np.array([0.25, 0.0, -0.5, 2.0])
        slopes = [pool[rng.integers(0, 4)] if rng.random() < 1 / 3 else pick(rng) for _ in range(int(np.prod(shape)))]
        return s.OpSample((x, np.array(slopes, np.float64).reshape(shape).astype(x.dtype)))

    return sample()


PRELU = register_op(
    OpDef(
        name="prelu",
        family=FAMILY,
        reference=_prelu_reference,
        infer=_prelu_infer,
        canonicalize=_canonicalizer({}),
        sample=_prelu_sample,
        vjp=_prelu_vjp,
        doc="x where x > 0 else weight * x, weight one value or one per channel (dim 1); PyTorch's prelu",
    )
)


def prelu(x, weight):
    """``x`` where ``x > 0``, else ``weight * x`` (PyTorch's ``F.prelu``): ``weight`` holds
    one slope, or one per channel (x's dim 1), and has x's dtype."""
    if dt.is_number(weight):
        weight = np.asarray(weight, dtype=getattr(x, "dtype", None) or np.float32)
    return apply(PRELU, x, weight)
