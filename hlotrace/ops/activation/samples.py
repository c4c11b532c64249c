"""Sample strategies of the activation family; ``s`` is :mod:`hlotrace.testing.strategies`,
passed in by the tests (ops never import hypothesis)."""

from __future__ import annotations


def _activation_sample(s, attrs=None, ranges=(-40.0, 40.0)):
    """x: every special and boundary value of the dtype, or moderate values where the
    activations bend (and exp/erfc underflow or saturate); ``attrs(rng) -> dict``."""

    @s.st.composite
    def sample(draw):
        full = s.elementwise(1, s.FLOATS)
        moderate = s.elementwise(1, s.FLOATS, ranges=lambda dtype: ranges)
        (x,) = draw(s.st.one_of(full, moderate)).args
        rng = s.generator(draw)
        return s.OpSample((x,), attrs(rng) if attrs is not None else {})

    return sample()


def _pick(rng, choices, general=None):
    """One of ``choices``, or (one time in three when given) ``general(rng)``."""
    if general is not None and rng.random() < 1 / 3:
        return float(general(rng))
    return choices[int(rng.integers(0, len(choices)))]


def _away_from_one(draw):
    """A slope drawn by ``draw(rng)`` but not within 0.1 of 1: the gradient's kink at 0 (1
    on one side, the slope on the other) must be large enough for the finite-difference
    check to see it and skip the point."""

    def pick(rng):
        value = draw(rng)
        return value if abs(value - 1.0) >= 0.1 else value + 0.2

    return pick
