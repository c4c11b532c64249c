"""Normalization: layer_norm, group_norm, batch_norm.

Two primitives normalize; the public functions add the affine part (``* weight + bias``,
broadcast ops) and, for batch norm in training mode, the batch statistics:

- ``layer_norm`` (primitive, attributes ``axis`` and ``eps``): ``(x - mean) / sqrt(var +
  eps)`` with the mean and the *biased* variance over ``axis`` (a tuple, stored sorted and
  non-negative). :func:`layer_norm` (PyTorch's ``F.layer_norm(x, normalized_shape, weight,
  bias, eps)``) applies it to the trailing ``len(normalized_shape)`` dims.
- ``batch_norm_inference`` (primitive, attribute ``eps``): ``(x - mean) / sqrt(var + eps)``
  for ``x`` of shape ``(N, C, *)`` and ``mean``/``var`` of shape ``(C,)`` (any float dtypes;
  the result has ``x``'s dtype).
- :func:`group_norm` is a composite: ``x`` reshaped to ``(N, G, C/G * prod(*))``, the
  ``layer_norm`` primitive over the last axis, reshaped back, then the per-channel affine.
- :func:`batch_norm` is a composite (below), so gradients flow through the batch
  statistics by the ordinary VJPs of mean, subtract and multiply.

Numerics (both primitives): float16 and bfloat16 compute their statistics and result in
float32 and round once; float32 and float64 in their own dtype (the NumPy references in
float64). ``layer_norm`` subtracts each slice's first element before averaging (exact for
the nearly equal values where it matters), so a constant slice normalizes to exactly 0
(``+0.0``; an element ``-0.0`` in a slice starting with ``+0.0`` gives ``-0.0``) whatever
the summation order. A slice holding NaN or ±inf normalizes to all NaN. ``eps >= 0``
(with ``eps = 0`` a constant slice gives NaN, 0/0). Zero-size inputs give zero-size
results. ``layer_norm`` is defined (``OpDef.domain``) where the sums of the deviations and
of their squares fit the compute dtype: beyond that (deviations around 1e19 in float32) the
compiled variance overflows to inf and the slice normalizes to zeros, where the float64
reference does not overflow.

Differences from PyTorch:

- ``batch_norm``'s ``momentum`` follows **MegEngine**, the opposite of PyTorch's:
  ``running = momentum * running + (1 - momentum) * batch_stat``, default 0.9 (PyTorch's
  0.1 means the same update). Training mode normalizes with the batch mean and the biased
  batch variance over every dim but 1 (the channels) and updates ``running_mean`` and
  ``running_var`` in place (with the *unbiased* batch variance) through
  ``Tensor._assign``: eagerly, under autodiff tapes and inside ``xla_trace``, where they
  become device state the compiled step writes back. Batch statistics are computed in
  float32 for float16/bfloat16 inputs. Training with one value per channel is refused (the
  unbiased variance would divide by zero), as PyTorch does.
- ``batch_norm`` with ``running_mean``/``running_var`` of None always uses batch statistics
  (PyTorch's ``track_running_stats=False``); PyTorch's functional form raises in eval mode.
- ``weight``/``bias`` of None mean 1 and 0; they must have exactly the channel (or
  normalized) shape.

VJPs follow :mod:`hlotrace.autodiff`, recomputing the statistics with registered ops.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply, describe_avals
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor
from hlotrace.trace import scope

__all__ = ["batch_norm", "batch_norm_inference", "group_norm", "layer_norm"]

FAMILY = "normalization"


def _eps(value) -> float:
    if not dt.is_number(value):
        raise ShapeDtypeError(f"eps= must be a Python number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ShapeDtypeError(f"eps= must be finite and >= 0, got {value}")
    return value


def _check_float(aval: Aval, what: str) -> None:
    if aval.dtype not in dt.FLOATING:
        raise ShapeDtypeError(f"{what} must be a float tensor, got {aval.dtype}")


def _up(x):
    target = compute_dtype(x.dtype)
    return x if target == x.dtype else F.astype(x, target)


_EPS_CHOICES = (1e-5, 1e-3, 0.1, 1.0)


def _draw_eps(rng) -> float:
    return float(_EPS_CHOICES[int(rng.integers(0, len(_EPS_CHOICES)))])


def _norm_shape(rng, min_rank: int) -> tuple:
    """Rank min_rank..4 (2 and 3 most often), sides 1..5, a zero-size side rarely, at most
    128 elements."""
    while True:
        rank = int(rng.choice([1, 2, 3, 4], p=[0.15, 0.35, 0.3, 0.2]))
        if rank < min_rank:
            continue
        shape = tuple(int(d) for d in rng.choice(6, size=rank, p=[0.03, 0.17, 0.25, 0.25, 0.15, 0.15]))
        if math.prod(shape) <= 128:
            return shape


def _elements(s, dtype, rng):
    """Moderate values (sums and squares stay finite and accurate), NaN/±inf sometimes."""
    special = rng.random() < 1 / 4
    return s.values(dtype, -8.0, 8.0, special=special, special_rate=1 / 24)


# -- layer_norm (the normalizing primitive) ----------------------------------------------


def _layer_norm_canonicalize(avals, attrs):
    unknown = set(attrs) - {"axis", "eps"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (layer_norm takes axis= and eps=)")
    if "axis" not in attrs:
        raise ShapeDtypeError("needs axis= (the normalized axes)")
    rank = len(avals[0].shape)
    axis = attrs["axis"]
    if axis is None:
        raise ShapeDtypeError("axis= must be an int or a tuple of ints, not None")
    axis = tuple(
        int(a) if isinstance(a, np.integer) else a for a in ((axis,) if not isinstance(axis, tuple | list) else axis)
    )
    if not axis:
        raise ShapeDtypeError("axis= must name at least one axis")
    return {"axis": normalize_axes(axis, rank), "eps": _eps(attrs.get("eps", 1e-5))}


def _layer_norm_infer(x: Aval, *, axis, eps) -> Aval:
    _check_float(x, "x")
    return x


def _layer_norm_reference(x, *, axis, eps):
    w = x.astype(np.float64)
    if w.size == 0:
        return w
    first = w[tuple(slice(0, 1) if d in axis else slice(None) for d in range(w.ndim))]
    shifted = w - first
    centered = shifted - np.mean(shifted, axis=axis, keepdims=True)
    var = np.mean(centered * centered, axis=axis, keepdims=True)
    wide = compute_dtype(x.dtype)
    # eps as the compute dtype holds it (the rule's constant).
    return centered / np.sqrt(var + float(np.asarray(eps, wide)))


def _layer_norm_domain(x, *, axis, eps):
    """Why the statistics of a finite slice overflow the compute dtype (None: they fit)."""
    w = np.asarray(x, np.float64)
    if w.size == 0:
        return None
    axis = tuple(int(a) % w.ndim for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    first = w[tuple(slice(0, 1) if d in axis else slice(None) for d in range(w.ndim))]
    with np.errstate(all="ignore"):
        shifted = w - first
        centered = shifted - np.mean(shifted, axis=axis, keepdims=True)
        sums = np.maximum(np.sum(np.abs(shifted), axis=axis), np.sum(centered * centered, axis=axis))
        sums = sums[np.isfinite(sums) | np.isfinite(np.sum(w, axis=axis))]  # NaN/inf slices give NaN anyway
    limit = float(np.finfo(compute_dtype(x.dtype)).max)
    if sums.size and sums.max() > limit:
        return f"the variance overflows {compute_dtype(x.dtype)} (squared deviations sum to {sums.max():.3g})"
    return None


def _layer_norm_vjp(ct, out, x, *, axis, eps):
    x, g = _up(x), _up(ct)
    mean = F.mean(x, axis=axis, keepdims=True)
    centered = x - mean
    rstd = F.rsqrt(F.mean(centered * centered, axis=axis, keepdims=True) + eps)
    xhat = centered * rstd
    mean_g = F.mean(g, axis=axis, keepdims=True)
    mean_gx = F.mean(g * xhat, axis=axis, keepdims=True)
    return (rstd * (g - mean_g - xhat * mean_gx),)


def _layer_norm_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.FLOATS))
        rng = s.generator(draw)
        shape = _norm_shape(rng, min_rank=1)
        rank = len(shape)
        if rank == 1 or rng.random() < 2 / 3:
            # PyTorch's layout: the trailing 1..3 dims (as F.layer_norm passes them).
            count = int(rng.integers(1, min(rank, 3) + 1))
            axes = tuple(range(rank - count, rank))
        else:
            # Any other set of axes (not only trailing ones: the rule must broadcast back right).
            trailing = True
            while trailing:
                count = int(rng.integers(1, rank))
                axes = tuple(int(a) for a in rng.choice(rank, count, replace=False))
                trailing = sorted(axes) == list(range(rank - count, rank))
        if rng.random() < 1 / 2:
            axes = tuple(a - rank if rng.random() < 1 / 2 else a for a in axes)
        axis = axes[0] if len(axes) == 1 and rng.random() < 1 / 2 else axes
        x = draw(s.arrays(dtype, shape, _elements(s, dtype, rng)))
        if rng.random() < 1 / 6 and x.size:
            # A constant slice (variance 0) beside ordinary ones: the first along the kept axes.
            reduced = {a % rank for a in axes}
            index = tuple(slice(None) if d in reduced else 0 for d in range(rank))
            x = np.array(x)
            x[index] = x[index].ravel()[int(rng.integers(0, x[index].size))]
        return s.OpSample((x,), {"axis": axis, "eps": _draw_eps(rng)})

    return sample()


LAYER_NORM = register_op(
    OpDef(
        name="layer_norm",
        family=FAMILY,
        reference=_layer_norm_reference,
        infer=_layer_norm_infer,
        canonicalize=_layer_norm_canonicalize,
        sample=_layer_norm_sample,
        vjp=_layer_norm_vjp,
        domain=_layer_norm_domain,
        doc="(x - mean) / sqrt(var + eps) over axis, biased variance, no affine; half precision in float32",
    )
)


# -- batch_norm_inference -------------------------------------------------------------------


def _batch_norm_canonicalize(avals, attrs):
    unknown = set(attrs) - {"eps"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (batch_norm_inference takes eps=)")
    return {"eps": _eps(attrs.get("eps", 1e-5))}


def _batch_norm_infer(x: Aval, mean: Aval, var: Aval, *, eps) -> Aval:
    _check_float(x, "x")
    _check_float(mean, "mean")
    _check_float(var, "var")
    if len(x.shape) < 2:
        raise ShapeDtypeError(f"x must have shape (N, C, ...), got rank {len(x.shape)}")
    channels = (x.shape[1],)
    if mean.shape != channels or var.shape != channels:
        raise ShapeDtypeError(
            f"mean and var must have the channel shape {channels} (x's dim 1), got {mean.shape} and {var.shape}"
        )
    return x


def channel_shape(rank: int, channels: int) -> tuple:
    """``(1, C, 1, ...)``: a per-channel vector broadcast against ``(N, C, *)``."""
    return (1, channels) + (1,) * (rank - 2)


def _batch_norm_reference(x, mean, var, *, eps):
    shape = channel_shape(x.ndim, x.shape[1])
    wide = compute_dtype(x.dtype)
    m = mean.astype(wide).astype(np.float64).reshape(shape)
    v = var.astype(wide).astype(np.float64).reshape(shape)
    return (x.astype(np.float64) - m) / np.sqrt(v + float(np.asarray(eps, wide)))


def _batch_norm_vjp(ct, out, x, mean, var, *, eps):
    wide = compute_dtype(x.dtype)
    shape = channel_shape(x.ndim, x.shape[1])
    others = tuple(d for d in range(x.ndim) if d != 1)
    x, g = _up(x), _up(ct)
    m = F.reshape(F.astype(mean, wide), shape)
    rstd = F.rsqrt(F.astype(var, wide) + eps)  # (C,)
    dx = g * F.reshape(rstd, shape)
    dmean = F.negative(F.sum(g, axis=others) * rstd)
    dvar = F.sum(g * (x - m), axis=others) * (rstd * rstd * rstd) * -0.5
    return dx, dmean, dvar


def _batch_norm_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.FLOATS))
        rng = s.generator(draw)
        shape = list(_norm_shape(rng, min_rank=2))
        shape[1] = int(rng.integers(1, 5))  # channels: 1 to 4
        shape = tuple(shape)
        x = draw(s.arrays(dtype, shape, _elements(s, dtype, rng)))
        stat_dtype = draw(s.other_dtypes(dtype, s.FLOATS))
        channels = (shape[1],)
        mean = draw(s.arrays(stat_dtype, channels, _elements(s, stat_dtype, rng)))
        # Variances: mostly non-negative (0 included), sometimes any value (NaN where var + eps < 0).
        low = 0.0 if rng.random() < 5 / 6 else -2.0
        var = draw(s.arrays(stat_dtype, channels, s.values(stat_dtype, low, 8.0, special=rng.random() < 1 / 6)))
        captured = frozenset()
        if rng.random() < 1 / 6:
            # A zero mean captured as a constant (a fresh running_mean), with signed zeros in
            # x: x - (-0.0) must give +0.0 where XLA would fold the subtraction away.
            mean = np.full(channels, float(rng.choice([-0.0, 0.0])), stat_dtype)
            x = np.where(rng.random(shape) < 1 / 3, np.asarray(-0.0, dtype), x).astype(dtype)
            captured = frozenset({1})
        return s.OpSample((x, mean, var), {"eps": _draw_eps(rng)}, captured)

    return sample()


BATCH_NORM_INFERENCE = register_op(
    OpDef(
        name="batch_norm_inference",
        family=FAMILY,
        reference=_batch_norm_reference,
        infer=_batch_norm_infer,
        canonicalize=_batch_norm_canonicalize,
        sample=_batch_norm_sample,
        vjp=_batch_norm_vjp,
        doc="(x - mean) / sqrt(var + eps) with per-channel (dim 1) mean and var of shape (C,); no affine",
    )
)


# -- public functions -------------------------------------------------------------------------


def _error(name: str, message: str, *tensors) -> OpError:
    loc = user_location(2)
    at = f" at {loc}" if loc else ""
    avals = [Aval(t.shape, t.dtype) for t in tensors if t is not None]
    return OpError(f"{name}: {message} (inputs: {describe_avals(avals)}){at}")


def _as_tensor(x):
    return x if x is None or isinstance(x, Tensor) else tensor(x)


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * (weight if shape is None else F.reshape(weight, shape))
    if bias is not None:
        y = y + (bias if shape is None else F.reshape(bias, shape))
    return y


def _check_param(name, param, expected, what, *tensors):
    if param is not None and tuple(param.shape) != tuple(expected):
        raise _error(name, f"{what} must have shape {tuple(expected)}, got {tuple(param.shape)}", *tensors)


def batch_norm_inference(x, mean, var, eps=1e-5):
    """``(x - mean) / sqrt(var + eps)`` with per-channel ``mean``/``var`` of shape ``(C,)``
    for ``x`` of shape ``(N, C, *)`` (the normalizing primitive of :func:`batch_norm`)."""
    return apply(BATCH_NORM_INFERENCE, x, mean, var, eps=eps)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalization over the trailing dims ``normalized_shape`` (PyTorch semantics):
    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance; ``weight`` and
    ``bias`` (optional) have shape ``normalized_shape``.

    >>> F.layer_norm(x, (4,))          # x of shape (..., 4)
    """
    x, weight, bias = _as_tensor(x), _as_tensor(weight), _as_tensor(bias)
    shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else tuple(normalized_shape)
    shape = tuple(int(d) for d in shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k :]) != shape:
        raise _error(
            "layer_norm", f"normalized_shape {shape} must be a non-empty suffix of x's shape {x.shape}", x, weight, bias
        )
    _check_param("layer_norm", weight, shape, "weight", x, weight, bias)
    _check_param("layer_norm", bias, shape, "bias", x, weight, bias)
    with scope("hlotrace.layer_norm"):
        y = apply(LAYER_NORM, x, axis=tuple(range(x.ndim - k, x.ndim)), eps=eps)
        return _affine(y, weight, bias, None)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalization of ``x`` of shape ``(N, C, *)`` (PyTorch semantics): the
    channels are split into ``num_groups`` groups, each ``(sample, group)`` slice is
    normalized (mean and biased variance), then ``* weight + bias`` per channel (shape
    ``(C,)``). A composite: reshape, the ``layer_norm`` primitive, reshape, affine."""
    x, weight, bias = _as_tensor(x), _as_tensor(weight), _as_tensor(bias)
    if x.ndim < 2:
        raise _error("group_norm", f"x must have shape (N, C, ...), got rank {x.ndim}", x, weight, bias)
    channels = x.shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int | np.integer) or num_groups <= 0:
        raise _error("group_norm", f"num_groups must be a positive int, got {num_groups!r}", x, weight, bias)
    num_groups = int(num_groups)
    if channels % num_groups:
        raise _error("group_norm", f"num_groups={num_groups} must divide the {channels} channels of x", x, weight, bias)
    _check_param("group_norm", weight, (channels,), "weight", x, weight, bias)
    _check_param("group_norm", bias, (channels,), "bias", x, weight, bias)
    grouped = F.reshape(x, (x.shape[0], num_groups, math.prod(x.shape[1:]) // num_groups))
    y = F.reshape(apply(LAYER_NORM, grouped, axis=(2,), eps=eps), x.shape)
    return _affine(y, weight, bias, channel_shape(x.ndim, channels))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.9, eps=1e-5):
    """Batch normalization of ``x`` of shape ``(N, C, *)`` per channel (dim 1).

    Training mode: normalizes with the batch mean and biased batch variance over every dim
    but 1, and (when given) updates ``running_mean``/``running_var`` in place with
    **MegEngine's momentum convention** ``running = momentum * running + (1 - momentum) *
    batch_stat`` (the unbiased variance for ``running_var``). Eval mode: normalizes with
    the running statistics. Then ``* weight + bias`` per channel (shape ``(C,)``).
    """
    x, weight, bias = _as_tensor(x), _as_tensor(weight), _as_tensor(bias)
    running_mean, running_var = _as_tensor(running_mean), _as_tensor(running_var)
    tensors = (x, running_mean, running_var, weight, bias)
    if x.ndim < 2:
        raise _error("batch_norm", f"x must have shape (N, C, ...), got rank {x.ndim}", *tensors)
    if not dt.is_floating(x.dtype):
        raise _error("batch_norm", f"x must be a float tensor, got {x.dtype}", *tensors)
    channels = x.shape[1]
    for name, param in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        _check_param("batch_norm", param, (channels,), name, *tensors)
    if (running_mean is None) != (running_var is None):
        raise _error("batch_norm", "give both running_mean and running_var, or neither", *tensors)
    if not dt.is_number(momentum):
        raise _error("batch_norm", f"momentum must be a number, got {momentum!r}", *tensors)
    momentum = float(momentum)
    use_batch_stats = training or running_mean is None
    if use_batch_stats:
        count = x.size // channels if channels else 0
        if count <= 1:
            raise _error(
                "batch_norm",
                f"training needs more than one value per channel (got {count} for input shape {x.shape})",
                *tensors,
            )
        others = tuple(d for d in range(x.ndim) if d != 1)
        wide = _up(x)
        mean = F.mean(wide, axis=others)
        centered = wide - F.reshape(mean, channel_shape(x.ndim, channels))
        var = F.mean(centered * centered, axis=others)
        y = apply(BATCH_NORM_INFERENCE, x, mean, var, eps=eps)
        if training and running_mean is not None:
            batch_mean, unbiased = mean._stop_gradient(), var._stop_gradient() * (count / (count - 1))
            # _assign casts back to the buffers' dtype.
            running_mean._assign(running_mean * momentum + batch_mean * (1 - momentum))
            running_var._assign(running_var * momentum + unbiased * (1 - momentum))
    else:
        y = apply(BATCH_NORM_INFERENCE, x, running_mean, running_var, eps=eps)
    return _affine(y, weight, bias, channel_shape(x.ndim, channels))
