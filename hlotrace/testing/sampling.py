"""Arrays, shapes and operand sets for op sample strategies (see :mod:`.strategies`).

Arrays carry boundary and special values where the dtype admits them (:mod:`.values`),
sometimes consist of a few repeated values (ties, uniform constants) or of signed zeros
only; shapes include zero-size dims, size-1 and rank-deficient broadcasting; operands of
one sample share a pool of values so that they meet as ties and near-ties; binary ops
also see Python scalars (weak types) and array operands may be captured as constants.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hlotrace import dtypes as dt
from hlotrace.testing.values import default_elements, float_elements, neighbours

ALL = dt.SUPPORTED
NUMERIC = (dt.int32, dt.float16, dt.bfloat16, dt.float32)
FLOATS = dt.FLOATING


@dataclass
class OpSample:
    """Positional operands (NumPy arrays or Python scalars) and keyword attributes.

    ``captured``: positions of array operands that the checked program closes over, so they
    are lowered as constants (``xla_trace(capture_as_const=True)``) instead of inputs.
    """

    args: tuple
    attrs: dict = field(default_factory=dict)
    captured: frozenset = frozenset()

    def __repr__(self) -> str:
        def show(a):
            if isinstance(a, np.ndarray):
                return f"array({a.tolist()!r}, dtype={a.dtype})"
            return repr(a)

        captured = f", captured={sorted(self.captured)}" if self.captured else ""
        return f"OpSample(args=({', '.join(show(a) for a in self.args)}), attrs={self.attrs!r}{captured})"


@dataclass
class DtypePin:
    """The primary dtype a property test is split by (None: not pinned), and the choices
    each ``dtypes()`` call of the sampler offered (the first one lists what the op admits)."""

    dtype: np.dtype | None
    offered: list = field(default_factory=list)


_PIN: contextvars.ContextVar[DtypePin | None] = contextvars.ContextVar("hlotrace_dtype_pin", default=None)


@contextlib.contextmanager
def pinned_dtype(dtype):
    """Within this block, ``dtypes(choices)`` draws ``dtype`` when ``choices`` admit it."""
    pin = DtypePin(None if dtype is None else np.dtype(dtype))
    token = _PIN.set(pin)
    try:
        yield pin
    finally:
        _PIN.reset(token)


def dtypes(choices=ALL):
    """The sample's primary dtype (that of its first operand), drawn from ``choices``.

    Property tests run once per primary dtype (see :func:`pinned_dtype`), so every dtype an
    op admits gets its own examples; draw the other operands' dtypes with
    :func:`other_dtypes`, which is never pinned.
    """
    choices = tuple(choices)
    pin = _PIN.get()
    if pin is not None:
        pin.offered.append(choices)
        if pin.dtype in choices:
            return st.just(pin.dtype)
    return st.sampled_from(choices)


def other_dtypes(first, choices=ALL):
    """A secondary operand's dtype: often ``first`` (the primary one), else any of ``choices``."""
    return st.one_of(st.just(first), st.sampled_from(tuple(choices)))


def shapes(min_dims=0, max_dims=4, min_side=0, max_side=5):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def _plain_arrays(dtype, shape, elements):
    # fill=nothing(): every element is drawn; hypothesis's default fill makes most elements
    # one repeated value, which hides misplaced-element bugs.
    if dtype == dt.bfloat16:
        return hnp.arrays(np.float32, shape, elements=elements, fill=st.nothing()).map(lambda a: a.astype(dt.bfloat16))
    return hnp.arrays(dtype, shape, elements=elements, fill=st.nothing())


