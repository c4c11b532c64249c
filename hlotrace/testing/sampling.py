"""Arrays, shapes and operand sets for op sample strategies (see :mod:`.strategies`).

Arrays carry boundary and special values where the dtype admits them (:mod:`.values`),
sometimes consist of a few repeated values (ties, uniform constants) or of signed zeros
only; shapes include zero-size dims, size-1 and rank-deficient broadcasting; an operand
is correlated with an earlier one of its dtype so that they meet as ties and near-ties;
binary ops also see Python scalars (weak types) and array operands may be captured as
constants.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import strategies as st

from hlotrace import dtypes as dt
from hlotrace.ops.common import random_shape
from hlotrace.testing.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, LITERALS, Values, nudge

ALL = dt.SUPPORTED
NUMERIC = (dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float32, dt.float64)
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
    force: bool = False


_PIN: contextvars.ContextVar[DtypePin | None] = contextvars.ContextVar("hlotrace_dtype_pin", default=None)


@contextlib.contextmanager
def pinned_dtype(dtype, force=False):
    """Within this block, ``dtypes(choices)`` draws ``dtype`` when ``choices`` admit it, or
    always with ``force`` (``hlotrace rules --matrix`` probes what the op itself refuses)."""
    pin = DtypePin(None if dtype is None else np.dtype(dtype), force=force)
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
        if pin.dtype is not None and (pin.force or pin.dtype in choices):  # (np.dtype == None is float64's test)
            return st.just(pin.dtype)
    return st.sampled_from(choices)


def other_dtypes(first, choices=ALL):
    """A secondary operand's dtype: often ``first`` (the primary one), else any of ``choices``.

    64-bit choices are offered only with a 64-bit ``first``: the float64/int64 tests mix
    them with every other dtype already, and the narrower dtypes' tests keep drawing the
    examples they drew before 64-bit dtypes existed (and that their mutation scores and
    coverage checks were measured on).
    """
    if np.dtype(first).itemsize < 8:
        choices = [c for c in choices if np.dtype(c).itemsize < 8]
    return st.one_of(st.just(first), st.sampled_from(tuple(choices)))


@st.composite
def shapes(draw, min_dims=0, max_dims=4):
    """A shape of rank min_dims..max_dims with sides 0..5 (see :func:`random_shape`)."""
    rng = generator(draw)
    while True:
        shape = random_shape(rng, max_dims)
        if len(shape) >= min_dims:
            return shape


def values(dtype, low=None, high=None, **options) -> Values:
    """The :class:`Values` of ``dtype`` in [low, high] (see there for ``options``)."""
    return Values(np.dtype(dtype), low, high, **options)


def generator(draw) -> np.random.Generator:
    """A NumPy generator seeded by hypothesis: for choices that should happen at the stated
    rates (hypothesis itself favours its simplest choice, e.g. 0 of ``integers(0, 7)``)."""
    return np.random.default_rng(draw(st.integers(0, 2**64 - 1)))


@st.composite
def arrays(draw, dtype, shape, elements: Values | None = None):
    """An array of ``dtype`` (bfloat16 included) and ``shape``, filled from ``elements``
    (default: :func:`values` of the dtype). Out of 16 arrays, 12 draw every element
    independently, 3 are made of 1–3 values drawn once (uniform arrays, ties, slices that
    hold only one boundary value), and for floats 1 of signed zeros only: an array
    constant mixing 0.0 and -0.0 is where a splat-by-value bug shows."""
    dtype = np.dtype(dtype)
    elements = elements if elements is not None else values(dtype)
    rng = generator(draw)
    size = int(np.prod(shape))
    mode = rng.integers(0, 16)
    if mode == 0 and dtype in dt.FLOATING:
        flat = np.where(rng.integers(0, 2, size).astype(bool), -0.0, 0.0)
    elif mode <= 3:
        pool = elements.draw(rng, int(rng.integers(1, 4)))
        flat = pool[rng.integers(0, len(pool), size)]
    else:
        flat = elements.draw(rng, size)
    return flat.reshape(shape).astype(dtype)


@st.composite
def long_arrays(draw, dtype, shape, elements: Values | None = None):
    """Large arrays (thousands of elements) for reductions over axes long enough to take
    XLA:CPU's vectorized paths (>= 4096 elements), which treat NaN differently: a fill from
    a few drawn values, with one to four values (mostly NaN/±inf) planted at random places."""
    dtype = np.dtype(dtype)
    elements = elements if elements is not None else values(dtype)
    rng = generator(draw)
    size = int(np.prod(shape))
    pool = elements.draw(rng, int(rng.integers(1, 7)))
    flat = pool[rng.integers(0, len(pool), size)]
    count = int(rng.integers(1, 5)) if size else 0
    planted = elements.draw(rng, count)
    if dtype in dt.FLOATING:  # mostly NaN (what the vectorized max/min paths skip) or ±inf
        special = rng.random(count) < 0.75
        planted[special] = rng.choice(np.array([np.nan, np.nan, np.inf, -np.inf]), int(special.sum()))
    flat[rng.integers(0, max(size, 1), count)] = planted
    return flat.reshape(shape).astype(dtype)


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


@st.composite
def scalar_of(draw, dtype, elements: Values | None = None):
    """A Python scalar of the kind matching ``dtype`` (bool, int or float)."""
    elements = elements if elements is not None else values(dtype)
    return elements.scalar(generator(draw))


# Side lengths of elementwise operands and how often each is drawn: zero-size rarely (it
# empties the result), 1 often (it broadcasts), and sizes up to 5.


def broadcast_shapes(rng: np.random.Generator, n: int, max_dims: int) -> list[tuple]:
    """``n`` mutually broadcastable shapes: a result shape of rank 0..max_dims, and per
    operand a suffix of it (rank-deficient one time in three) with some dims set to 1."""
    result = random_shape(rng, max_dims)
    shapes = []
    for _ in range(n):
        rank = int(rng.integers(0, len(result) + 1)) if rng.random() < 1 / 3 else len(result)
        shapes.append(tuple(1 if rng.random() < 0.25 else d for d in result[len(result) - rank :]))
    return shapes


def _aligned(source, shape) -> np.ndarray:
    """The elements of ``source`` that meet each element of an operand of ``shape`` when
    the two broadcast (index 0 where the operand's dim is 1 or missing)."""
    source = np.asarray(source)
    full = np.broadcast_to(source, np.broadcast_shapes(source.shape, shape))
    lead = full.ndim - len(shape)
    index = (0,) * lead + tuple(slice(0, 1) if d == 1 else slice(None) for d in shape)
    return full[index].reshape(shape)


def correlate(rng: np.random.Generator, operand, source):
    """``operand`` with a third of its elements replaced by the ``source`` elements they
    meet (ties) and a sixth by those moved one step (near-ties); ``source`` must have the
    operand's dtype. Python scalars are replaced whole, with the same odds."""
    if not isinstance(operand, np.ndarray):
        first = np.asarray(source).ravel()[:1]
        if first.size == 0 or rng.random() >= 1 / 2:
            return operand
        value = (nudge(first, rng) if rng.random() < 1 / 3 else first)[0]
        return type(operand)(value.item())
    if np.asarray(source).size == 0 or operand.size == 0:
        return operand  # nothing meets
    aligned = _aligned(source, operand.shape)
    pick = rng.random(operand.shape)
    out = np.where(pick < 1 / 3, aligned, operand)
    return np.where((pick >= 1 / 3) & (pick < 1 / 2), nudge(aligned, rng), out).astype(operand.dtype)


@st.composite
def elementwise(draw, n, dtypes_=ALL, ranges=None, scalars=True, same_dtype=False, max_dims=4):
    """``n`` mutually broadcastable operands; sometimes mixed dtypes, sometimes Python scalars.

    ``ranges``: None, or a function dtype -> (low, high) bounding the general and boundary
    values per op (None entries: the dtype's default). An operand whose dtype an earlier
    one has is correlated with it (see :func:`correlate`), so comparisons, max/min and
    logic meet equal and nearly equal operands, and bools every combination. One operand
    in six is a Python scalar (weak type).
    """
    first = draw(dtypes(dtypes_))
    rng = generator(draw)
    args = []
    drawn_dtypes = []
    for position, shape in enumerate(broadcast_shapes(rng, n, max_dims)):
        dtype = first if same_dtype or position == 0 else draw(other_dtypes(first, dtypes_))
        value_range = ranges(dtype) if ranges is not None else (None, None)
        elements = values(dtype, *value_range)
        if scalars and n > 1 and rng.integers(0, 6) == 0:
            operand = elements.scalar(rng)
        else:
            operand = draw(arrays(dtype, shape, elements))
        if dtype in drawn_dtypes:
            operand = correlate(rng, operand, args[drawn_dtypes.index(dtype)])
        drawn_dtypes.append(dtype)
        args.append(operand)
    if all(not isinstance(a, np.ndarray) for a in args):
        args[0] = np.asarray(args[0], dtype=drawn_dtypes[0])
    return OpSample(fit_int_scalars(args))


def fit_int_scalars(args, promoted=None) -> tuple:
    """``args`` with Python ints beyond int32 (drawn for an int64 operand) wrapped into
    int32 where weak typing makes them int32, i.e. unless an int64 or float array is among
    the operands at positions ``promoted`` (default: all): NumPy and hlotrace refuse an
    out-of-range Python int (OverflowError) rather than wrap it."""
    positions = range(len(args)) if promoted is None else promoted
    strong = [args[p].dtype for p in positions if isinstance(args[p], np.ndarray)]
    if dt.promote(*strong, dt.Weak(int)) != dt.int32:
        return tuple(args)
    return tuple(
        int(np.array(a, np.int64).astype(np.int32)) if type(a) is int and not INT32_MIN <= a <= INT32_MAX else a
        for a in args
    )


@st.composite
def with_captures(draw, samples, one_in=4):
    """``samples`` with about one array operand in ``one_in`` marked as captured (lowered
    as a constant, see :class:`OpSample`); a third of the captured float and bool arrays
    are filled with one literal."""
    sample = draw(samples)
    rng = generator(draw)
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    captured = frozenset(i for i in positions if rng.integers(0, one_in) == 0)
    if not captured:
        return sample
    args = list(sample.args)
    for i in captured:
        literals = LITERALS[args[i].dtype.kind]
        if args[i].dtype not in dt.INTEGER and rng.random() < 1 / 3:
            # Like a model's captured zero bias or unit scale: one literal everywhere (+0 most
            # often), the constants XLA's simplifier folds into the ops that use them.
            value = literals[0] if rng.random() < 0.5 else literals[rng.integers(0, len(literals))]
            args[i] = np.full(args[i].shape, value, args[i].dtype)
    return replace(sample, args=tuple(args), captured=captured)


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


@st.composite
def power_sample(draw):
    """Bases and exponents small enough to stay finite; integer exponents non-negative
    (a near-tie of a correlated 0 is -1, which integer power refuses: it becomes 0)."""
    sample = draw(elementwise(2, NUMERIC, ranges=lambda dtype: (0, 6) if dtype in dt.INTEGER else (-4.0, 4.0)))
    base, exponent = sample.args
    kinds = [a.dtype if isinstance(a, np.ndarray) else dt.Weak(type(a)) for a in sample.args]
    if dt.promote(*kinds) in dt.INTEGER:
        exponent = (
            np.asarray(np.maximum(exponent, 0), exponent.dtype)
            if isinstance(exponent, np.ndarray)
            else max(exponent, 0)
        )
    return OpSample((base, exponent))


@st.composite
def where_sample(draw):
    sample = draw(elementwise(3, ALL))
    # Python scalars take their dtype from x and y only (the op's promote_inputs).
    return OpSample(fit_int_scalars(sample.args, promoted=(1, 2)))


@st.composite
def astype_sample(draw):
    source = draw(dtypes(ALL))
    target = draw(st.sampled_from(ALL))
    shape = draw(shapes())
    if source in dt.FLOATING and target in dt.INTEGER:
        # Float→int of NaN, inf or out-of-range values is undefined in NumPy (and differs
        # from XLA, which saturates): draw in-range finite values only.
        elements = values(source, -1e4, 1e4, special=False)
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
