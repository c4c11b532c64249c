"""PJRT plugins by library path (issue 23, part 4). No third-party plugin is available here,
so these tests cover jaxlib's loading path up to the plugin's entry point: a missing file,
a file that is not a shared library, and a shared library that is not a PJRT plugin each
give one BackendError naming the path."""

from __future__ import annotations

import ctypes.util
import os
import re

import pytest

from hlotrace import runtime
from hlotrace.errors import BackendError


def test_an_unknown_platform_names_the_way_to_add_one(monkeypatch):
    monkeypatch.delenv("HLOTRACE_PJRT_PLUGIN", raising=False)
    with pytest.raises(BackendError, match=r"'cpu', 'cuda', or a PJRT plugin's name.*HLOTRACE_PJRT_PLUGIN"):
        runtime.client("test-no-such-platform")


def test_a_missing_library_is_named():
    with pytest.raises(BackendError, match=r"no such library file: /nonexistent/libx\.so"):
        runtime.register_plugin("test-missing", "/nonexistent/libx.so")


def test_a_built_in_name_is_refused(tmp_path):
    library = tmp_path / "libcpu.so"
    library.write_bytes(b"\0")
    with pytest.raises(BackendError, match="built-in platform name"):
        runtime.register_plugin("cpu", library)


def test_a_file_that_is_not_a_library_is_named(tmp_path, monkeypatch):
    library = tmp_path / "libnotalib.so"
    library.write_text("not a shared library")
    monkeypatch.setenv("HLOTRACE_PJRT_PLUGIN", str(library))
    with pytest.raises(BackendError, match=re.escape(f"PJRT plugin 'test-notalib' from {library} could not be loaded")):
        runtime.client("test-notalib")


def test_a_library_without_a_pjrt_entry_point_is_named():
    path = ctypes.util.find_library("m")
    candidates = [
        p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6") if os.path.isfile(p)
    ]
    if not candidates:
        pytest.skip(f"no libm file found (find_library: {path})")
    runtime.register_plugin("test-libm", candidates[0])
    with pytest.raises(BackendError, match="GetPjrtApi"):
        runtime.client("test-libm")
