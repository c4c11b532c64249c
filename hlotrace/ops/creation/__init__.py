"""Creation ops: zeros, ones, full, arange, eye, linspace. They take no tensor inputs, only attributes.

- ``zeros(shape, dtype)``, ``ones(shape, dtype)``: ``dtype`` defaults to float32.
- ``full(shape, value, dtype)``: ``dtype`` defaults to the dtype of ``value`` as a Python
  scalar on its own (bool, int32 or float32, see :func:`hlotrace.dtypes.promote`). The
  value is stored converted to ``dtype``: rounded for floats (1e10 in float16 is inf),
  ``value != 0`` for bool; an integer dtype's value must be an integer in its range.
- ``arange(start, stop=None, step=1, dtype=None)``: NumPy's ``arange``. One argument is
  ``stop`` (from 0); the length is ``ceil((stop - start) / step)`` (0 if negative, computed
  in float64 for floats, as NumPy). ``dtype`` defaults to int32 when every argument is an
  int and float32 otherwise. Float results are ``start + i * step`` with ``start`` and
  ``step`` rounded to float32 (float64 for a float64 arange), computed in float64 and
  rounded once to the dtype (NumPy
  accumulates its own rounding differently; XLA may or may not fuse the multiply-add, so
  results can differ in the last bit where the two terms nearly cancel). Integer results
  must all lie in the dtype's range; an integer arange needs int arguments; bool is refused.
- ``eye(n, m=None, k=0, dtype="float32")``: ones where ``column - row == k``. **Difference:**
  float32 by default (NumPy: float64). ``k`` is stored clipped to ``[-n, m]``.
- ``linspace(start, stop, num=50, endpoint=True, dtype=None)``: NumPy's formula in float64
  (``i * (delta / div) + start``, the last value ``stop`` when ``endpoint``; NumPy's
  special cases for ``num <= 1`` and a zero step), then floored for integer dtypes (NumPy)
  and rounded once to ``dtype``: the float64 values are NumPy's bit for bit (the rule
  splits ``step`` in two parts whose products with ``i`` are exact, so XLA fusing
  multiply and add cannot change a rounding). **Differences:** the default dtype is float32
  (NumPy: float64, from Python floats); start, stop and ``stop - start`` must be finite;
  ``num`` at most 2**26; a non-zero step below 2**-960 is refused; integer results must
  lie in the dtype (and within 2**53).

Shapes are stored as tuples of non-negative ints and ``dtype`` explicitly, so a recorded
trace names every attribute. None of these ops is differentiable.

The family is a package, each module importing only those before it: ``base`` (attribute
checks, shapes and fill values), ``samples`` (the sample strategies), ``fill`` (zeros, ones,
full, arange), ``eye_linspace`` (eye, linspace).
"""

from hlotrace.ops.creation import base, samples, fill, eye_linspace  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.creation.base import FAMILY, canonical_shape, canonical_value  # noqa: F401
from hlotrace.ops.creation.eye_linspace import (  # noqa: F401
    LINSPACE_MAX,
    LINSPACE_MIN_STEP,
    eye,
    linspace,
    linspace_float64,
    linspace_step_parts,
)
from hlotrace.ops.creation.fill import arange_length  # noqa: F401

__all__ = ["eye", "linspace"]  # re-exported by hlotrace.ops.layout (F.eye, F.linspace)
