"""Activations: gelu, silu, leaky_relu, elu, softplus, normal_cdf (gelu's Φ), the piecewise
relu6, hsigmoid, hswish, prelu, and the composite logsigmoid.

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
- ``relu6(x) = min(max(x, 0), 6)``: NaN propagates, ``relu6(-0.0) = +0.0`` (as ``relu``).
  The gradient is 1 on ``(0, 6)``, else 0.
- ``hsigmoid(x) = relu6(x + 3) / 6`` (MegEngine's definition; PyTorch's ``hardsigmoid``
  is the same function, alias ``hardsigmoid``), evaluated in the compute dtype: ``x + 3``
  and the division each round once there (float32 for float16/bfloat16), so 0 from -3
  down, 1 from 3 up. The gradient is ``1/6`` on ``(-3, 3)``, else 0 (PyTorch's).
- ``hswish(x) = x * relu6(x + 3) / 6`` (alias ``hardswish``): ``x`` where ``x >= 3`` and
  ``+0.0`` where ``x <= -3`` (PyTorch's branches, so ``hswish(-inf) = 0``, where the bare
  product gives NaN, and ``x * 6 / 6`` never overflows near the largest float); between,
  ``x * (x + 3) / 6`` left to right in the compute dtype. The gradient is 0 below -3,
  ``x / 3 + 1/2`` on ``[-3, 3]``, 1 above 3 (PyTorch's).
- ``prelu(x, weight)``: ``x`` where ``x > 0``, else ``x * weight`` (the product in the
  compute dtype), ``weight`` of x's dtype holding one slope (shape ``()`` or ``(1,)``) or
  one per channel (x's dim 1, as PyTorch; a 0-d or 1-d x takes one slope only). Weights
  are any finite or non-finite values; unlike ``leaky_relu``'s constant slope, a zero
  weight at ``x = -inf`` gives NaN (PyTorch's formula). The weight's gradient sums
  ``ct * x`` over ``x <= 0`` along every dim but the channel one.
- ``logsigmoid(x) = -softplus(-x, threshold=inf)``, a **composite** (the user function
  records ``negative`` and ``softplus``), not an op: with an infinite threshold softplus is
  ``max(z, 0) + log1p(exp(-|z|))``, so the composite evaluates ``min(x, 0) -
  log1p(exp(-|x|))``, never overflows, and rounds once in every dtype (softplus computes
  float16/bfloat16 in float32, and negation is exact): an op of its own would repeat
  softplus's rule bit for bit. Its gradient is softplus's, ``sigmoid(-x)``.
  ``logsigmoid(-inf) = -inf``; where ``exp(-x)`` underflows (``x`` above ~104 in float32,
  and ``+inf``) the result is ``-0.0`` (a negated ``+0.0``; PyTorch's ``min(x, 0) - ...``
  gives ``+0.0``).
- ``normal_cdf(x) = erfc(-x / sqrt(2)) / 2`` (``torch.special.ndtr``): registered as its own
  op because gelu's VJP needs it; lowered through CHLO's erfc.

VJPs follow :mod:`hlotrace.autodiff` and compute in the same dtype as the forward ops.

The family is a package, each module importing only those before it: ``base`` (constants
and helpers shared with the rules), ``samples`` (the sample strategies' helpers),
``smooth`` (normal_cdf, gelu, silu, leaky_relu, elu, softplus, logsigmoid), ``piecewise``
(relu6, hsigmoid, hswish, prelu).
"""

from hlotrace.ops.activation import base, samples, smooth, piecewise  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.activation.base import FAMILY, GELU_CUBIC, SQRT_2_OVER_PI, SQRT_HALF  # noqa: F401
from hlotrace.ops.activation.piecewise import __all__ as _piecewise_all
from hlotrace.ops.activation.piecewise import *  # noqa: F403
from hlotrace.ops.activation.piecewise import weight_shape  # noqa: F401  (the prelu rule's)
from hlotrace.ops.activation.smooth import __all__ as _smooth_all
from hlotrace.ops.activation.smooth import *  # noqa: F403

__all__ = sorted([*_smooth_all, *_piecewise_all])
