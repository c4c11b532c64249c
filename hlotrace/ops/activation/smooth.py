"""normal_cdf, gelu, silu, leaky_relu, elu, softplus and the composite logsigmoid
(semantics in :mod:`hlotrace.ops.activation`)."""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.activation.base import (
    APPROXIMATIONS,
    FAMILY,
    GELU_CUBIC,
    INV_SQRT_2PI,
    SQRT_2_OVER_PI,
    SQRT_HALF,
    _canonicalizer,
    _erfc,
    _float_infer,
    _number,
    _up,
    _wide,
)
from hlotrace.ops.activation.samples import _activation_sample, _away_from_one, _pick
from hlotrace.ops.common import F
from hlotrace.ops.registry import OpDef, register_op

__all__ = ["elu", "gelu", "leaky_relu", "logsigmoid", "normal_cdf", "silu", "softplus"]


# -- normal_cdf -----------------------------------------------------------------------------


def _normal_cdf_reference(x):
    return 0.5 * _erfc(-_wide(x) * SQRT_HALF)


def _normal_density(x):
    """exp(-x²/2) / sqrt(2 pi) in registered ops."""
    return F.exp(x * x * -0.5) * INV_SQRT_2PI


def _normal_cdf_vjp(ct, out, x):
    return (ct * _normal_density(_up(x)),)


NORMAL_CDF = register_op(
    OpDef(
        name="normal_cdf",
        family=FAMILY,
        reference=_normal_cdf_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({}),
        sample=lambda s: _activation_sample(s),
        vjp=_normal_cdf_vjp,
        doc="standard normal CDF erfc(-x/sqrt(2))/2 (gelu's Φ); floats, half precision in float32",
    )
)


def normal_cdf(x):
    """Φ(x) = erfc(-x / sqrt(2)) / 2, the standard normal CDF (``torch.special.ndtr``)."""
    return apply(NORMAL_CDF, x)


# -- gelu -------------------------------------------------------------------------------------


def _approximation(value):
    if value not in APPROXIMATIONS:
        raise ShapeDtypeError(f"approximate= must be one of {APPROXIMATIONS}, got {value!r}")
    return value


def _gelu_reference(x, *, approximate):
    w = _wide(x)
    if approximate == "tanh":
        inner = (w * w * w * GELU_CUBIC + w) * (2 * SQRT_2_OVER_PI)
        e = np.exp(-np.abs(inner))
        y = w * np.where(inner >= 0, 1 / (1 + e), e / (1 + e))
    else:
        y = w * (0.5 * _erfc(-w * SQRT_HALF))
    return np.where(w == -np.inf, -0.0, y)


def _gelu_vjp(ct, out, x, *, approximate):
    x = _up(x)
    if approximate == "tanh":
        inner = (x * x * x * GELU_CUBIC + x) * (2 * SQRT_2_OVER_PI)
        s = F.sigmoid(inner)
        d_inner = (x * x * (3 * GELU_CUBIC) + 1.0) * (2 * SQRT_2_OVER_PI)
        return (ct * (s + x * s * (1.0 - s) * d_inner),)
    return (ct * (normal_cdf(x) + x * _normal_density(x)),)


GELU = register_op(
    OpDef(
        name="gelu",
        family=FAMILY,
        reference=_gelu_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({"approximate": "none"}, {"approximate": _approximation}),
        sample=lambda s: _activation_sample(s, lambda rng: {"approximate": _pick(rng, APPROXIMATIONS)}),
        vjp=_gelu_vjp,
        doc='x * Φ(x) (approximate="tanh": x * sigmoid(2u), u = sqrt(2/pi)(x + 0.044715x³)); gelu(-inf) = -0.0',
    )
)


def gelu(x, approximate="none"):
    """GELU: ``x * Φ(x)`` with Φ the standard normal CDF, or with ``approximate="tanh"``
    PyTorch's tanh approximation (computed as ``x * sigmoid(2u)``). ``gelu(-inf)`` is -0.0."""
    return apply(GELU, x, approximate=approximate)


# -- silu -------------------------------------------------------------------------------------


def _silu_reference(x):
    w = _wide(x)
    e = np.exp(-np.abs(w))
    y = w * np.where(w >= 0, 1 / (1 + e), e / (1 + e))
    return np.where(w == -np.inf, -0.0, y)


def _silu_vjp(ct, out, x):
    x = _up(x)
    s = F.sigmoid(x)
    return (ct * (s * (x * (1.0 - s) + 1.0)),)


SILU = register_op(
    OpDef(
        name="silu",
        family=FAMILY,
        reference=_silu_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({}),
        sample=lambda s: _activation_sample(s),
        vjp=_silu_vjp,
        doc="x * sigmoid(x) (swish); silu(-inf) = -0.0; floats, half precision in float32",
    )
)


def silu(x):
    """SiLU (swish): ``x * sigmoid(x)``; ``silu(-inf)`` is -0.0."""
    return apply(SILU, x)


# -- leaky_relu -------------------------------------------------------------------------------


def _leaky_relu_reference(x, *, negative_slope):
    wide = compute_dtype(x.dtype)
    w = x.astype(wide)
    negative = w * np.asarray(negative_slope, wide)  # one rounding, in the compute dtype
    if negative_slope == 0:
        negative = np.where(w == -np.inf, np.asarray(-0.0, wide), negative)
    return np.where(w > 0, w, negative)


