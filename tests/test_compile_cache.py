"""The persistent compile cache (hlotrace.runtime.cache): hits across processes, bad entries,
keys, concurrent writers, the off switch, unwritable directories, eviction, the CLI."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import hlotrace
from hlotrace import metrics as metrics_of_this_process
from hlotrace import runtime
from hlotrace.errors import ConfigError
from hlotrace.metrics import reset_metrics
from hlotrace.ops.registry import Aval
from hlotrace.runtime import cache, compiler
from hlotrace.runtime.cache import CacheWarning
from hlotrace.tools.cli import main as cli_main

F32 = [Aval((4,), np.dtype(np.float32))]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module(k: float) -> str:
    """A one-add module; distinct ``k`` give distinct modules (and cache entries)."""
    return (
        "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        f"  %c = stablehlo.constant dense<{k!r}> : tensor<4xf32>\n"
        "  %0 = stablehlo.add %a, %c : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}"
    )


def run_module(exe) -> list[float]:
    return np.asarray(exe.run([exe.to_device(0, np.arange(4, dtype=np.float32))])[0]).tolist()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh cache directory, read from the environment; an empty in-process cache."""
    path = tmp_path / "cache"
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", str(path))
    monkeypatch.delenv("HLOTRACE_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())
    reset_metrics()
    return path


def forget_in_process(monkeypatch):
    """Drop the in-process executables, as a new process would start."""
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())


def entry_files(path):
    return sorted(p for p in path.iterdir() if p.name.endswith(cache.SUFFIX))


