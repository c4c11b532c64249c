"""The persistent compile cache: serialized PJRT executables on disk, shared by processes.

On by default in ``$XDG_CACHE_HOME/hlotrace`` (``~/.cache/hlotrace``);
``HLOTRACE_CACHE_DIR=DIR`` moves it and ``HLOTRACE_CACHE_DIR=off`` turns it off. Both are
read at every lookup (so are ``set_directory()``'s choice and the size cap), so tests and
tools can change them at any time. Every executable is stored, however fast it compiled.

**Key.** One entry per SHA-256 of :func:`key_fields`: the module text's fingerprint, the
argument and result avals, the platform, its version, the device kind (an executable
compiled for one GPU model is not loaded on another) and the number of devices, on the CPU
the host's CPU model and feature flags (XLA:CPU compiles for the host it runs on), the jax,
jaxlib and hlotrace versions, ``$XLA_FLAGS``, and the compile options (serialized, which
includes disabled XLA passes). The fields are also stored in the entry and compared on
load.

**Entries.** ``<key>.hlox``: a magic line, a JSON header (the key fields, the payload's
length and SHA-256) and the payload (``exe.serialize()``). Written to a temporary file in
the same directory and renamed over the entry (``os.replace``), so a reader sees a whole
entry or none, and concurrent processes (pytest-xdist workers) may write the same entry.
An entry whose bytes do not match its header (truncated, overwritten) is never handed to
XLA; it and an entry XLA refuses to load are deleted, recompiled and rewritten, with one
``CacheWarning``.

A directory that cannot be read or written (not a directory, no permission) is left alone
for the rest of the process after one ``CacheWarning``.

**Size.** At most ``HLOTRACE_CACHE_MAX_BYTES`` (default 1 GiB; ``500MB``, ``2GiB`` accepted):
a hit touches the entry's mtime, and when a write takes the directory over the cap the
entries with the oldest mtimes are deleted (least recently used first).

**Counts.** Hits, misses and rejected entries are also added to ``stats.json`` in the
directory (under an ``fcntl`` lock), so ``hlotrace cache`` reports them for every process
that used the directory since it was last cleared; ``hlotrace.metrics()`` has this
process's.

**Trust.** Loading an entry runs the machine code in it: whoever can write to the cache
directory can run code in every process that uses it. Keep it private (it is created
0700), and point ``HLOTRACE_CACHE_DIR`` only at directories you trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import hlotrace
from hlotrace import config
from hlotrace.metrics import count

CACHE_DIR_ENV = "HLOTRACE_CACHE_DIR"
MAX_BYTES_ENV = "HLOTRACE_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
FORMAT = 1
SUFFIX = ".hlox"
STATS_FILE = "stats.json"
_STATS_BYTES = 256
_MAGIC = b"hlotrace compiled executable\n"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 3600
# A scan stats every entry (2.4 s for 118,000 entries here), so it must be rare: a process
# rescans after this many of its own writes (other processes write too), and eviction goes
# down to LOW_WATER of the cap, so that a cache at its cap is not rescanned at every write
# (seed sweep, 2026-11-26: every compile of a full cache rescanned it, ~10x slower tests).
_RESCAN_EVERY = 1024
LOW_WATER = 0.9


class CacheWarning(UserWarning):
    """A cache entry was rejected, or the cache directory cannot be used."""


_override: str | None = None
_warned: set[str] = set()
_unusable: set[str] = set()
_size_estimates: dict[str, list] = {}  # dir -> [estimated bytes, writes since the last scan]


def set_directory(path: str | os.PathLike | None) -> None:
    """Use ``path`` as the cache directory (``"off"``: no cache); ``None`` goes back to
    ``$HLOTRACE_CACHE_DIR`` / the default."""
    global _override
    _override = None if path is None else os.fspath(path)


def directory() -> Path | None:
    """The cache directory now in effect, or None when the cache is off."""
    value = (_override if _override is not None else config.get(CACHE_DIR_ENV) or "").strip()
    if value.lower() == "off":
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hlotrace"


def enabled() -> bool:
    """Whether lookups go to the disk now: the cache is on and its directory not given up."""
    root = directory()
    return root is not None and str(root) not in _unusable


def max_bytes() -> int:
    """The size cap: ``$HLOTRACE_CACHE_MAX_BYTES`` (bytes, or with a unit), default 1 GiB."""
    return config.get(MAX_BYTES_ENV)  # a ConfigError naming the variable when it is no positive size


def warn_once(tag: str, message: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(f"hlotrace compile cache: {message}", CacheWarning, stacklevel=2)


def entry_key(fields: dict) -> str:
    return hashlib.sha256(_canonical(fields)).hexdigest()


def _canonical(fields: dict) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def key_fields(module_text, in_avals, out_avals, *, platform, platform_version, device_kind, device_count,
               versions, compile_options) -> dict:  # fmt: skip
    """Everything that changes what compiling ``module_text`` produces (see the module doc)."""
    return {
        "format": FORMAT,
        "module_sha256": hashlib.sha256(module_text.encode()).hexdigest(),
        "in_avals": [[list(a.shape), str(a.dtype)] for a in in_avals],
        "out_avals": [[list(a.shape), str(a.dtype)] for a in out_avals],
        "platform": platform,
        "platform_version": platform_version,
        "device_kind": device_kind,
        "device_count": device_count,
        "host_cpu": _host_cpu() if platform == "cpu" else "",
        "versions": {**versions, "hlotrace": str(hlotrace.__version__)},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "compile_options": compile_options,
    }


_host_cpu_id: str | None = None


def _host_cpu() -> str:
    """The host's machine, CPU model and feature flags, hashed (XLA:CPU emits code for them)."""
    global _host_cpu_id
    if _host_cpu_id is None:
        import platform

        parts = [platform.machine(), platform.processor()]
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    name = line.split(":", 1)[0].strip()
                    if name in ("model name", "flags", "Features", "CPU part") and line not in parts:
                        parts.append(line.strip())
                    elif not line.strip() and len(parts) > 2:
                        break  # the first processor is enough
        except OSError:
            pass
        _host_cpu_id = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return _host_cpu_id


