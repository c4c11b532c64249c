"""One example from a hypothesis strategy, outside any ``@given`` test, decided by a seed.

The op registry's sample strategies are hypothesis strategies; the fuzzer draws from them
directly so that a program is a pure function of its seed. Hypothesis has no public API for
this (``strategy.example()`` is for interactive use: slow, and not seedable), so this module
is the one place that uses its internals (``ConjectureData`` and ``BuildContext``,
hypothesis 6.x); if they move, only this file changes.
"""

from __future__ import annotations

import random

from hypothesis.control import BuildContext
from hypothesis.errors import HypothesisException, StopTest, UnsatisfiedAssumption
from hypothesis.internal.conjecture.data import ConjectureData


class Rejected(Exception):
    """The strategy rejected this seed's choices (a filter or assume() failed)."""


def draw(strategy, seed: int):
    """The example ``strategy`` produces from the choices seeded by ``seed``."""
    data = ConjectureData(random=random.Random(seed))
    try:
        with BuildContext(data, wrapped_test=None):
            return data.draw(strategy)
    except (StopTest, UnsatisfiedAssumption) as exc:
        raise Rejected(str(exc)) from None
    except HypothesisException as exc:  # e.g. a filter that gave up
        if type(exc).__name__ in ("Unsatisfiable", "Frozen"):
            raise Rejected(str(exc)) from None
        raise
