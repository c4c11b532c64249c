"""The gather family's sample strategies (``s`` is hlotrace.testing.strategies, passed in)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.gather.common import (
    NUMERIC,
    index_values,
    operand_shape,
    take_shape,
)
from hlotrace.ops.indexing import _getitem_canonicalize, getitem_infer, getitem_sample
from hlotrace.ops.registry import Aval


def take_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(-len(shape), len(shape)))
        dim, rest = shape[axis], math.prod(shape) // max(shape[axis], 1)
        while True:
            index_shape = s.random_shape(rng, max_dims=2)
            if dim == 0 and math.prod(index_shape):
                index_shape = (*index_shape[:-1], 0) if index_shape else (0,)
            if rest * math.prod(index_shape) <= 128:
                break
        indices = index_values(rng, index_shape, dim).astype(index_dtype)
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)), indices), {"axis": axis})

    return sample()


def take_along_axis_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        out = operand_shape(rng)
        axis = int(rng.integers(0, len(out)))
        shape = [1 if rng.random() < 1 / 4 else d for d in out]
        index_shape = [1 if rng.random() < 1 / 4 and d != axis else n for d, n in enumerate(out)]
        shape[axis] = int(rng.integers(0, 5)) if rng.random() < 1 / 8 else int(rng.integers(1, 5))
        if shape[axis] == 0:
            index_shape[axis] = 0
        indices = index_values(rng, tuple(index_shape), shape[axis]).astype(index_dtype)
        axis = axis - len(out) if rng.random() < 1 / 2 else axis
        return s.OpSample((draw(s.distinct_arrays(dtype, tuple(shape))), indices), {"axis": axis})

    return sample()


def sum_elements(s, dtype, rng):
    """Elements of scatter-add operands. Floats: multiples of 1/4 in [-8, 8] and the special
    values (NaN, ±inf, ±0.0), whose sums are exact in float32 in any order (duplicate indices
    add in an order NumPy and XLA need not share); half precision half of the time general
    values (they add in float32 and round once: the order hardly shows). Integers: the full
    range (sums wrap around alike in any order)."""
    if dtype in dt.FLOATING and dtype.itemsize == 2 and rng.random() < 1 / 2:
        return s.values(dtype, special_rate=1 / 16, boundary_rate=0.0)
    if dtype in dt.FLOATING:
        return s.values(dtype, -8.0, 8.0, grid_bits=2, edges=(0.0, -0.0, 1.0, -1.0, 0.5))
    return s.values(dtype)


def scatter_add_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(NUMERIC)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(0, len(shape)))
        index_shape = [int(rng.integers(0, d + 1)) if rng.random() < 1 / 4 else d for d in shape]
        index_shape[axis] = int(rng.integers(0, 6)) if shape[axis] else 0
        index = index_values(rng, tuple(index_shape), shape[axis]).astype(index_dtype)
        elements = sum_elements(s, dtype, rng)
        x = draw(s.arrays(dtype, shape, elements))
        src = draw(s.arrays(dtype, tuple(index_shape), elements))
        axis = axis - len(shape) if rng.random() < 1 / 2 else axis
        return s.OpSample((x, index, src), {"axis": axis})

    return sample()


def index_add_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(NUMERIC)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(0, len(shape)))
        n = int(rng.integers(0, 6)) if shape[axis] else 0
        index = index_values(rng, (n,), shape[axis]).astype(index_dtype)
        elements = sum_elements(s, dtype, rng)
        x = draw(s.arrays(dtype, shape, elements))
        source = draw(s.arrays(dtype, (*shape[:axis], n, *shape[axis + 1 :]), elements))
        attrs = {"axis": axis - len(shape) if rng.random() < 1 / 2 else axis}
        if rng.random() < 2 / 3:
            alphas = (1, -1, 2, 3, 0) if dtype in dt.INTEGER else (1, -1, 2, 0.5, 0.0, -0.25, 3)
            attrs["alpha"] = alphas[rng.integers(0, len(alphas))]
        return s.OpSample((x, index, source), attrs)

    return sample()


def masked_fill_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        rng = s.generator(draw)
        shape = s.random_shape(rng)
        rank = int(rng.integers(0, len(shape) + 1)) if rng.random() < 1 / 3 else len(shape)
        mask_shape = tuple(1 if rng.random() < 1 / 4 else d for d in shape[len(shape) - rank :])
        x = draw(s.arrays(dtype, shape))
        density = rng.choice([0.0, 0.5, 1.0, rng.random()])
        mask = np.asarray(rng.random(mask_shape) < density)
        value = s.values(dtype).scalar(rng)
        if dtype in dt.FLOATING and rng.random() < 1 / 4:  # an int, or a value past the dtype's range
            value = int(rng.integers(-5, 6)) if rng.random() < 1 / 2 else float(rng.choice([1e10, -1e300, 7e4]))
        return s.OpSample((x, mask), {"value": value})

    return sample()


def _value_dtype(s, draw, dtype):
    """A value dtype that may be stored in a ``dtype`` tensor (no float into int/bool)."""
    choices = s.ALL if dtype in dt.FLOATING else (dt.bool_, *dt.INTEGER)
    return np.dtype(draw(s.other_dtypes(dtype, choices)))


def _value(s, draw, rng, dtype, target, keep_ones=()):
    """A value for ``target`` (the indexed shape): a Python scalar one time in six, else an
    array of a suffix of it with some dims 1 (the dims in ``keep_ones`` always 1)."""
    vdtype = _value_dtype(s, draw, dtype)
    if rng.random() < 1 / 6 and not keep_ones:
        scalar = s.values(vdtype).scalar(rng)
        if type(scalar) is int and dt.promote(dtype, dt.Weak(int)) == dt.int32:
            scalar = int(np.array(scalar, np.int64).astype(np.int32))  # a weak int is int32 here
        return scalar
    shape = [1 if i in keep_ones or rng.random() < 1 / 4 else d for i, d in enumerate(target)]
    lead = int(rng.integers(0, len(shape) + 1)) if rng.random() < 1 / 4 else 0
    if any(i < lead for i in keep_ones):
        lead = 0
    return draw(s.arrays(vdtype, tuple(shape[lead:])))


def setitem_sample(s):
    @s.st.composite
    def sample(draw):
        base = draw(getitem_sample(s))
        x, index = base.args[0], base.attrs["index"]
        aval = Aval(x.shape, x.dtype)
        selected = getitem_infer(aval, **_getitem_canonicalize((aval,), {"index": index})).shape
        value = _value(s, draw, s.generator(draw), x.dtype, selected)
        return s.OpSample((x, value), {"index": index})

    return sample()


def index_copy_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = np.dtype(draw(s.dtypes(s.ALL)))  # the dtype probe draws None
        index_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        shape = operand_shape(rng)
        axis = int(rng.integers(0, len(shape)))
        dim = shape[axis]
        # Repeated indices only where every write is the same value (the source broadcast
        # along the index dims) and no gradient is checked (not float): which write wins is
        # unspecified, and a repeated write's cotangent counts once per write.
        unique = dtype in dt.FLOATING or rng.random() < 1 / 2
        while True:
            index_shape = s.random_shape(rng, max_dims=2)
            n = math.prod(index_shape)
            if (n <= dim or (not unique and dim)) or n == 0:
                break
        index = index_values(rng, index_shape, dim, unique=unique).astype(index_dtype)
        target = take_shape(shape, index_shape, axis)
        keep_ones = () if unique else tuple(range(axis, axis + len(index_shape)))
        source = _value(s, draw, rng, dtype, target, keep_ones)
        x = draw(s.distinct_arrays(dtype, shape))
        return s.OpSample((x, index, source), {"axis": axis - len(shape) if rng.random() < 1 / 2 else axis})

    return sample()