def _leaky_relu_vjp(ct, out, x, *, negative_slope):
    return (F.where(F.greater(x, 0), ct, ct * negative_slope),)


_SLOPES = (0.01, 0.2, 0.0, 1.0, 2.0, -0.5, 0.5)

LEAKY_RELU = register_op(
    OpDef(
        name="leaky_relu",
        family=FAMILY,
        reference=_leaky_relu_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({"negative_slope": 0.01}),
        sample=lambda s: _activation_sample(
            s, lambda rng: {"negative_slope": _pick(rng, _SLOPES, _away_from_one(lambda r: r.uniform(-1.0, 3.0)))}
        ),
        vjp=_leaky_relu_vjp,
        doc="x where x > 0 else x * negative_slope (any finite slope); -0.0 stays -0.0 for slope >= 0",
    )
)


def leaky_relu(x, negative_slope=0.01):
    """``x`` where ``x > 0``, else ``x * negative_slope`` (PyTorch's formula)."""
    return apply(LEAKY_RELU, x, negative_slope=negative_slope)


# -- elu --------------------------------------------------------------------------------------


def _elu_reference(x, *, alpha):
    w = _wide(x)
    return np.where(w > 0, w, alpha * np.expm1(w))


def _elu_vjp(ct, out, x, *, alpha):
    x = _up(x)
    # exp of min(x, 0): the unselected branch never overflows.
    return (F.where(F.greater(x, 0), ct, ct * (F.exp(F.minimum(x, 0.0)) * alpha)),)


_ALPHAS = (1.0, 0.5, 2.0, 0.0, -1.0, 1.5)

ELU = register_op(
    OpDef(
        name="elu",
        family=FAMILY,
        reference=_elu_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer({"alpha": 1.0}),
        sample=lambda s: _activation_sample(
            s, lambda rng: {"alpha": _pick(rng, _ALPHAS, _away_from_one(lambda r: r.uniform(0.0, 3.0)))}
        ),
        vjp=_elu_vjp,
        doc="x where x > 0 else alpha * expm1(x); elu(-inf) = -alpha, elu(-0.0) = alpha * -0.0",
    )
)


def elu(x, alpha=1.0):
    """ELU: ``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (as expm1)."""
    return apply(ELU, x, alpha=alpha)


# -- softplus ---------------------------------------------------------------------------------


def _beta(value):
    value = _number(value, "beta")
    if value <= 0:
        raise ShapeDtypeError(f"beta= must be positive, got {value}")
    return value


def _softplus_reference(x, *, beta, threshold):
    wide = compute_dtype(x.dtype)
    z = x.astype(wide) * np.asarray(beta, wide)  # the product the rule compares, bit for bit
    linear = z > np.asarray(threshold, wide)
    zw = _wide(z)
    y = (np.maximum(zw, 0) + np.log1p(np.exp(-np.abs(zw)))) / beta
    return np.where(linear, _wide(x), y)


def _softplus_vjp(ct, out, x, *, beta, threshold):
    z = _up(x) * beta
    return (F.where(F.greater(z, threshold), ct, ct * F.sigmoid(z)),)


_BETAS = (1.0, 2.0, 0.5, 3.0, 10.0)
# Threshold 0 is left out: there a product beta * x in the subnormal range decides the
# branch, and XLA:CPU flushes it to zero (see the module docstring).
# Thresholds beyond 88 let beta * x reach where exp(beta * x) overflows float32.
_THRESHOLDS = (20.0, 10.0, 1.0, 5.0, 0.5, -2.0, float("inf"), 100.0, 1000.0)

SOFTPLUS = register_op(
    OpDef(
        name="softplus",
        family=FAMILY,
        reference=_softplus_reference,
        infer=_float_infer,
        canonicalize=_canonicalizer(
            {"beta": 1.0, "threshold": 20.0},
            {"beta": _beta, "threshold": lambda v: _number(v, "threshold", allow_inf=True)},
        ),
        sample=lambda s: _activation_sample(
            s,
            lambda rng: {
                "beta": _pick(rng, _BETAS, lambda r: r.uniform(0.1, 5.0)),
                "threshold": _pick(rng, _THRESHOLDS, lambda r: r.uniform(-5.0, 30.0)),
            },
            ranges=(-200.0, 200.0),
        ),
        vjp=_softplus_vjp,
        doc="log(1 + exp(beta x)) / beta, or x where beta x > threshold; never overflows; beta > 0",
    )
)


def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, or ``x`` where ``beta * x > threshold`` (PyTorch's
    formula, evaluated without overflow)."""
    return apply(SOFTPLUS, x, beta=beta, threshold=threshold)


# -- logsigmoid (a composite) -----------------------------------------------------------------


def logsigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``, recorded as ``negative`` and ``softplus`` with
    ``threshold=inf`` (so ``min(x, 0) - log1p(exp(-|x|))``, never overflowing): exactly the
    formula a registered op would evaluate, rounded once in every dtype."""
    return F.negative(softplus(F.negative(x), threshold=float("inf")))