# -- a second process ------------------------------------------------------------------------

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import hlotrace as ht
    import hlotrace.functional as F
    from hlotrace import nn, optim
    from hlotrace.autodiff import GradManager
    from hlotrace.jit import xla_trace

    @xla_trace
    def affine(x):
        return (x * 2.0 + 1.0).sum(axis=0)

    x = ht.tensor(np.arange(12, dtype="float32").reshape(3, 4))
    affine(x)
    out = affine(x).numpy().tolist()

    def train_step(data, label, *, net, opt, gm):
        with gm:
            loss = F.cross_entropy(net(data), label)
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    nn.init.seed(0)
    net = nn.Linear(4, 3)
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    gm = GradManager().attach(net.parameters())
    step = xla_trace(train_step)
    rng = np.random.default_rng(0)
    data, label = rng.standard_normal((8, 4)).astype("float32"), rng.integers(0, 3, 8)
    losses = [float(step(ht.tensor(data), ht.tensor(label), net=net, opt=opt, gm=gm)) for _ in range(4)]
    json.dump({"out": out, "losses": losses, "weight": net.weight.numpy().tolist(), "metrics": ht.metrics()}, sys.stdout)
    """
)


def run_script(cache_path, script=_SCRIPT, *args, engine="numpy") -> dict:
    # The NumPy eager engine by default here: the counts below are the programs' (the device
    # engine's one-op executables go to the same caches: the last test of this group).
    env = {**os.environ, "HLOTRACE_CACHE_DIR": str(cache_path), "HLOTRACE_PLATFORM": "cpu", "HLOTRACE_EAGER": engine}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_what_the_first_compiled(cache_dir):
    first = run_script(cache_dir)
    second = run_script(cache_dir)
    assert first["metrics"]["compiles"] >= 2 and first["metrics"]["disk_cache_hits"] == 0
    assert first["metrics"]["disk_cache_misses"] == first["metrics"]["compiles"]
    # The second process compiles nothing: every executable comes from the disk.
    assert second["metrics"]["compiles"] == 0
    assert second["metrics"]["disk_cache_hits"] == first["metrics"]["compiles"]
    assert second["metrics"]["disk_cache_misses"] == 0
    assert second["out"] == first["out"] == [27.0, 33.0, 39.0, 45.0]
    # A training step loaded from the disk updates its state in place (donation kept) exactly
    # as the compiled one did.
    assert second["losses"] == first["losses"] and len(set(first["losses"])) == 4
    assert second["weight"] == first["weight"]
    assert len(entry_files(cache_dir)) == first["metrics"]["compiles"]
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]


def test_under_the_device_engine_a_second_process_compiles_nothing_either(cache_dir):
    first = run_script(cache_dir, engine="device")
    second = run_script(cache_dir, engine="device")
    assert first["metrics"]["compiles"] >= 2 and first["metrics"]["eager_compile_seconds"] > 0
    # The programs come from the disk, and so do the eager first calls' one-op executables
    # (their optimized versions only when the first process lived to finish compiling them
    # in the background: the second may compile those again, counted as eager).
    assert second["metrics"]["compiles"] == 0
    assert second["metrics"]["disk_cache_hits"] >= first["metrics"]["compiles"] + first["metrics"]["eager_compiles"]
    assert second["out"] == first["out"] == [27.0, 33.0, 39.0, 45.0]
    assert second["losses"] == first["losses"] and second["weight"] == first["weight"]


def test_hits_touch_the_entry_and_are_counted(cache_dir, monkeypatch):
    first = runtime.compile(module(1.0), F32, F32)
    assert not first.from_disk_cache
    (entry,) = entry_files(cache_dir)
    os.utime(entry, (1_000_000, 1_000_000))
    forget_in_process(monkeypatch)
    again = runtime.compile(module(1.0), F32, F32)
    assert again.from_disk_cache and again is not first
    assert run_module(again) == [1.0, 2.0, 3.0, 4.0]
    assert entry.stat().st_mtime > 1_000_000
    counts = metrics_of_this_process()
    assert (counts["compiles"], counts["disk_cache_misses"], counts["disk_cache_hits"]) == (1, 1, 1)
    assert cache.persisted_counts(cache_dir) == {"hits": 1, "misses": 1, "errors": 0}


# -- bad entries ----------------------------------------------------------------------------


def _truncate(blob: bytes) -> bytes:
    return blob[: len(blob) // 2]


def _garbage(blob: bytes) -> bytes:
    return os.urandom(len(blob))


def _payload_xla_refuses(blob: bytes) -> bytes:
    """A well-formed entry (right key, length and checksum) whose executable is garbage."""
    magic, rest = blob[: len(cache._MAGIC)], blob[len(cache._MAGIC) :]
    header = json.loads(rest[: rest.index(b"\n")])
    payload = b"\x00not an executable" * 40
    header.update(payload_bytes=len(payload), payload_sha256=hashlib.sha256(payload).hexdigest())
    return magic + json.dumps(header).encode() + b"\n" + payload


@pytest.mark.parametrize("damage", [_truncate, _garbage, _payload_xla_refuses, lambda blob: b""])
def test_a_bad_entry_is_recompiled_with_one_warning(cache_dir, monkeypatch, damage):
    runtime.compile(module(2.0), F32, F32)
    (entry,) = entry_files(cache_dir)
    entry.write_bytes(damage(entry.read_bytes()))
    forget_in_process(monkeypatch)
    with pytest.warns(CacheWarning, match="rejected") as caught:
        exe = runtime.compile(module(2.0), F32, F32)
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert not exe.from_disk_cache and run_module(exe) == [2.0, 3.0, 4.0, 5.0]
    assert metrics_of_this_process()["compiles"] == 2 and metrics_of_this_process()["disk_cache_errors"] == 1
    # The entry was written again, whole: the next process (here: the next lookup) loads it.
    forget_in_process(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert runtime.compile(module(2.0), F32, F32).from_disk_cache


# -- keys ----------------------------------------------------------------------------------


def test_another_hlotrace_version_misses(cache_dir, monkeypatch):
    runtime.compile(module(3.0), F32, F32)
    forget_in_process(monkeypatch)
    monkeypatch.setattr(hlotrace, "__version__", "0.0.0-another")
    exe = runtime.compile(module(3.0), F32, F32)
    assert not exe.from_disk_cache and run_module(exe) == [3.0, 4.0, 5.0, 6.0]
    assert len(entry_files(cache_dir)) == 2
    assert metrics_of_this_process()["disk_cache_misses"] == 2


def test_another_device_kind_misses(cache_dir, monkeypatch):
    from hlotrace.runtime import jaxlib_compat

    runtime.compile(module(4.0), F32, F32)
    forget_in_process(monkeypatch)
    monkeypatch.setattr(jaxlib_compat, "device_kind", lambda device: "another accelerator")
    assert not runtime.compile(module(4.0), F32, F32).from_disk_cache
    assert len(entry_files(cache_dir)) == 2


def test_the_key_covers_what_changes_the_executable(cache_dir, monkeypatch):
    pjrt, device = runtime.client(), runtime.default_device()

    def key(text=None, avals=F32, disabled=()):
        text = module(5.0) if text is None else text
        return cache.entry_key(runtime.disk_cache_key(pjrt, text, avals, avals, device, disabled))

    base = key()
    assert key() == base
    assert key(text=module(5.5)) != base
    assert key(avals=[Aval((4,), np.dtype(np.float64))]) != base
    assert key(disabled=("cse_barrier_expander",)) != base
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert key() != base
    fields = runtime.disk_cache_key(pjrt, module(5.0), F32, F32, device)
    assert fields["device_kind"] and fields["platform"] == runtime.platform_name()
    assert set(fields["versions"]) == {"jax", "jaxlib", "hlotrace"}


# -- many processes, one directory ----------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import collections, json, sys, time
    import numpy as np
    from hlotrace import runtime
    from hlotrace.ops.registry import Aval

    worker, start = int(sys.argv[1]), float(sys.argv[2])
    aval = [Aval((4,), np.dtype(np.float32))]

    def module(k):
        return (
            "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\\n"
            f"  %c = stablehlo.constant dense<{k!r}> : tensor<4xf32>\\n"
            "  %0 = stablehlo.add %a, %c : tensor<4xf32>\\n  return %0 : tensor<4xf32>\\n}"
        )

    runtime.client()
    while time.time() < start:
        time.sleep(0.005)
    results = {}
    for round in range(6):
        runtime.compiler.EXECUTABLES.clear()  # every round looks on the disk again
        for k in (100.0, 200.0 + worker, 300.0 + round):
            exe = runtime.compile(module(k), aval, aval)
            out = np.asarray(exe.run([exe.to_device(0, np.zeros(4, np.float32))])[0]).tolist()
            results[f"{round}-{k}"] = out == [k] * 4
    print(json.dumps({"ok": all(results.values()), "n": len(results)}))
    """
)


