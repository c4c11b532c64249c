"""Sample strategies of the shape and indexing ops (re-exported by
:mod:`hlotrace.testing.strategies`, which op definitions see as ``s``)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hlotrace import dtypes as dt
from hlotrace.testing.sampling import ALL, OpSample, arrays, dtypes, other_dtypes, shapes
from hlotrace.testing.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN


@st.composite
def distinct_arrays(draw, dtype, shape):
    """Arrays whose elements differ from each other, so a misplaced element shows.

    Hypothesis fills most of an array from ``arrays`` with one value, which hides
    permutation and offset bugs in shape and indexing ops. Values here are a seeded
    shuffle of distinct integers (bool: random bits); NaN, ±inf and -0.0 drawn by
    ``arrays`` are kept where they fall.
    """
    dtype = np.dtype(dtype)
    base = draw(arrays(dtype, shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == dt.bool_:
        return rng.integers(0, 2, base.shape).astype(bool)
    values = (rng.permutation(base.size) - base.size // 2).reshape(base.shape)
    if dtype == dt.int32:
        # Sometimes near an end of the range or past 2**24, where float32 loses integers.
        offset = draw(st.sampled_from((0, 2**24 + base.size, INT32_MAX - base.size, INT32_MIN + base.size)))
        return (values + offset).astype(dtype)
    if dtype == dt.int64:
        # Sometimes past 2**53 (where float64 loses integers), past int32 or near the ends.
        offsets = (0, 2**53 + base.size, INT32_MAX + base.size, INT64_MAX - base.size, INT64_MIN + base.size)
        return (values + draw(st.sampled_from(offsets))).astype(dtype)
    values = values.astype(dtype)
    wide = base.astype(np.float64)
    special = ~np.isfinite(wide) | ((wide == 0) & np.signbit(wide))
    return np.where(special, base, values)


def _maybe_negative(draw, axis, rank):
    """``axis`` or its negative alias, so canonicalization of both forms is exercised."""
    return axis - rank if draw(st.booleans()) else axis


def _axis_attr(draw, axes):
    """A tuple of axes, or a bare int when there is one."""
    return axes[0] if len(axes) == 1 and draw(st.booleans()) else tuple(axes)


@st.composite
def reshape_sample(draw):
    """A target shape with the same size; sometimes one -1 (also for zero-size inputs)."""
    dtype, shape = draw(dtypes(ALL)), draw(shapes())
    size = int(np.prod(shape))
    rank = draw(st.integers(0 if size == 1 else 1, 4))
    if size == 0:
        target = draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank))
        if 0 not in target:
            target[draw(st.integers(0, rank - 1))] = draw(st.sampled_from([0, -1]))
    else:
        target = [1] * rank
        n, p = size, 2
        while n > 1:  # spread the prime factors of size over the target dims
            while n % p == 0:
                target[draw(st.integers(0, rank - 1))] *= p
                n //= p
            p += 1
        if rank and draw(st.booleans()):
            target[draw(st.integers(0, rank - 1))] = -1
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"shape": tuple(target)})


@st.composite
def transpose_sample(draw):
    dtype, shape = draw(dtypes(ALL)), draw(shapes())
    rank = len(shape)
    if draw(st.integers(0, 4)) == 0:
        perm = None
    else:
        perm = tuple(_maybe_negative(draw, p, rank) for p in draw(st.permutations(range(rank))))
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"perm": perm})


@st.composite
def broadcast_to_sample(draw):
    """A target shape and an input that is a suffix of it with some dims set to 1."""
    dtype, target = draw(dtypes(ALL)), draw(shapes())
    rank = draw(st.integers(0, len(target)))
    suffix = target[len(target) - rank :]
    shape = tuple(1 if draw(st.booleans()) else d for d in suffix)
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"shape": tuple(target)})


@st.composite
def expand_dims_sample(draw):
    dtype, shape = draw(dtypes(ALL)), draw(shapes(max_dims=3))
    out_rank = len(shape) + draw(st.integers(0, 3))
    axes = draw(st.permutations(range(out_rank)))[: out_rank - len(shape)]
    axes = [_maybe_negative(draw, a, out_rank) for a in axes]
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"axis": _axis_attr(draw, axes)})


@st.composite
def squeeze_sample(draw):
    dtype = draw(dtypes(ALL))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=4)))
    ones = [i for i, d in enumerate(shape) if d == 1]
    if draw(st.booleans()):
        axis = None
    else:
        chosen = draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
        axis = _axis_attr(draw, [_maybe_negative(draw, a, len(shape)) for a in chosen])
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"axis": axis})


@st.composite
def concat_sample(draw):
    """1–4 operands of mixed dtypes that agree on every dim but the (random) axis."""
    base = list(draw(shapes(min_dims=1)))
    axis = draw(st.integers(0, len(base) - 1))
    first = draw(dtypes(ALL))
    args = []
    for _ in range(draw(st.integers(1, 4))):
        base[axis] = draw(st.integers(0, 4))
        dtype = draw(other_dtypes(first))
        args.append(draw(distinct_arrays(dtype, tuple(base))))
    return OpSample(tuple(args), {"axis": _maybe_negative(draw, axis, len(base))})


def _basic_index_item(draw, dim):
    """An int (in bounds, either sign) or a slice with bounds that may lie out of range."""
    if dim and draw(st.integers(0, 2)) == 0:
        return draw(st.integers(-dim, dim - 1))
    bound = st.one_of(st.none(), st.integers(-dim - 3, dim + 3))
    step = st.sampled_from([None, 1, 2, 3, -1, -2, -3])
    return slice(draw(bound), draw(bound), draw(step))


@st.composite
def getitem_sample(draw):
    """A random valid basic index: ints, slices, None and at most one Ellipsis."""
    dtype, shape = draw(dtypes(ALL)), draw(shapes())
    rank = len(shape)
    ellipsis = draw(st.booleans())
    lead = draw(st.integers(0, rank))
    tail = draw(st.integers(0, rank - lead)) if ellipsis else 0
    items = [_basic_index_item(draw, d) for d in shape[:lead]]
    if ellipsis:
        items.append(Ellipsis)
    items += [_basic_index_item(draw, d) for d in shape[rank - tail :]]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    index = items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)
    return OpSample((draw(distinct_arrays(dtype, shape)),), {"index": index})
