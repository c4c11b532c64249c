"""Hypothesis profiles: ``ci`` (default, deterministic), ``dev`` and ``thorough``.

Select with HLOTRACE_HYPOTHESIS_PROFILE=dev|thorough (see README). Property tests seed
each op from a base seed: 0 under ``ci``, random under the others, or
$HLOTRACE_HYPOTHESIS_SEED; the header of every pytest run prints both.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

from hlotrace.testing.check import SEED_ENV, base_seed

PROFILE_ENV = "HLOTRACE_HYPOTHESIS_PROFILE"
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ci: no example database, so a run depends on the code and the seed only (the mutation
# harness relies on it: a failure stored while one mutant ran must not replay for another).
settings.register_profile("ci", max_examples=25, database=None, print_blob=False, **_COMMON)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)


def _ignore_literals_of_local_modules() -> None:
    """Hypothesis (6.1xx) now and then draws a literal found in any non-library module that
    is loaded (hlotrace's own constants, these tests'), so adding a constant anywhere would
    change every seeded example stream. Keep examples a function of the seed and the
    strategies only. Private API: skipped silently where hypothesis has no such pool."""
    try:
        from hypothesis.internal.conjecture import providers

        empty = providers.Constants()
        providers._get_local_constants = lambda: empty
    except (ImportError, AttributeError, TypeError):
        pass


_ignore_literals_of_local_modules()
PROFILE = os.environ.get(PROFILE_ENV, "ci")
settings.load_profile(PROFILE)
BASE_SEED = base_seed(PROFILE)


def pytest_report_header(config):
    return f"hlotrace: hypothesis profile {PROFILE} ({PROFILE_ENV}), base seed {BASE_SEED} ({SEED_ENV})"


@pytest.fixture
def hypothesis_base_seed():
    return BASE_SEED
