"""Activations: gelu, silu, leaky_relu, elu, softplus, and normal_cdf (gelu's Φ).

Float tensors only. float16 and bfloat16 are computed in float32 and rounded once (float32
and float64 in their own dtype), like ``sigmoid`` in :mod:`hlotrace.ops.nn`; the NumPy
references evaluate the same formulas in float64 and round once, except leaky_relu's
product and softplus's ``beta * x`` (for its threshold test), which they form in the compute
dtype as the rules do, bit for bit. NaN propagates through every op. Semantics, and where
they differ from PyTorch:

- ``gelu(x, approximate="none")``: ``x * Φ(x)`` with ``Φ(x) = erfc(-x / sqrt(2)) / 2`` (the
  standard normal CDF; PyTorch writes ``(1 + erf(x / sqrt(2))) / 2``, which cancels to 0 for
  x below about -5.5 in float32: hlotrace keeps the tiny negative values there, and gives
  ``-0.0`` only where they underflow). ``approximate="tanh"``:
  ``x * sigmoid(2u)``, ``u = sqrt(2/pi) * (x + 0.044715 x³)``, which equals PyTorch's
  ``x/2 * (1 + tanh(u))`` without its cancellation for negative x. ``gelu(+inf) = +inf``,
  ``gelu(-inf) = -0.0`` (the limit, approached from below; PyTorch gives NaN there),
  ``gelu(±0.0) = ±0.0``.
- ``silu(x) = x * sigmoid(x)``: ``silu(+inf) = +inf``, ``silu(-inf) = -0.0`` (PyTorch: NaN),
  ``silu(±0.0) = ±0.0``.
- ``leaky_relu(x, negative_slope=0.01)``: ``x`` where ``x > 0``, else ``x * negative_slope``
  (PyTorch's formula, so ``leaky_relu(-0.0) = -0.0`` and, for a negative slope,
  ``leaky_relu(+0.0) = -0.0``). Any finite slope; with slope 0, ``-inf`` gives ``-0.0`` (the
  limit; ``-inf * 0`` would be NaN). The gradient is 1 where ``x > 0``, else the slope.
- ``elu(x, alpha=1.0)``: ``x`` where ``x > 0``, else ``alpha * expm1(x)``: ``elu(-inf) =
  -alpha``, ``elu(-0.0) = alpha * -0.0`` (``-0.0`` for ``alpha > 0``, as PyTorch's expm1).
  Any finite alpha. The gradient is 1 where ``x > 0``, else ``alpha * exp(x)`` (PyTorch's
  convention at 0).
- ``softplus(x, beta=1.0, threshold=20.0)``: with ``z = beta * x`` (computed in the compute
  dtype), ``x`` where ``z > threshold``, else ``log(1 + exp(z)) / beta`` evaluated as
  ``(max(z, 0) + log1p(exp(-|z|))) / beta``: it never overflows, where PyTorch's
  ``log1p(exp(z))`` gives inf for a threshold above ~88 (float32). ``beta > 0`` finite; the
  threshold is any non-NaN number (+inf: never linear). ``softplus(-inf) = +0.0``,
  ``softplus(+inf) = +inf``. On XLA:CPU a product ``z`` in the subnormal range is flushed to
  zero, which can flip the comparison for a threshold of exactly 0.
- ``normal_cdf(x) = erfc(-x / sqrt(2)) / 2`` (``torch.special.ndtr``): registered as its own
  op because gelu's VJP needs it; lowered through CHLO's erfc.

VJPs follow :mod:`hlotrace.autodiff` and compute in the same dtype as the forward ops.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["elu", "gelu", "leaky_relu", "normal_cdf", "silu", "softplus"]

FAMILY = "activation"

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_CUBIC = 0.044715
APPROXIMATIONS = ("none", "tanh")

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _float_infer(x: Aval, **attrs) -> Aval:
    if x.dtype not in dt.FLOATING:
        raise ShapeDtypeError(f"defined for float tensors only, got {x.dtype}")
    return x


def _number(value, name: str, *, allow_inf: bool = False) -> float:
    if not dt.is_number(value):
        raise ShapeDtypeError(f"{name}= must be a Python number, got {value!r}")
    value = float(value)
    if math.isnan(value) or (not allow_inf and math.isinf(value)):
        raise ShapeDtypeError(f"{name}= must be {'a non-NaN number' if allow_inf else 'finite'}, got {value}")
    return value


def _canonicalizer(defaults: dict, checks: dict | None = None):
    """Canonicalize keyword attributes ``defaults`` (name -> default), each checked by
    ``checks[name](value) -> value`` (default: a finite Python float)."""
    checks = checks or {}

    def canonicalize(avals, attrs):
        unknown = set(attrs) - set(defaults)
        if unknown:
            takes = ", ".join(f"{k}=" for k in defaults) or "no attributes"
            raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (takes {takes})")
        out = {}
        for name, default in defaults.items():
            value = attrs.get(name, default)
            out[name] = checks[name](value) if name in checks else _number(value, name)
        return out

    return canonicalize


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _activation_sample(s, attrs=None, ranges=(-40.0, 40.0)):
    """x: every special and boundary value of the dtype, or moderate values where the
    activations bend (and exp/erfc underflow or saturate); ``attrs(rng) -> dict``."""

    @s.st.composite
    def sample(draw):
        full = s.elementwise(1, s.FLOATS)
        moderate = s.elementwise(1, s.FLOATS, ranges=lambda dtype: ranges)
        (x,) = draw(s.st.one_of(full, moderate)).args
        rng = s.generator(draw)
        return s.OpSample((x,), attrs(rng) if attrs is not None else {})

    return sample()


def _pick(rng, choices, general=None):
    """One of ``choices``, or (one time in three when given) ``general(rng)``."""
    if general is not None and rng.random() < 1 / 3:
        return float(general(rng))
    return choices[int(rng.integers(0, len(choices)))]


def _away_from_one(draw):
    """A slope drawn by ``draw(rng)`` but not within 0.1 of 1: the gradient's kink at 0 (1
    on one side, the slope on the other) must be large enough for the finite-difference
    check to see it and skip the point."""

    def pick(rng):
        value = draw(rng)
        return value if abs(value - 1.0) >= 0.1 else value + 0.2

    return pick


def _up(x):
    """``x`` in its compute dtype (float32 for float16/bfloat16)."""
    target = compute_dtype(x.dtype)
    return x if target == x.dtype else F.astype(x, target)


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
