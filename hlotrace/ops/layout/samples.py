"""The layout family's sample strategies (``s`` is hlotrace.testing.strategies, passed in);
each returns a strategy of OpSample. Operands are distinct values (a misplaced element shows)
of every dtype, at most ~128 elements before padding or tiling.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.layout.base import PAD_MODES


def flip_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        x = draw(s.distinct_arrays(dtype, s.random_shape(rng)))
        # None, one axis or a tuple of distinct ones in any order, each possibly negative.
        axes = [int(a) - x.ndim * int(rng.integers(0, 2)) for a in rng.permutation(x.ndim)]
        pick = rng.random()
        if pick < 0.2 or not axes:
            return s.OpSample((x,), {} if pick < 0.1 else {"axis": None if axes or pick < 0.05 else ()})
        if pick < 0.5:
            return s.OpSample((x,), {"axis": axes[0]})
        return s.OpSample((x,), {"axis": tuple(axes[: int(rng.integers(0, len(axes) + 1))])})

    return sample()


def roll_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        x = draw(s.distinct_arrays(dtype, s.random_shape(rng)))

        def shift(n):  # beyond the size and negative too
            return int(rng.integers(-2 * n - 3, 2 * n + 4))

        pick = rng.random()
        if x.ndim == 0 or pick < 1 / 4:
            amount = shift(x.size) if rng.random() < 3 / 4 else tuple(shift(x.size) for _ in range(2))
            return s.OpSample((x,), {"shift": amount})  # axis None: the flattened tensor
        axes = [int(a) for a in rng.integers(-x.ndim, x.ndim, int(rng.integers(1, 4)))]  # repeats add up
        if pick < 1 / 2:
            return s.OpSample((x,), {"shift": shift(x.shape[axes[0]]), "axis": axes[0]})
        if pick < 2 / 3:  # one shift for every axis
            return s.OpSample((x,), {"shift": shift(min(x.shape)), "axis": tuple(axes)})
        return s.OpSample((x,), {"shift": tuple(shift(x.shape[a]) for a in axes), "axis": tuple(axes)})

    return sample()


def pad_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        mode = PAD_MODES[int(rng.choice([0, 0, 1, 2]))]
        x = draw(s.distinct_arrays(dtype, s.random_shape(rng, 3)))

        def width(d):  # 0..3, and for reflect sometimes past the size (it reflects again)
            if mode != "constant" and d == 0:
                return 0
            return int(rng.integers(0, 4)) if rng.random() < 0.8 else int(rng.integers(0, 2 * d + 3))

        widths = [(width(d), width(d)) for d in x.shape]
        uniform = bool(widths) and (mode == "constant" or 0 not in x.shape)  # one width fits every axis
        form = rng.random()
        if form < 0.1 and uniform:
            pad_width = widths[0][0]  # one int for every side
        elif form < 0.2 and uniform:
            pad_width = widths[0]  # one (before, after) for every axis
        elif form < 0.25 and uniform:
            pad_width = (widths[0],)
        else:
            pad_width = tuple(widths)
        attrs = {"pad_width": pad_width}
        if mode != "constant" or rng.random() < 0.8:
            attrs["mode"] = mode
        if mode == "constant" and rng.random() < 0.8:
            kind = dtype if rng.random() < 0.8 or dtype in dt.INTEGER else dt.int32
            attrs["value"] = s.values(kind).scalar(rng)  # boundary values, literals
            if dtype in dt.FLOATING and rng.random() < 0.4:
                attrs["value"] = float(rng.choice([np.nan, -0.0, np.inf, -np.inf]))
        return s.OpSample((x,), attrs)

    return sample()


def small_operand(s, draw, rng, max_dims=3):
    dtype = draw(s.dtypes(s.ALL))
    return draw(s.distinct_arrays(dtype, s.random_shape(rng, max_dims)))


def tile_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        x = small_operand(s, draw, rng)
        while True:  # 0..4 reps (shorter or longer than the rank), 0..3 each
            reps = tuple(int(r) for r in rng.choice([0, 1, 1, 2, 2, 3], int(rng.integers(0, 5))))
            if x.size * math.prod(reps) <= 256:
                break
        return s.OpSample((x,), {"reps": reps[0] if len(reps) == 1 and rng.random() < 0.5 else reps})

    return sample()


def repeat_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        x = small_operand(s, draw, rng)
        axis = None if x.ndim == 0 or rng.random() < 0.3 else int(rng.integers(-x.ndim, x.ndim))
        if x.ndim == 0 and rng.random() < 0.3:
            axis = int(rng.choice([0, -1]))
        n = x.size if axis is None or x.ndim == 0 else x.shape[axis]
        pick = rng.random()
        if pick < 0.5 or n > 24:
            repeats = int(rng.integers(0, 4))
        elif pick < 0.6:
            repeats = [int(rng.integers(0, 4))]
        else:  # one count per element, with runs of equal counts
            repeats = [int(c) for c in rng.choice([0, 1, 2, 3], n)] if rng.random() < 0.5 else [2] * n
            if n and rng.random() < 0.5:
                repeats[int(rng.integers(0, n))] = int(rng.integers(0, 4))
            repeats = tuple(repeats) if rng.random() < 0.5 else repeats
        return s.OpSample((x,), {"repeats": repeats, "axis": axis})

    return sample()


def triangle_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, rng = draw(s.dtypes(s.ALL)), s.generator(draw)
        shape = s.random_shape(rng)
        while len(shape) < 2:
            shape = s.random_shape(rng)
        x = draw(s.distinct_arrays(dtype, shape))
        rows, cols = shape[-2:]
        k = int(rng.integers(-rows - 1, cols + 2)) if rng.random() < 0.9 else int(rng.choice([-(10**12), 10**12]))
        return s.OpSample((x,), {} if rng.random() < 0.1 else {"k": k})

    return sample()
