"""Hypothesis building blocks for op sample strategies.

Each op's ``sample`` is ``lambda s: ...`` where ``s`` is this module, and returns a
strategy of :class:`OpSample`. Arrays carry special values where the dtype admits them
(NaN, ±inf, -0.0), shapes include zero-size dims and broadcasting, and binary ops also see
Python scalar operands (weak types).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hlotrace import dtypes as dt

ALL = dt.SUPPORTED
NUMERIC = (dt.int32, dt.float16, dt.bfloat16, dt.float32)
FLOATS = dt.FLOATING
SPECIAL_FLOATS = (float("nan"), float("inf"), float("-inf"), -0.0, 0.0)


@dataclass
class OpSample:
    """Positional operands (NumPy arrays or Python scalars) and keyword attributes."""

    args: tuple
    attrs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        def show(a):
            if isinstance(a, np.ndarray):
                return f"array({a.tolist()!r}, dtype={a.dtype})"
            return repr(a)

        return f"OpSample(args=({', '.join(show(a) for a in self.args)}), attrs={self.attrs!r})"


def dtypes(choices=ALL):
    return st.sampled_from(tuple(choices))


def shapes(min_dims=0, max_dims=4, min_side=0, max_side=5):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def float_elements(dtype, low=-10.0, high=10.0, special=True):
    """Finite values in [low, high] exactly representable in ``dtype``, plus special values."""
    width = 16 if dtype == dt.float16 else 32
    finite = st.floats(low, high, width=width, allow_subnormal=False)
    if dtype == dt.bfloat16:
        finite = finite.map(lambda v: float(np.float32(v).astype(dt.bfloat16)))
    if not special:
        return finite
    # One element in four is special: enough to hit every NaN/inf/-0.0 path, while most
    # arithmetic still runs on finite values.
    return rare_specials(finite, one_in=4)


def default_elements(dtype, low=-10.0, high=10.0, special=True):
    if dtype in dt.FLOATING:
        return float_elements(dtype, low, high, special)
    if dtype == dt.int32:
        return st.integers(int(max(low, -(2**31))), int(min(high, 2**31 - 1)))
    return st.booleans()


def arrays(dtype, shape, elements=None):
    """Arrays of ``dtype`` (bfloat16 included) and ``shape``."""
    dtype = np.dtype(dtype)
    elements = elements if elements is not None else default_elements(dtype)
    # fill=nothing(): every element is drawn; hypothesis's default fill makes most elements
    # one repeated value, which hides misplaced-element bugs.
    if dtype == dt.bfloat16:
        return hnp.arrays(np.float32, shape, elements=elements, fill=st.nothing()).map(lambda a: a.astype(dt.bfloat16))
    return hnp.arrays(dtype, shape, elements=elements, fill=st.nothing())


def scalar_of(dtype, elements=None):
    """A Python scalar of the kind matching ``dtype`` (bool, int or float)."""
    elements = elements if elements is not None else default_elements(dtype)
    if dtype in dt.FLOATING:
        return elements.map(float)
    if dtype == dt.int32:
        return elements.map(int)
    return elements.map(bool)


@st.composite
def elementwise(draw, n, dtypes_=ALL, elements=None, scalars=True, same_dtype=False, max_dims=4):
    """``n`` mutually broadcastable operands; sometimes mixed dtypes, sometimes Python scalars.

    ``elements``: None, or a function dtype -> element strategy (ranges per op).
    """
    shapes_ = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=max_dims, min_side=0, max_side=5)
    ).input_shapes
    first = draw(dtypes(dtypes_))
    args = []
    drawn_dtypes = []
    for shape in shapes_:
        dtype = first if same_dtype else draw(st.one_of(st.just(first), dtypes(dtypes_)))
        drawn_dtypes.append(dtype)
        elems = elements(dtype) if elements is not None else None
        if scalars and n > 1 and draw(st.integers(0, 5)) == 0:
            args.append(draw(scalar_of(dtype, elems)))
        else:
            args.append(draw(arrays(dtype, shape, elems)))
    if all(not isinstance(a, np.ndarray) for a in args):
        args[0] = np.asarray(args[0], dtype=drawn_dtypes[0])
    return OpSample(tuple(args))


def unary_elements(name):
    """Per-op value ranges that keep clear of overflow boundaries (where one rounding step
    decides between a finite value and inf); NaN/±inf/-0.0 are still drawn."""
    if name == "exp":
        return lambda dtype: default_elements(dtype, -8.0, 8.0) if dtype != dt.int32 else default_elements(dtype, -8, 8)
    if name in ("sin", "cos"):
        # Argument reduction of large inputs differs between libm and XLA in low bits.
        return lambda dtype: (
            default_elements(dtype, -100.0, 100.0) if dtype != dt.int32 else default_elements(dtype, -100, 100)
        )
    return lambda dtype: default_elements(dtype, -1e4, 1e4) if dtype != dt.bool_ else default_elements(dtype)


@st.composite
def power_sample(draw):
    """Bases and exponents small enough to stay finite; integer exponents non-negative."""

    def elements(dtype):
        if dtype == dt.int32:
            return st.integers(0, 6)
        return float_elements(dtype, -4.0, 4.0)

    return draw(elementwise(2, NUMERIC, elements=elements))


@st.composite
def where_sample(draw):
    sample = draw(elementwise(3, ALL))
    cond = sample.args[0]
    return OpSample((cond, *sample.args[1:]))


@st.composite
def astype_sample(draw):
    source = draw(dtypes(ALL))
    target = draw(dtypes(ALL))
    shape = draw(shapes())
    if source in dt.FLOATING and target == dt.int32:
        # Float→int of NaN, inf or out-of-range values is undefined in NumPy (and differs
        # from XLA, which saturates): draw in-range finite values only.
        elements = float_elements(source, -1e4, 1e4, special=False)
    else:
        elements = None
    x = draw(arrays(source, shape, elements))
    return OpSample((x,), {"dtype": target})


# -- shape and indexing ops -------------------------------------------------------------


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
    values = (rng.permutation(base.size) - base.size // 2).reshape(base.shape).astype(dtype)
    if dtype == dt.int32:
        return values
    wide = base.astype(np.float32)
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
        dtype = draw(st.one_of(st.just(first), dtypes(ALL)))
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


def exact_floats(low=-10.0, high=10.0, bits=4, special=True):
    """Multiples of ``2**-bits`` in [low, high], plus special values if ``special``.

    With the defaults every value fits in 8 significant bits (so in bfloat16 too), and sums
    and dot products of a few hundred of them are exact in float32: accumulation order
    cannot change a result, so a mismatch against a reference is a bug, not rounding.
    """
    scale = 2**bits
    finite = st.integers(int(np.ceil(low * scale)), int(np.floor(high * scale))).map(lambda i: i / scale)
    return rare_specials(finite) if special else finite


def rare_specials(finite, one_in=16):
    """Elements from ``finite``, and a special value (NaN, ±inf, ±0.0) about once in ``one_in``.

    ``arrays`` draws every element, so with specials as likely as finite values nearly every
    reduction or dot product would come out NaN and the finite arithmetic would go untested.
    """
    return st.integers(0, one_in - 1).flatmap(lambda r: st.sampled_from(SPECIAL_FLOATS) if r == 0 else finite)


def axis_choice(rank):
    """An ``axis`` attribute for a tensor of ``rank``: None, one int or a tuple of distinct
    axes, each possibly negative, tuples in any order (the empty tuple included)."""

    def signed(a):
        return st.sampled_from((a, a - rank))

    if rank == 0:
        return st.sampled_from((None, ()))
    single = st.integers(0, rank - 1).flatmap(signed)
    several = st.lists(st.integers(0, rank - 1), unique=True, max_size=rank).flatmap(
        lambda axes: st.tuples(*(signed(a) for a in axes))
    )
    return st.one_of(st.none(), single, several)