def test_concurrent_writers_share_one_directory(cache_dir):
    env = {**os.environ, "HLOTRACE_CACHE_DIR": str(cache_dir), "HLOTRACE_PLATFORM": "cpu"}
    start = time.time() + 4.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(w), str(start)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"ok": True, "n": 18}
        assert "rejected" not in err
    names = [p.name for p in cache_dir.iterdir()]
    assert not [n for n in names if n.startswith(".tmp-")], names  # no partial files left
    files = entry_files(cache_dir)
    assert len(files) == 1 + 3 + 6  # the shared module, one per worker, one per round
    for path in files:  # every entry is whole
        blob = path.read_bytes()
        header = json.loads(blob[len(cache._MAGIC) :].split(b"\n", 1)[0])
        assert cache._parse(blob, header["key"])[1] is None
    counts = cache.persisted_counts(cache_dir)
    assert counts["hits"] + counts["misses"] == 3 * 18 and counts["errors"] == 0


# -- switching it off, directories that cannot be used, the size cap -------------------------


def test_off_disables_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    forget_in_process(monkeypatch)
    reset_metrics()
    assert cache.directory() is None
    exe = runtime.compile(module(6.0), F32, F32)
    forget_in_process(monkeypatch)
    again = runtime.compile(module(6.0), F32, F32)
    assert run_module(again) == [6.0, 7.0, 8.0, 9.0] and not exe.from_disk_cache and not again.from_disk_cache
    counts = metrics_of_this_process()
    assert counts["compiles"] == 2 and counts["disk_cache_hits"] == counts["disk_cache_misses"] == 0
    assert not list(tmp_path.rglob("*"))


