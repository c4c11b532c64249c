"""Layout ops: flip, roll, pad, tile, repeat, tril, triu (primitives) and stack, split,
moveaxis, swapaxes, flatten (composites of transpose, reshape, expand_dims, concat and
getitem, recorded as those ops). ``eye`` and ``linspace`` (hlotrace/ops/creation/) are
re-exported here (hlotrace.functional imports this package's ``__all__``). Every dtype is
admitted; results keep the input's dtype. Sample strategies: samples.py.

Semantics (NumPy's unless stated; each reference below is the definition the rules match):

- ``flip(x, axis=None)``: reverse the elements along ``axis`` (None: every axis; an int or
  a tuple, negative allowed, no repeats). Stored as a sorted tuple of non-negative axes.
- ``roll(x, shift, axis=None)``: ``np.roll``. ``axis=None`` rolls the flattened tensor;
  ``shift`` and ``axis`` may be ints or tuples that broadcast together, and shifts on a
  repeated axis add up. Any shift is admitted (negative, beyond the size). Stored reduced
  modulo the size: ``{"shift": int, "axis": None}`` or a tuple of non-zero shifts per
  sorted axis.
- ``pad(x, pad_width, mode="constant", value=0)``: ``np.pad`` with the modes "constant",
  "reflect" and "edge" (others are refused). ``pad_width``: an int, ``(n,)``,
  ``(before, after)`` or one pair per axis (NumPy's broadcasting), non-negative; stored as
  one ``(before, after)`` pair per axis. "reflect" mirrors without repeating the edge and,
  like NumPy, keeps reflecting when the pad is wider than the axis (a size-1 axis repeats
  its element); "reflect" and "edge" refuse to extend an empty axis (as NumPy). ``value``
  (constant mode only; another mode with a non-zero value is refused, where NumPy refuses
  any ``constant_values``): a Python scalar converted to the dtype as ``full`` converts it
  (NaN and -0.0 kept; ``value != 0`` for bool). **Difference:** for an integer dtype a
  non-integer value is refused; NumPy truncates it (``constant_values=2.7`` pads with 2).
- ``tile(x, reps)``: ``np.tile``; reps non-negative; ``x`` gets leading size-1 dims when
  reps is longer than its rank. Stored with one rep per result dim.
- ``repeat(x, repeats, axis=None)``: ``np.repeat``; ``axis=None`` repeats the flattened
  tensor (a 0-d tensor also with axis 0 or -1, as NumPy). ``repeats``: a non-negative int, or
  one count per element along the axis (a length-1 sequence counts for all). Stored as an
  int when all counts are equal.
- ``tril(x, k=0)`` / ``triu(x, k=0)``: keep ``x[..., i, j]`` where ``j - i <= k``
  (``>= k``), zero elsewhere; rank >= 2, batched over the leading dims. ``k`` is stored
  clipped to ``[-rows, cols]`` (the same result).

Composites (composites.py, no rule of their own): ``stack(tensors, axis=0)`` (``np.stack``: equal shapes,
dtypes promote), ``split(x, indices_or_sections, axis=0)`` (``np.split``: an int must divide
the axis, or a list of split points with Python slice semantics; returns a list),
``moveaxis(x, source, destination)``, ``swapaxes(x, axis1, axis2)`` (NumPy) and
``flatten(x, start_dim=0, end_dim=-1)`` (**PyTorch's** ``torch.flatten``: dims start..end
merge into one; a 0-d tensor becomes shape (1,)).

Gradients: flip of the cotangent; roll by the negated shift; pad "constant" slices the
cotangent (getitem); "reflect"/"edge" sum the cotangent of every output element into the
input element it copies (getitem, flip, sum and getitem_transpose per run of copied
elements, added up); tile and repeat reshape and sum; tril/triu apply themselves to the
cotangent.

The family is a package, each module importing only those before it: ``base`` (attribute
checks, the index maps the rules share), ``samples`` (the sample strategies), ``shifts`` (flip, roll), ``padding`` (pad),
``repeats`` (tile, repeat), ``triangles`` (tril, triu), ``composites`` (stack, split,
moveaxis, swapaxes, flatten).
"""

from hlotrace.ops.layout import base, samples, shifts, padding, repeats, triangles, composites  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.creation import eye, linspace
from hlotrace.ops.layout.base import FAMILY, PAD_MODES, index_runs, pad_indices  # noqa: F401
from hlotrace.ops.layout.composites import flatten, moveaxis, split, stack, swapaxes
from hlotrace.ops.layout.padding import pad
from hlotrace.ops.layout.repeats import repeat, repeat_groups, tile, tile_operand_shape  # noqa: F401
from hlotrace.ops.layout.shifts import flip, roll
from hlotrace.ops.layout.triangles import tril, triu

__all__ = [
    "eye",
    "flatten",
    "flip",
    "linspace",
    "moveaxis",
    "pad",
    "repeat",
    "roll",
    "split",
    "stack",
    "swapaxes",
    "tile",
    "tril",
    "triu",
]
