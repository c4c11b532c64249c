"""Sample strategies of the unary math ops (unary.py), and sometimes_other_dtypes, which
binary.py and hlotrace/ops/bitwise.py use too; ``s`` is :mod:`hlotrace.testing.strategies`,
passed in by the tests (ops never import hypothesis)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlotrace import dtypes as dt

NON_FLOAT_DTYPES = (dt.bool_, *dt.INTEGER)


def sometimes_other_dtypes(base_sample, others=NON_FLOAT_DTYPES):
    """``base_sample`` (whose primary dtype splits the property tests), with one sample in
    four having an array operand replaced by one of the same shape and a dtype drawn from
    ``others``. For the dtypes whose path through a rule is one convert (or none): they are
    tested within the other dtypes' tests, where a test each would add a minute to a run."""

    def sample(s):
        @s.st.composite
        def draw_sample(draw):
            base = draw(base_sample(s))
            rng = s.generator(draw)
            positions = [i for i, a in enumerate(base.args) if isinstance(a, np.ndarray)]
            if rng.random() >= 1 / 4 or not positions:
                return base
            args = list(base.args)
            i = positions[rng.integers(0, len(positions))]
            args[i] = draw(s.arrays(draw(s.st.sampled_from(others)), args[i].shape))
            return s.OpSample(s.fit_int_scalars(args), base.attrs)

        return draw_sample()

    return sample


def unary_sample(name):
    return lambda s: s.elementwise(1, s.FLOATS, ranges=s.unary_range(name))


# The float16/bfloat16 and float32/float64 thresholds above which exp(x) (for expm1) or
# exp(x)/2 (for sinh, cosh) overflows.
EXP_OVERFLOW = {dt.float16: 11.09, dt.bfloat16: 88.72, dt.float32: 88.72, dt.float64: 709.78}
HALF_EXP_OVERFLOW = {dt.float16: 11.77, dt.bfloat16: 89.41, dt.float32: 89.41, dt.float64: 710.48}


# Where the inverse functions are defined and real: the samples draw most values there, the
# rest (and the specials) anywhere, where the results are NaN (as NumPy's).
INVERSE_RANGES = {
    "asin": (-1.0, 1.0),
    "acos": (-1.0, 1.0),
    "atanh": (-1.0, 1.0),
    "acosh": (1.0, 10.0),
    "asinh": (-10.0, 10.0),
}


def inverse_sample(name, domain):
    """The default samples (every special and boundary value, results NaN outside the
    domain), or values inside ``domain`` with a third of the elements at its ends and one
    step inside them (asin(1), atanh(±1) = ±inf, acosh(1) = 0), or small magnitudes
    1e-6..1e-1 (where asin, asinh and atanh are x to first order and a rule computed as a
    difference of logs loses the low bits)."""

    def sample(s):
        @s.st.composite
        def inside(draw):
            (x,) = draw(s.elementwise(1, s.FLOATS, ranges=lambda dtype: domain)).args
            rng = s.generator(draw)
            wide = x.astype(np.float64)
            eps = float(ml_dtypes.finfo(x.dtype).eps)
            low, high = domain
            ends = np.array([low, high, low + eps * max(1.0, abs(low)), high - eps * max(1.0, abs(high)) / 2])
            wide = np.where(rng.random(x.shape) < 1 / 3, ends[rng.integers(0, len(ends), x.shape)], wide)
            if low < 0 < high and rng.random() < 1 / 3:
                wide = wide * 10.0 ** rng.integers(-6, 0, x.shape)
            return s.OpSample((wide.astype(x.dtype),))

        return s.st.one_of(unary_sample(name)(s), inside())

    return sample


def overflow_edge_sample(name, thresholds):
    """The op's default samples, or float values within about 1 of the overflow threshold
    (either sign; the specials and boundary values too): where one rounding step decides
    between a finite result and inf."""

    def sample(s):
        @s.st.composite
        def edge(draw):
            base = draw(
                s.elementwise(1, s.FLOATS, ranges=lambda dtype: (thresholds[dtype] - 1.5, thresholds[dtype] + 0.5))
            )
            (x,) = base.args
            rng = s.generator(draw)
            flip = rng.random(x.shape) < 0.5
            return s.OpSample((np.where(flip, -x, x).astype(x.dtype),))

        return s.st.one_of(unary_sample(name)(s), edge())

    return sample


def small_values_sample(name):
    """The default samples, or values of magnitude 1e-6..1e-1 where log1p(x) and expm1(x)
    differ most from log(1 + x) and exp(x) - 1 (relative to the result)."""

    def sample(s):
        @s.st.composite
        def small(draw):
            base = draw(s.elementwise(1, s.FLOATS, ranges=lambda dtype: (-1.0, 1.0)))
            (x,) = base.args
            rng = s.generator(draw)
            scale = 10.0 ** rng.integers(-6, 0, x.shape)
            return s.OpSample(((x.astype(np.float64) * scale).astype(x.dtype),))

        return s.st.one_of(unary_sample(name)(s), small())

    return sample


def round_ties(dtype) -> list[float]:
    """Values where rounding rules differ: halves (ties to even), the float just below 0.5
    (floor(x + 0.5) gives 1 there), odd integers at 2**23 + 1 and 2**52 + 1 (x + 0.5 rounds
    up to the next even integer)."""
    below_half = 0.5 - float(ml_dtypes.finfo(dtype).eps) / 4
    values = [0.5, 1.5, 2.5, 3.5, 4.5, -0.5, -1.5, -2.5, below_half, -below_half, 2.0**23 + 1, 2.0**52 + 1]
    return [*values, -(2.0**23 + 1), -(2.0**52 + 1)]


def rounding_sample(s):
    """Float samples with a third of the elements of most arrays replaced by halves and
    near-halves (see round_ties), where round/floor/ceil/sign lowerings differ."""

    @s.st.composite
    def sample(draw):
        (x,) = draw(s.elementwise(1, s.FLOATS)).args
        rng = s.generator(draw)
        if rng.random() < 3 / 4:
            pool = np.asarray(round_ties(x.dtype))
            picked = pool[rng.integers(0, len(pool), x.shape)]
            with np.errstate(over="ignore"):
                x = np.where(rng.random(x.shape) < 1 / 3, picked, x.astype(np.float64)).astype(x.dtype)
        return s.OpSample((x,))

    return sample()


def sign_sample(s):
    """rounding_sample with ±0.0 moved to ±2**-8: sign jumps by 1 on either side of 0, a
    symmetric jump that the gradient check cannot tell from a slope of 1 / h (+0.0 and -0.0
    still reach the property tests as the literal fills of captured constants)."""

    @s.st.composite
    def sample(draw):
        (x,) = draw(rounding_sample(s)).args
        wide = x.astype(np.float64)
        return s.OpSample((np.where(wide == 0, np.copysign(2.0**-8, wide), wide).astype(x.dtype),))

    return sample()