def test_set_directory_overrides_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", str(tmp_path / "from-env"))
    try:
        cache.set_directory(tmp_path / "chosen")
        assert cache.directory() == tmp_path / "chosen"
        cache.set_directory("off")
        assert cache.directory() is None
    finally:
        cache.set_directory(None)
    assert cache.directory() == tmp_path / "from-env"
    monkeypatch.delenv("HLOTRACE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "hlotrace"


def test_an_unusable_directory_warns_once_and_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", str(blocker / "cache"))  # unwritable even for root
    forget_in_process(monkeypatch)
    reset_metrics()
    with pytest.warns(CacheWarning, match="running without the persistent cache") as caught:
        results = [run_module(runtime.compile(module(k), F32, F32)) for k in (7.0, 8.0, 9.0)]
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert results == [[k + i for i in range(4)] for k in (7.0, 8.0, 9.0)]
    assert metrics_of_this_process()["compiles"] == 3


def test_a_full_cache_is_not_rescanned_at_every_write(cache_dir, monkeypatch):
    """A cache at its cap was scanned (every entry stat'ed: seconds for 100,000 entries) at
    every write; eviction now goes down to LOW_WATER of the cap, so the writes after it
    only update the size estimate until that room is used up."""
    runtime.compile(module(20.0), F32, F32)
    (first,) = entry_files(cache_dir)
    size = first.stat().st_size
    monkeypatch.setenv("HLOTRACE_CACHE_MAX_BYTES", str(int(size * 20.5)))
    monkeypatch.setattr(cache, "LOW_WATER", 0.5)  # room for 10 entries after each eviction
    scans = []
    real_entries = cache.entries
    monkeypatch.setattr(cache, "entries", lambda root=None: scans.append(1) or real_entries(root))
    for k in range(21, 50):  # 29 more entries: over the cap once, then under it
        runtime.compile(module(float(k)), F32, F32)
    left = entry_files(cache_dir)
    assert sum(p.stat().st_size for p in left) <= size * 20.5
    assert len(left) < 20
    # The first write's scan and an eviction at about the 21st, 31st and 41st entry (every
    # write from the 21st on scanned before: 10 scans).
    assert len(scans) <= 4


def test_least_recently_used_entries_go_over_the_cap(cache_dir, monkeypatch):
    runtime.compile(module(10.0), F32, F32)
    (a,) = entry_files(cache_dir)
    size = a.stat().st_size
    monkeypatch.setenv("HLOTRACE_CACHE_MAX_BYTES", str(int(size * 2.5)))  # room for two entries
    time.sleep(0.05)
    runtime.compile(module(11.0), F32, F32)
    (b,) = set(entry_files(cache_dir)) - {a}
    time.sleep(0.05)
    forget_in_process(monkeypatch)
    assert runtime.compile(module(10.0), F32, F32).from_disk_cache  # a used again: b is older now
    time.sleep(0.05)
    runtime.compile(module(12.0), F32, F32)
    left = entry_files(cache_dir)
    assert len(left) == 2 and a in left and b not in left
    assert sum(p.stat().st_size for p in left) <= size * 2.5


def test_max_bytes_reads_units(monkeypatch):
    for text, value in (("123", 123), ("500MB", 500 * 10**6), ("2GiB", 2 << 30), ("1.5k", 1536), ("", 1 << 30)):
        monkeypatch.setenv("HLOTRACE_CACHE_MAX_BYTES", text)
        assert cache.max_bytes() == value
    monkeypatch.setenv("HLOTRACE_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ConfigError, match="HLOTRACE_CACHE_MAX_BYTES='lots': expected a positive size"):
        cache.max_bytes()  # read through hlotrace.config: refused, not a warning and 1 GiB as before


# -- the command line ------------------------------------------------------------------------


def test_cache_command_shows_and_clears(cache_dir, monkeypatch, capsys):
    runtime.compile(module(13.0), F32, F32)
    forget_in_process(monkeypatch)
    runtime.compile(module(13.0), F32, F32)
    assert cli_main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {cache_dir}" in out
    assert "entries:   1" in out and "hits:      1" in out and "misses:    1 (50% hits)" in out
    assert "every process since the last clear" in out
    assert cli_main(["cache", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries"] == 1 and report["bytes"] > 0 and report["max_bytes"] == cache.DEFAULT_MAX_BYTES
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert entry_files(cache_dir) == [] and not (cache_dir / cache.STATS_FILE).exists()
    assert cli_main(["cache"]) == 0
    assert "entries:   0" in capsys.readouterr().out
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", "off")
    assert cli_main(["cache"]) == 0 and "off" in capsys.readouterr().out
    assert cli_main(["cache", "clear"]) == 0
    assert cli_main(["cache", "bogus"]) == 2
