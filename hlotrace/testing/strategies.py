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
    return st.one_of(finite, st.sampled_from(SPECIAL_FLOATS))


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
    if dtype == dt.bfloat16:
        return hnp.arrays(np.float32, shape, elements=elements).map(lambda a: a.astype(dt.bfloat16))
    return hnp.arrays(dtype, shape, elements=elements)


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
    shapes_ = draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=max_dims,
                                                      min_side=0, max_side=5)).input_shapes
    first = draw(dtypes(dtypes_))
    args = []
    for shape in shapes_:
        dtype = first if same_dtype else draw(st.one_of(st.just(first), dtypes(dtypes_)))
        elems = elements(dtype) if elements is not None else None
        if scalars and n > 1 and draw(st.integers(0, 5)) == 0:
            args.append(draw(scalar_of(dtype, elems)))
        else:
            args.append(draw(arrays(dtype, shape, elems)))
    if all(not isinstance(a, np.ndarray) for a in args):
        args[0] = np.asarray(args[0], dtype=first)
    return OpSample(tuple(args))


def unary_elements(name):
    """Per-op value ranges that keep clear of overflow boundaries (where one rounding step
    decides between a finite value and inf); NaN/±inf/-0.0 are still drawn."""
    if name == "exp":
        return lambda dtype: default_elements(dtype, -8.0, 8.0) if dtype != dt.int32 else default_elements(dtype, -8, 8)
    if name in ("sin", "cos"):
        # Argument reduction of large inputs differs between libm and XLA in low bits.
        return lambda dtype: default_elements(dtype, -100.0, 100.0) if dtype != dt.int32 else default_elements(dtype, -100, 100)
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
