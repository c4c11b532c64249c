"""Hypothesis profiles: ``ci`` (default, deterministic), ``dev``, ``thorough`` and ``gpu``.

Select with HLOTRACE_HYPOTHESIS_PROFILE=dev|thorough|gpu (see README). Property tests seed
each op from a base seed: 0 under ``ci`` and ``gpu``, random under the others, or
$HLOTRACE_HYPOTHESIS_SEED; the header of every pytest run prints both.

``--one-dtype-per-kind`` (``make test-gpu``) keeps one property-test case per op and dtype
kind: float32 (else the first float admitted), int32 (else int64) and bool.
"""

import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from hlotrace import config
from hlotrace.engines import EAGER_ENV, set_eager_engine
from hlotrace.runtime.cache import CACHE_DIR_ENV
from hlotrace.testing.check import SEED_ENV, base_seed

# The session's persistent compile cache is a private temporary directory, removed at the
# end, not the user's ~/.cache/hlotrace (a fresh clone's `make test` left thousands of
# entries there), unless HLOTRACE_CACHE_DIR was set. Set here, before anything compiles, in
# the environment: pytest-xdist workers and the tests' subprocesses inherit it, and the
# variable below says it is the session's own (tests/test_session_cache.py checks it).
SESSION_CACHE_ENV = "HLOTRACE_TEST_SESSION_CACHE"


def _private_compile_cache() -> str | None:
    if config.is_set(CACHE_DIR_ENV):
        return None  # the user's choice, or the xdist controller's directory
    path = tempfile.mkdtemp(prefix="hlotrace-test-cache-")  # mode 0700, as the cache wants
    os.environ[CACHE_DIR_ENV] = os.environ[SESSION_CACHE_ENV] = path
    return path


_SESSION_CACHE = _private_compile_cache()

# The suite's eager engine: the NumPy references (the oracle most tests compare with, and
# no one-op compile per eager op in every test) unless $HLOTRACE_EAGER is set (`make
# test-device` sets device). In this process only: subprocesses (README blocks, examples,
# the command line) get the default a user gets. TESTING.md says which tests run on which.
if not config.is_set(EAGER_ENV):
    set_eager_engine("numpy")

PROFILE_ENV = "HLOTRACE_HYPOTHESIS_PROFILE"
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ci: no example database, so a run depends on the code and the seed only (the mutation
# harness relies on it: a failure stored while one mutant ran must not replay for another).
settings.register_profile("ci", max_examples=25, database=None, print_blob=False, **_COMMON)
settings.register_profile("dev", max_examples=50, **_COMMON)
settings.register_profile("thorough", max_examples=500, **_COMMON)
# gpu: the whole generated suite on the default platform (CUDA when present) in a few
# minutes: fewer examples, deterministic like ci (with --one-dtype-per-kind, `make test-gpu`).
settings.register_profile("gpu", max_examples=10, database=None, print_blob=False, **_COMMON)


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
PROFILE = config.get(PROFILE_ENV)  # ci unless set; a ConfigError names a profile that does not exist
settings.load_profile(PROFILE)
BASE_SEED = base_seed(PROFILE)


def pytest_report_header(config):
    return f"hlotrace: hypothesis profile {PROFILE} ({PROFILE_ENV}), base seed {BASE_SEED} ({SEED_ENV})"


def pytest_unconfigure(config):
    if _SESSION_CACHE is not None:  # only the process that made it (not the xdist workers)
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def hypothesis_base_seed():
    return BASE_SEED


def pytest_addoption(parser):
    parser.addoption(
        "--one-dtype-per-kind",
        action="store_true",
        help="property tests: one case per op and dtype kind (float32, int32, bool), for make test-gpu",
    )


# The dtype kept per kind by --one-dtype-per-kind, in order of preference.
_PREFERRED = {"f": ("float32", "float64", "float16", "bfloat16"), "i": ("int32", "int64"), "b": ("bool",)}


def _kind(dtype_name: str) -> str:
    return next(kind for kind, names in _PREFERRED.items() if dtype_name in names)


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--one-dtype-per-kind"):
        return
    by_op: dict[str, list[str]] = {}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("dtype") is not None:
            by_op.setdefault(params["name"], []).append(np.dtype(params["dtype"]).name)
    kept = {
        (name, min(names_of_kind, key=_PREFERRED[kind].index))
        for name, names in by_op.items()
        for kind in {_kind(n) for n in names}
        for names_of_kind in [[n for n in names if _kind(n) == kind]]
    }
    selected, deselected = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        dtype = params.get("dtype")
        if dtype is None or (params["name"], np.dtype(dtype).name) in kept:
            selected.append(item)
        else:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