# -- lookups ---------------------------------------------------------------------------------


def _give_up(root: Path, exc: OSError) -> None:
    """Stop using ``root`` in this process, with one warning."""
    _unusable.add(str(root))
    warn_once(f"dir:{root}", f"cannot use {root} ({exc}); running without the persistent cache")


def load(fields: dict) -> bytes | None:
    """The stored executable for ``fields``, or None: a miss, or a bad entry (deleted, with a
    warning). Call :func:`loaded` once XLA accepted the bytes, :func:`reject` if it did not."""
    root = directory()
    if root is None or str(root) in _unusable:
        return None
    path = root / (entry_key(fields) + SUFFIX)
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        _record(root, "misses")
        return None
    except OSError as exc:
        _give_up(root, exc)
        return None
    payload, problem = _parse(blob, fields)
    if problem is not None:
        reject(fields, problem)
        return None
    return payload


def contains(fields: dict) -> bool:
    """Whether an entry for ``fields`` exists (not read or checked: :func:`load` does that)."""
    root = directory()
    if root is None or str(root) in _unusable:
        return False
    return (root / (entry_key(fields) + SUFFIX)).is_file()


def loaded(fields: dict) -> None:
    """Count a hit and mark the entry as just used (its mtime: eviction goes by it)."""
    root = directory()
    if root is None:
        return
    try:
        os.utime(root / (entry_key(fields) + SUFFIX))
    except OSError:
        pass
    _record(root, "hits")


def _parse(blob: bytes, fields: dict) -> tuple[bytes | None, str | None]:
    if not blob.startswith(_MAGIC):
        return None, "not an hlotrace cache entry (bad magic)"
    rest = blob[len(_MAGIC) :]
    newline = rest.find(b"\n")
    try:
        header = json.loads(rest[:newline])
        payload = rest[newline + 1 :]
        if _canonical(header["key"]) != _canonical(fields):
            return None, "its key fields differ from the lookup's"
        if len(payload) != header["payload_bytes"]:
            return None, f"truncated ({len(payload)} of {header['payload_bytes']} payload bytes)"
        if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
            return None, "its payload does not match its checksum"
    except (ValueError, KeyError, TypeError):
        return None, "unreadable header"
    return payload, None


def reject(fields: dict, reason: str) -> None:
    """Delete the entry for ``fields`` (corrupted, or refused by XLA) with one warning; the
    caller compiles and stores it again."""
    root = directory()
    if root is None:
        return
    path = root / (entry_key(fields) + SUFFIX)
    warnings.warn(f"hlotrace compile cache: entry {path} rejected ({reason}); recompiling", CacheWarning, stacklevel=3)
    count("disk_cache_errors")
    _record(root, "errors")
    _record(root, "misses")
    try:
        path.unlink()
    except OSError:
        pass


