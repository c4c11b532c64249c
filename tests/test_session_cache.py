"""The test session keeps its compiled executables out of the user's compile cache
(tests/conftest.py gives it a private temporary directory unless HLOTRACE_CACHE_DIR is set)."""

import os
import stat
from pathlib import Path

import pytest

from hlotrace.runtime import cache

SESSION_CACHE_ENV = "HLOTRACE_TEST_SESSION_CACHE"  # tests/conftest.py's


def test_the_session_compile_cache_is_a_private_directory_not_the_users(monkeypatch):
    chosen = os.environ.get(cache.CACHE_DIR_ENV, "").strip()
    private = os.environ.get(SESSION_CACHE_ENV)
    if chosen and private is None:
        pytest.skip(f"{cache.CACHE_DIR_ENV}={chosen} was set for this run: the user's choice")
    in_effect = cache.directory()
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    users = cache.directory()  # where hlotrace puts it by default: ~/.cache/hlotrace
    monkeypatch.undo()
    assert in_effect is not None and private is not None and in_effect == Path(private)
    assert not in_effect.is_relative_to(users) and not users.is_relative_to(in_effect)
    assert in_effect.is_dir() and stat.S_IMODE(in_effect.stat().st_mode) == 0o700
