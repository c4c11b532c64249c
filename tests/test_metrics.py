"""Counters (hlotrace.metrics): count/reset/report, and what the runtime and Tensor count."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import hlotrace as ht
from hlotrace.jit import xla_trace
from hlotrace.metrics import NAMES, count, reset_metrics
from hlotrace.runtime import compiler


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())
    reset_metrics()
    yield
    reset_metrics()


def test_count_reset_and_snapshot():
    assert set(NAMES) <= set(ht.metrics()) and all(v == 0 for v in ht.metrics().values())
    count("recordings")
    count("recordings", 2)
    count("compile_seconds", 0.25)
    count("my_counter", 5)  # a name nobody declared starts at 0
    snapshot = ht.metrics()
    assert snapshot["recordings"] == 3 and snapshot["compile_seconds"] == 0.25 and snapshot["my_counter"] == 5
    snapshot["recordings"] = 100  # a copy
    assert ht.metrics()["recordings"] == 3
    ht.reset_metrics()
    assert "my_counter" not in ht.metrics() and ht.metrics()["recordings"] == 0


def test_the_documented_names():
    for name in ("recordings", "compiles", "compile_seconds", "memory_cache_hits", "memory_cache_misses"):
        assert name in NAMES
    for name in ("disk_cache_hits", "disk_cache_misses", "executions", "host_to_device_bytes", "device_to_host_bytes"):
        assert name in NAMES


def test_a_compiled_function_is_counted():
    @xla_trace
    def f(x):
        return x * 2.0 + 1.0

    x = ht.tensor(np.ones((3, 5), "float32"))
    f(x)  # records and compiles (runs eagerly)
    counts = ht.metrics()
    assert counts["compiles"] == 1 and counts["compile_seconds"] > 0
    assert counts["memory_cache_misses"] == 1 and counts["disk_cache_misses"] == 1
    assert counts["executions"] == 0
    out = f(x)
    out2 = f(x)
    counts = ht.metrics()
    assert counts["executions"] == 2
    assert counts["host_to_device_bytes"] == x.numpy().nbytes  # x stays on the device after its first copy
    assert counts["device_to_host_bytes"] == 0
    out.numpy()
    out.numpy()  # copied once
    assert ht.metrics()["device_to_host_bytes"] == 3 * 5 * 4
    out2.numpy()
    assert ht.metrics()["device_to_host_bytes"] == 2 * 3 * 5 * 4


def test_eager_tensors_move_nothing():
    x = ht.tensor(np.ones(8, "float32"))
    (x * 3).numpy()
    counts = ht.metrics()
    assert counts["device_to_host_bytes"] == counts["host_to_device_bytes"] == counts["executions"] == 0


def test_memory_and_disk_cache_hits():
    def body(x):
        return x - 4.0

    x = ht.tensor(np.ones(4, "float32"))
    xla_trace(body)(x)
    xla_trace(body)(x)  # the same module: runtime.compile's in-process cache
    counts = ht.metrics()
    assert (counts["memory_cache_hits"], counts["memory_cache_misses"], counts["compiles"]) == (1, 1, 1)
    compiler.EXECUTABLES.clear()  # as in a new process: the disk cache has it
    xla_trace(body)(x)
    counts = ht.metrics()
    assert (counts["disk_cache_hits"], counts["compiles"], counts["memory_cache_misses"]) == (1, 1, 2)
    assert counts["disk_cache_load_seconds"] > 0


def test_the_report_is_a_short_table():
    @xla_trace
    def f(x):
        return x.sum()

    x = ht.tensor(np.ones(4, "float32"))
    f(x)
    f(x).numpy()
    count("my_counter", 2)
    report = ht.metrics_report()
    lines = report.splitlines()
    assert lines[0] == "hlotrace metrics (this process)" and len(lines) <= 12
    text = "\n".join(line.split() and " ".join(line.split()) for line in lines)
    assert "compiles 1 (" in text and "executions 1" in text and "disk cache hits / misses 0 / 1" in text
    assert "host -> device 16 B" in text and "device -> host 4 B" in text and "my_counter 2" in text


def test_the_mlp_demo_prints_the_report(capsys):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_mlp.py")
    spec = importlib.util.spec_from_file_location("example_train_mlp_metrics", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(["--epochs", "1"])
    out = capsys.readouterr().out
    report = out[out.index("hlotrace metrics (this process)") :]
    assert "compiles" in report and "executions" in report and "disk cache hits / misses" in report
    assert ht.metrics()["executions"] > 200  # the epoch's steps and the timed ones
