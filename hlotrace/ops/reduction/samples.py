"""The reduction family's sample strategies (``s`` is hlotrace.testing.strategies, passed in)."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.common import normalize_axes

# The primary dtypes each op's property test is split by (every dtype the op admits is
# accepted): the kinds and accumulation paths each op has, without repeating the ones
# whose rules differ only in element types, to keep the generated tests' time down.
SAMPLE_DTYPES = {
    "any": (dt.bool_, dt.int32, dt.float16, dt.float32),
    "all": (dt.bool_, dt.int32, dt.float16, dt.float32),
    "prod": (dt.bool_, dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float32),
    "var": (dt.bool_, dt.int32, dt.float16, dt.float32, dt.float64),
    "logsumexp": dt.FLOATING,
}


# -- sum, max, min, mean ---------------------------------------------------------------------


def _reduce_elements(s, op, dtype):
    if dtype in dt.FLOATING and op in ("sum", "mean"):
        # Exact partial sums (multiples of 1/16 up to 10): accumulation order (NumPy
        # pairwise vs XLA's tree) cannot change the result, so the default tolerance holds
        # and a mismatch is a bug. No boundary values: their sums would round.
        return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
    if dtype in dt.FLOATING:
        return s.values(dtype, special_rate=1 / 16)
    if dtype in dt.INTEGER and op == "mean":
        # Small enough to sum exactly in float32, even over a 4200-long axis.
        return s.values(dtype, -1000, 1000)
    # sum: the full integer range exercises wraparound; max/min: the extremes, their start values.
    return None


def _range_end(op, dtype):
    """The value at the end of ``dtype``'s range that max (min) starts from."""
    if dtype in dt.FLOATING:
        return -np.inf if op == "max" else np.inf
    info = np.iinfo(dtype)
    return int(info.min) if op == "max" else int(info.max)


def reduce_sample(s, op):
    """The sample strategy of sum, max, min and mean."""

    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        elements = _reduce_elements(s, op, dtype)
        rng = s.generator(draw)
        if rng.random() < 1 / 5:
            # A reduced slice of 4096+ elements: XLA:CPU reduces those on vectorized paths
            # (YNNPACK), where float max/min skip NaN unless the rule guards against it.
            length = int(rng.integers(4096, 4201))
            shape = (length,) if rng.random() < 0.5 else (int(rng.integers(1, 3)), length)
            axis = (None, -1, len(shape) - 1, tuple(range(len(shape))))[rng.integers(0, 4)]
            x = draw(s.long_arrays(dtype, shape, elements))
        else:
            shape = s.random_shape(rng)
            axis = draw(s.axis_choice(len(shape)))
            if op in ("max", "min"):
                # Empty max/min is an error (tested on its own); keep zero-size dims elsewhere.
                reduced = normalize_axes(axis, len(shape))
                shape = tuple(max(d, 1) if i in reduced else d for i, d in enumerate(shape))
            if op in ("max", "min") and dtype != dt.bool_ and rng.random() < 1 / 5:
                # Slices of nothing but the dtype's lowest (max) or highest (min) value: a
                # start value one step inside the range is wrong only there.
                extreme = _range_end(op, dtype)
                elements = s.values(dtype, boundary_rate=1.0, special_rate=0.0, edges=(extreme,))
            x = draw(s.arrays(dtype, shape, elements))
        return s.OpSample((x,), {"axis": axis, "keepdims": draw(s.st.booleans())})

    return sample()


# -- any, all, prod, var, logsumexp ---------------------------------------------------------


def _elements(s, name, dtype, rng):
    if name in ("any", "all"):
        if dtype == dt.bool_ or rng.random() < 1 / 2:
            return None  # the default values: mostly non-zero, specials and boundaries
        return s.values(dtype, -1, 1, grid_bits=0 if dtype in dt.FLOATING else None)  # many zeros
    if name == "prod":
        # Multiples of 1/4 up to 4 (4 significant bits): products stay exact in any order.
        return s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0) if dtype in dt.FLOATING else None
    if name == "var":
        if dtype in dt.FLOATING:  # exact sums (multiples of 1/16), as sum's samples
            return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
        return s.values(dtype, -1000, 1000) if dtype in dt.INTEGER else None
    if rng.random() < 1 / 4:  # logsumexp: slices where no element dominates
        return s.values(dtype, -2.0, 2.0, special_rate=1 / 32)
    return s.values(dtype, special_rate=1 / 16)


def _long(s, draw, rng, name, dtype, elements):
    shape = (int(rng.integers(4096, 4201)),)
    if rng.random() < 1 / 2:
        shape = (int(rng.integers(1, 3)), *shape)
    axis = (None, -1, len(shape) - 1, tuple(range(len(shape))))[rng.integers(0, 4)]
    if name == "prod" and dtype in dt.FLOATING:
        # ±1 but at 1-4 planted values (NaN, inf, 0 among them): exact in any order.
        x = rng.choice(np.array([1.0, -1.0]), shape)
        planted = int(rng.integers(1, 5))
        special = s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0, special_rate=1 / 2)
        x.flat[rng.integers(0, x.size, planted)] = special.draw(rng, planted)
        return x.astype(dtype), axis
    return draw(s.long_arrays(dtype, shape, elements)), axis


def _offset(rng, name, dtype, x):
    """Slices far from 0: var's one-pass formula cancels there, logsumexp's exp overflows."""
    if name == "var" and dtype in (dt.float32, dt.float64):
        offset = float(rng.choice([1e3, -1e3] if dtype == dt.float32 else [1e3, 1e6, -1e9]))
    elif name == "logsumexp":
        magnitudes = (100.0, 1e4) if dtype.itemsize == 2 else (100.0, 1e4, 1e30)
        offset = float(rng.choice([-1.0, 1.0])) * float(rng.choice(magnitudes))
    else:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        return (x.astype(np.float64) + offset).astype(dtype)


def statistics_sample(name):
    """The sample strategy of any, all, prod, var and logsumexp."""

    def strategy(s):
        @s.st.composite
        def sample(draw):
            dtype = draw(s.dtypes(SAMPLE_DTYPES[name]))
            rng = s.generator(draw)
            elements = _elements(s, name, dtype, rng)
            if rng.random() < 1 / 8:
                x, axis = _long(s, draw, rng, name, dtype, elements)
            elif name == "prod" and dtype in (dt.float16, dt.bfloat16) and rng.random() < 1 / 4:
                # 64-128 factors 1 + k/64: rounding each step to the half dtype drifts by
                # several ulp from float32's product rounded once.
                shape = (int(rng.integers(1, 5)), int(rng.integers(64, 129)))
                x = (1 + rng.integers(-16, 17, shape) / 64).astype(dtype)
                axis = (None, -1, 1)[rng.integers(0, 3)]
            else:
                shape = s.random_shape(rng)
                axis = draw(s.axis_choice(len(shape)))
                x = draw(s.arrays(dtype, shape, elements))
                if name == "prod" and dtype in dt.FLOATING and rng.random() < 1 / 4:
                    x = np.where(rng.random(x.shape) < 1 / 4, 0.0, x).astype(dtype)  # zeros: the VJP
                if rng.random() < 1 / 6:
                    x = _offset(rng, name, dtype, x)
            attrs = {"axis": axis, "keepdims": bool(rng.random() < 0.5)}
            if name == "var":
                pick = rng.random()
                attrs["ddof"] = 0 if pick < 1 / 2 else 1 if pick < 3 / 4 else int(rng.integers(2, 7))
            return s.OpSample((x,), attrs)

        return sample()

    return strategy
