"""Pooling (NCHW): max_pool2d, avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d.

Semantics (each op's reference below is the definition the lowering rules must match):

- Inputs are NCHW tensors of rank 4 with non-empty spatial dims (H, W >= 1); the batch and
  channel dims may be empty. The public functions also take an unbatched CHW tensor (a
  reshape around the rank-4 op, as PyTorch). ``kernel_size``, ``stride`` and ``padding`` are
  an int or an (h, w) pair; ``stride=None`` means ``kernel_size``; ``padding`` is at most
  half the kernel (``padding <= kernel_size // 2``, PyTorch's rule), and the padded input
  must hold one window. Output side: ``(n + 2 * padding - kernel) // stride + 1``.
  Not supported (PyTorch has them): ``dilation``, ``ceil_mode``, ``return_indices``,
  ``divisor_override``.
- ``max_pool2d``: the maximum of each window, padding counting as -inf (the dtype's lowest
  value for integers). NaN propagates: a window holding NaN gives NaN, as PyTorch (XLA:CPU
  drops NaN in large non-overlapping windowed max reductions; the rule guards against it).
  When +0.0 and -0.0 tie for the maximum the result's sign is unspecified (hlotrace's max;
  PyTorch returns the first). Float tensors and int32/int64.
- ``avg_pool2d``: the window sum over zero padding divided by the kernel area
  (``count_include_pad=True``) or by the number of input elements in the window. The sum
  starts at +0.0, so a window of -0.0 gives +0.0 (as PyTorch). float16/bfloat16 are
  computed in float32 and rounded once. Float tensors only.
- ``adaptive_avg_pool2d`` / ``adaptive_max_pool2d``: output index ``i`` along a dim of
  input size ``n`` and output size ``m`` pools input rows ``floor(i * n / m)`` to
  ``ceil((i + 1) * n / m)`` (exclusive), PyTorch's windows. ``output_size`` is an int or a
  pair whose None entries keep the input size; it may exceed the input size (windows then
  repeat rows). Average: float tensors (half precision in float32); max: float and
  int32/int64, NaN propagates.

Gradients (PyTorch's CPU and CUDA kernels give the same):

- max pools send each window's cotangent to ONE element: the first maximal element in
  row-major window order, except that a window holding NaN sends it to its LAST NaN
  (PyTorch's loop ``if (val > maxval || isnan(val))``); a window of only -inf sends it to its
  first element. Padding never receives gradient. Overlapping windows add up (in float32
  for float16/bfloat16). The maximum is piecewise constant in its selection, so the
  backward primitives below have no gradient with respect to ``x``.
- avg pools are linear; their VJPs are the ``*_backward`` primitives, whose own VJPs are
  the forward ops again (gradients of gradients work to any order).

Backward primitives (backward.py; public, since VJPs are ordinary ops):
``max_pool2d_backward(x, ct)`` adds ``ct`` at each window's selected element of ``x``,
``max_pool2d_gather(x, g)`` reads ``g`` there (its transpose), ``avg_pool2d_backward(ct,
input_size)``, ``adaptive_avg_pool2d_backward(ct, input_size)``,
``adaptive_max_pool2d_backward(x, ct)`` and ``adaptive_max_pool2d_gather(x, g, output_size)``.

The family is a package, each module importing only those before it: ``window`` (geometry,
attribute checks, NumPy helpers), ``samples`` (the sample strategies), ``forward`` (the four
pools), ``backward`` (their backward primitives).
"""

from hlotrace.ops.pooling import window, samples, forward, backward  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.pooling.backward import __all__ as _backward_all
from hlotrace.ops.pooling.backward import *  # noqa: F403
from hlotrace.ops.pooling.forward import __all__ as _forward_all
from hlotrace.ops.pooling.forward import *  # noqa: F403
from hlotrace.ops.pooling.window import (  # noqa: F401  (the rules' and tests' geometry)
    FAMILY,
    MAX_POOL_DTYPES,
    adaptive_counts,
    adaptive_windows,
    avg_divisors,
    lowest,
)

__all__ = [*_forward_all, *_backward_all]
