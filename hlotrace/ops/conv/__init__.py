"""Convolutions (NCHW activations, OIHW weights, as PyTorch and MegEngine): conv1d, conv2d,
conv_transpose2d, and conv2d_weight_grad (conv2d's gradient wrt its weight, in weight_grad.py).

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


The family is a package, each module importing only those before it: ``window`` (attribute
forms, sizes, checks), ``samples`` (the sample strategies), ``forward`` (conv1d,
conv2d, conv_transpose2d), ``weight_grad`` (conv2d_weight_grad).
"""

from hlotrace.ops.conv import window, samples, forward, weight_grad  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.conv.forward import conv1d, conv2d, conv_transpose2d
from hlotrace.ops.conv.weight_grad import conv2d_weight_grad
from hlotrace.ops.conv.window import FAMILY  # noqa: F401

__all__ = ["conv1d", "conv2d", "conv2d_weight_grad", "conv_transpose2d"]