def store(fields: dict, payload: bytes) -> None:
    """Write the entry for ``fields`` atomically, then evict over the cap. Never raises."""
    root = directory()
    if root is None or str(root) in _unusable:
        return
    header = json.dumps(
        {"key": fields, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()},
        sort_keys=True,
    ).encode()
    path = root / (entry_key(fields) + SUFFIX)
    tmp = None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=SUFFIX, dir=root)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + header + b"\n" + payload)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        _give_up(root, exc)
        return
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _after_write(root, len(_MAGIC) + len(header) + 1 + len(payload))


def _after_write(root: Path, added: int) -> None:
    cap, state = max_bytes(), _size_estimates.get(str(root))
    if state is None or state[1] >= _RESCAN_EVERY or state[0] + added > cap:
        _size_estimates[str(root)] = [evict(root, cap, int(cap * LOW_WATER)), 0]
    else:
        state[0] += added
        state[1] += 1


# -- the directory as a whole (also for `hlotrace cache`) -------------------------------------


def entries(root: Path | None = None) -> list[tuple[Path, int, float]]:
    """(path, bytes, mtime) of every entry, oldest first."""
    root = directory() if root is None else root
    found = []
    try:
        with os.scandir(root) as it:
            for e in it:
                if e.name.endswith(SUFFIX) and not e.name.startswith(_TMP_PREFIX):
                    try:
                        st = e.stat()
                    except OSError:
                        continue  # deleted meanwhile
                    found.append((Path(e.path), st.st_size, st.st_mtime))
    except (OSError, TypeError):
        return []
    return sorted(found, key=lambda item: item[2])


def evict(root: Path, cap: int, low: int | None = None) -> int:
    """When over ``cap`` bytes, delete the least recently used entries until at most ``low``
    (default ``cap``) remain (and temporary files older than an hour: left by killed
    writers); return the bytes left."""
    now = time.time()
    try:
        for name in os.listdir(root):
            if name.startswith(_TMP_PREFIX):
                try:
                    if now - os.stat(root / name).st_mtime > _STALE_TMP_SECONDS:
                        os.unlink(root / name)
                except OSError:
                    pass
    except OSError:
        return 0
    found = entries(root)
    total = sum(size for _, size, _ in found)
    if total <= cap:
        return total
    target = cap if low is None else min(low, cap)
    for path, size, _ in found:
        if total <= target:
            break
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # another process evicted it
        except OSError:
            continue
        total -= size
    return total


def clear(root: Path | None = None) -> int:
    """Delete every entry, temporary file and the counts; return how many entries went."""
    root = directory() if root is None else root
    removed = 0
    if root is None:
        return 0
    for path, _, _ in entries(root):
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    for name in names:
        if name.startswith(_TMP_PREFIX) or name == STATS_FILE:
            try:
                os.unlink(root / name)
            except OSError:
                pass
    _size_estimates.pop(str(root), None)
    return removed


def _record(root: Path, kind: str) -> None:
    """Add one to ``kind`` in the directory's persisted counts (best effort)."""
    if str(root) in _unusable:
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover (not POSIX)
        return
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(root / STATS_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        counts = _read_counts(os.read(fd, _STATS_BYTES))
        counts[kind] = counts.get(kind, 0) + 1
        # Padded to a fixed size and written in place: truncating costs ~1 ms on some
        # file systems, and JSON ignores the trailing spaces.
        os.pwrite(fd, json.dumps(counts, sort_keys=True).encode().ljust(_STATS_BYTES), 0)
    except OSError:
        pass
    finally:
        os.close(fd)  # releases the lock


def _read_counts(data: bytes) -> dict:
    try:
        counts = json.loads(data or b"{}")
        return {k: int(v) for k, v in counts.items()} if isinstance(counts, dict) else {}
    except (ValueError, TypeError):
        return {}


def persisted_counts(root: Path | None = None) -> dict:
    """Hits, misses and rejected entries of every process since the last ``clear``."""
    root = directory() if root is None else root
    counts = {"hits": 0, "misses": 0, "errors": 0}
    if root is not None:
        try:
            counts.update(_read_counts((root / STATS_FILE).read_bytes()))
        except OSError:
            pass
    return counts
