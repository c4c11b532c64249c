"""Hypothesis profiles: ``ci`` (default, deterministic), ``dev`` and ``thorough``.

Select with HLOTRACE_HYPOTHESIS_PROFILE=dev|thorough (see README).
"""

import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

settings.register_profile("ci", max_examples=50, derandomize=True, print_blob=True, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HLOTRACE_HYPOTHESIS_PROFILE", "ci"))
