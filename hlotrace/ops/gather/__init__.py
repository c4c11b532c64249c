"""Integer-tensor indexing: take, take_along_axis (primitives), gather and embedding
(composites) in ``take``; scatter_add and index_add (primitives) in ``scatter``; masked_fill,
setitem, index_copy (primitives) and the dispatch behind ``Tensor.__getitem__`` /
``__setitem__`` in ``writes``. This docstring states the semantics of the first two; writes'
docstring states its own.

Semantics (each op's reference below is the definition the lowering rules must match):

- Indices are int32 or int64 tensors (a bool tensor is refused: it is a mask, see
  ``masked_fill``/``where``). A negative index ``i`` counts from the end (``i + dim``, as
  NumPy; PyTorch's ``gather``/``scatter_add``/``index_add``/``embedding`` raise instead).
  An index outside ``[-dim, dim)`` raises an OpError eagerly (the check needs the index
  values, so it runs in the reference, i.e. also while recording); a compiled program cannot
  raise: XLA **clamps** an out-of-range read (take, take_along_axis, gather, embedding read
  the nearest valid row after the negative wrap) and **drops** an out-of-range write (its
  update is skipped in scatter_add, index_add and index_copy). Such results are not tested.
- ``take(x, indices, axis=None)``: NumPy's ``take``: the result has shape
  ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``; ``axis=None`` takes from the
  flattened ``x`` (a reshape, then ``take`` along axis 0). Every dtype.
- ``take_along_axis(x, indices, axis)``: NumPy's: ``indices`` has ``x``'s rank, and the dims
  other than ``axis`` broadcast between ``x`` and ``indices`` (NumPy's rule, which PyTorch's
  ``take_along_dim`` shares); ``axis=None`` works on the flattened ``x`` with 1-D indices.
  Every dtype.
- ``gather(x, axis, index)``: ``torch.gather``: ``index`` has ``x``'s rank and
  ``index.shape[d] <= x.shape[d]`` for ``d != axis`` (no broadcasting; the leading part of
  ``x`` is used). A composite: ``getitem`` (when ``index`` is smaller) and ``take_along_axis``.
- ``scatter_add(x, axis, index, src)``: ``torch.scatter_add``: ``out = x`` then
  ``out[..., index[i, j, ...], ...] += src[i, j, ...]`` along ``axis``; duplicate indices
  accumulate. ``index`` has ``x``'s rank, ``index.shape[d] <= x.shape[d]`` for ``d != axis``
  and ``index.shape[d] <= src.shape[d]`` for every ``d`` (a larger ``src`` is cut to
  ``index``'s shape by a ``getitem`` first). ``src`` must have ``x``'s dtype (as PyTorch).
  Integer and float tensors; integers wrap around on overflow.
- ``index_add(x, axis, index, source, alpha=1)``: ``torch.index_add``: ``index`` is 1-D,
  ``source`` is ``x``'s shape with ``axis`` of length ``len(index)``, and
  ``out[..., index[i], ...] += alpha * source[..., i, ...]``; duplicates accumulate.
  ``alpha`` is a Python number (an int for integer tensors, as PyTorch), stored rounded to the
  dtype the op computes in. Integer and float tensors of ``source``'s dtype.
- float16 and bfloat16 scatter-adds (scatter_add, index_add, and so the gradients of
  take/take_along_axis/embedding) add in float32 and round once (PyTorch adds in the
  tensor's own dtype, rounding after every addition). Where an index repeats, float additions happen in an order the
  reference (NumPy's ``add.at``, in index order) and XLA need not share, so float32/float64
  results may differ by rounding where repeated contributions nearly cancel.
- ``embedding(indices, weight)``: ``weight[indices]`` for a 2-D ``weight`` (F.embedding
  without padding_idx / max_norm / scale_grad_by_freq / sparse). A composite: ``take`` along
  axis 0, so negative indices wrap (PyTorch raises).

Gradients: take's VJP is an index_add into zeros, take_along_axis's a scatter_add into zeros
(of the broadcast shape; the engine sums it down), scatter_add's and index_add's are the
cotangent itself (for ``x``) and a gather/take of it (for ``src``/``source``); indices get
none. All are registered ops, so gradients of gradients work.

The family is a package, each module importing only those before it: ``common`` (checks,
index wrapping, NumPy draws), ``samples`` (the sample strategies), ``take``, ``scatter``,
``writes``.
"""

from hlotrace.ops.gather import common, samples, take, scatter, writes  # noqa: F401, I001  (in dependency order)
from hlotrace.ops.gather.common import FAMILY, compute_dtype  # noqa: F401  (the rules' accumulation dtype)
from hlotrace.ops.gather.scatter import __all__ as _scatter_all
from hlotrace.ops.gather.scatter import *  # noqa: F403
from hlotrace.ops.gather.take import __all__ as _take_all
from hlotrace.ops.gather.take import *  # noqa: F403
from hlotrace.ops.gather.writes import __all__ as _writes_all
from hlotrace.ops.gather.writes import *  # noqa: F403

__all__ = [*_take_all, *_scatter_all, *_writes_all]