@st.composite
def _few_values(draw, dtype, shape, elements):
    """An array made of 1–3 values drawn from ``elements``: uniform arrays, ties, and
    slices that hold only one boundary value (the dtype's extreme, say)."""
    pool = draw(st.lists(elements, min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    picks = rng.integers(0, len(pool), size=int(np.prod(shape)))
    values = np.asarray(pool, dtype=np.float32 if dtype == dt.bfloat16 else dtype)
    return values[picks].reshape(shape).astype(dtype)  # a 0-d index would give a NumPy scalar


def arrays(dtype, shape, elements=None):
    """Arrays of ``dtype`` (bfloat16 included) and ``shape``.

    Out of 16 arrays: 12 draw every element from ``elements`` (default: the dtype's mix of
    general, boundary and special values), 3 are made of a few repeated values, and 1 (for
    floats) of signed zeros only — an array constant mixing 0.0 and -0.0 is where a
    splat-by-value bug shows.
    """
    dtype = np.dtype(dtype)
    elements = elements if elements is not None else default_elements(dtype)

    def pick(r):
        if r == 0 and dtype in dt.FLOATING:
            return _plain_arrays(dtype, shape, st.sampled_from((0.0, -0.0)))
        if r <= 3:
            return _few_values(dtype, shape, elements)
        return _plain_arrays(dtype, shape, elements)

    return st.integers(0, 15).flatmap(pick)


@st.composite
def long_arrays(draw, dtype, shape, elements=None):
    """Large arrays (thousands of elements) without drawing every element: a seeded fill
    from a few drawn values, with up to four drawn values (often NaN/±inf) planted at
    drawn positions. For reductions over axes long enough to take XLA:CPU's vectorized
    paths (>= 4096 elements), which treat NaN differently."""
    dtype = np.dtype(dtype)
    elements = elements if elements is not None else default_elements(dtype)
    pool = draw(st.lists(elements, min_size=1, max_size=6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    wide = np.float32 if dtype == dt.bfloat16 else dtype
    flat = np.asarray(pool, dtype=wide)[rng.integers(0, len(pool), size=int(np.prod(shape)))]
    planted = elements if dtype not in dt.FLOATING else st.sampled_from((np.nan, np.inf, -np.inf, -0.0)) | elements
    for _ in range(draw(st.integers(0, 4)) if flat.size else 0):
        flat[draw(st.integers(0, flat.size - 1))] = draw(planted)
    return flat.reshape(shape).astype(dtype)


def scalar_of(dtype, elements=None):
    """A Python scalar of the kind matching ``dtype`` (bool, int or float)."""
    elements = elements if elements is not None else default_elements(dtype)
    if dtype in dt.FLOATING:
        return elements.map(float)
    if dtype == dt.int32:
        return elements.map(int)
    return elements.map(bool)


def _shared_pool(draw, pools: dict, dtype, value_range):
    """Per-dtype values shared by a sample's operands (half of them boundary values), with
    their neighbours one ulp or one unit away."""
    if dtype not in pools:
        base = draw(st.lists(default_elements(dtype, *value_range, boundary_in_16=8), min_size=1, max_size=3))
        pools[dtype] = tuple({v: None for b in base for v in neighbours(b, dtype)})
    return pools[dtype]


@st.composite
def elementwise(draw, n, dtypes_=ALL, ranges=None, scalars=True, same_dtype=False, max_dims=4):
    """``n`` mutually broadcastable operands; sometimes mixed dtypes, sometimes Python scalars.

    ``ranges``: None, or a function dtype -> (low, high) bounding the general and boundary
    values per op (None entries: the dtype's default). With two or more operands, half the
    elements come from a pool shared by the operands of the same dtype, so comparisons,
    max/min and logic meet equal and nearly equal operands, and bools every combination.
    """
    shapes_ = draw(
        hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=max_dims, min_side=0, max_side=5)
    ).input_shapes
    first = draw(dtypes(dtypes_))
    args = []
    drawn_dtypes = []
    pools: dict = {}
    for position, shape in enumerate(shapes_):
        dtype = first if same_dtype or position == 0 else draw(other_dtypes(first, dtypes_))
        drawn_dtypes.append(dtype)
        value_range = ranges(dtype) if ranges is not None else (None, None)
        elems = default_elements(dtype, *value_range)
        if n > 1:
            pool = _shared_pool(draw, pools, dtype, value_range)
            elems = st.integers(0, 1).flatmap(lambda r, e=elems, p=pool: st.sampled_from(p) if r else e)
        if scalars and n > 1 and draw(st.integers(0, 5)) == 0:
            args.append(draw(scalar_of(dtype, elems)))
        else:
            args.append(draw(arrays(dtype, shape, elems)))
    if all(not isinstance(a, np.ndarray) for a in args):
        args[0] = np.asarray(args[0], dtype=drawn_dtypes[0])
    return OpSample(tuple(args))


@st.composite
def with_captures(draw, samples, one_in=4):
    """``samples`` with about one array operand in ``one_in`` marked as captured (lowered
    as a constant, see :class:`OpSample`)."""
    sample = draw(samples)
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    captured = frozenset(i for i in positions if draw(st.integers(0, one_in - 1)) == 0)
    return replace(sample, captured=captured) if captured else sample


# -- per-op element ranges and samplers of the elementwise family ------------------------

# Ranges per unary op that keep clear of the points where one rounding step decides between
# a finite result and inf (exp near 88.7), or where libm and XLA reduce arguments
# differently (sin/cos of large values). NaN/±inf/±0.0 and boundary values in range are drawn.
_UNARY_RANGES = {"exp": (-8.0, 8.0), "sin": (-100.0, 100.0), "cos": (-100.0, 100.0)}


def unary_range(name):
    """Range factory (dtype -> (low, high)) for the unary op ``name``: bounded for the ops
    in ``_UNARY_RANGES``; otherwise general values in [-10, 10] and every boundary value of
    the dtype (large magnitudes, subnormals, signed zeros) as well."""
    low, high = _UNARY_RANGES.get(name, (None, None))
    return lambda dtype: (None, None) if dtype == dt.bool_ else (low, high)


def power_sample():
    """Bases and exponents small enough to stay finite; integer exponents non-negative."""
    return elementwise(2, NUMERIC, ranges=lambda dtype: (0, 6) if dtype == dt.int32 else (-4.0, 4.0))


@st.composite
def where_sample(draw):
    sample = draw(elementwise(3, ALL))
    cond = sample.args[0]
    return OpSample((cond, *sample.args[1:]))


@st.composite
def astype_sample(draw):
    source = draw(dtypes(ALL))
    target = draw(st.sampled_from(ALL))
    shape = draw(shapes())
    if source in dt.FLOATING and target == dt.int32:
        # Float→int of NaN, inf or out-of-range values is undefined in NumPy (and differs
        # from XLA, which saturates): draw in-range finite values only.
        elements = float_elements(source, -1e4, 1e4, special=False)
    else:
        elements = None
    x = draw(arrays(source, shape, elements))
    return OpSample((x,), {"dtype": target})


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
