"""Several processes (on one host or many) running one SPMD program.

>>> dist.initialize()          # reads HLOTRACE_COORDINATOR / _NUM_PROCESSES / _PROCESS_ID
>>> dist.process_index(), dist.process_count()
>>> mesh = dist.Mesh((dist.process_count() * 2,), ("data",))   # every process's devices

Process 0 runs jaxlib's coordination service; every process connects to it and gets a CPU
client whose devices are those of every process (gloo TCP collectives between them).
Failures end the job instead of hanging it: a process whose Python program raises reports it
through the service's key-value store and exits; every other process polls that store and
exits with a message naming the failed process; a process that dies outright stops sending
heartbeats and XLA ends the others after ``HLOTRACE_DIST_TIMEOUT`` seconds.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import socket
import sys
import threading
import time
import traceback

import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace import config, runtime
from hlotrace.errors import HlotraceError, TraceError

COORDINATOR_ENV = "HLOTRACE_COORDINATOR"
NUM_PROCESSES_ENV = "HLOTRACE_NUM_PROCESSES"
PROCESS_ID_ENV = "HLOTRACE_PROCESS_ID"
TIMEOUT_ENV = "HLOTRACE_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300
_FAILED = "hlotrace/failed/"
_POLL_S = 0.5


class _State:
    """This process's place in the job (one instance, filled by :func:`initialize`)."""

    def __init__(self):
        self.args = None  # (address, num_processes, process_id) once initialized
        self.process_id = 0
        self.num_processes = 1
        self.timeout_s = DEFAULT_TIMEOUT_S
        self.service = None
        self.client = None
        self.compiles = 0  # modules compiled for meshes that span processes (in lock-step)
        # Set by _shutdown (the process is closing): wakes the watchdog, which then returns.
        self.stop = threading.Event()
        self.watchdog: threading.Thread | None = None


_STATE = _State()


def timeout_s() -> int:
    return max(1, round(config.get(TIMEOUT_ENV)))


def _from_environment(coordinator_address, num_processes, process_id):
    coordinator_address = coordinator_address or config.get(COORDINATOR_ENV)
    num_processes = config.get(NUM_PROCESSES_ENV) if num_processes is None else num_processes
    process_id = config.get(PROCESS_ID_ENV) if process_id is None else process_id
    return coordinator_address, num_processes, process_id


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HlotraceError(f"coordinator address {address!r}: expected HOST:PORT (e.g. 10.0.0.1:8476)")
    return host.strip("[]"), int(port)


def initialize(coordinator_address: str | None = None, num_processes: int | None = None, process_id: int | None = None):
    """Join the job of ``num_processes`` processes coordinated at ``coordinator_address``
    (``HOST:PORT``, served by process 0) as process ``process_id``. Arguments default to
    ``HLOTRACE_COORDINATOR``, ``HLOTRACE_NUM_PROCESSES`` and ``HLOTRACE_PROCESS_ID`` (the
    launcher, ``python -m hlotrace.distributed.launch``, sets them); with none of them this
    is a no-op and the program is one process. Call it before hlotrace's first computation.
    Waits up to ``HLOTRACE_DIST_TIMEOUT`` seconds (default 300) for every process.

    >>> dist.initialize()                                  # under the launcher
    >>> dist.initialize("10.0.0.1:8476", 2, 1)             # by hand, on the second host
    """
    address, n, pid = _from_environment(coordinator_address, num_processes, process_id)
    if address is None and n is None and pid is None:
        return
    missing = [
        name for name, v in ((COORDINATOR_ENV, address), (NUM_PROCESSES_ENV, n), (PROCESS_ID_ENV, pid)) if v is None
    ]
    if missing:
        raise HlotraceError(
            f"dist.initialize needs a coordinator address, the number of processes and this process's id; "
            f"missing: {', '.join(missing)} (arguments or environment variables)"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise HlotraceError(f"num_processes must be a positive int, got {n!r}")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < n:
        raise HlotraceError(f"process_id must be an int in [0, {n}), got {pid!r}")
    host, port = _split_address(address)
    if _STATE.args is not None:
        if _STATE.args == (address, n, pid):
            return
        raise HlotraceError(f"dist.initialize was already called with {_STATE.args}; now {(address, n, pid)}")
    if n == 1:  # one process: nothing to coordinate
        _STATE.args = (address, n, pid)
        return

    if runtime.cpu_client_exists():
        raise HlotraceError(
            "dist.initialize must run before hlotrace's first computation (its CPU client already exists "
            "with this process's devices only); call it at the top of the program"
        )

    wait = timeout_s()
    if pid == 0:
        try:
            _STATE.service = jaxlib_dist.start_service(f"[::]:{port}", n, wait)
        except Exception as exc:
            raise HlotraceError(
                f"process 0 could not start the coordination service on port {port} ({address}): "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ) from None
    else:
        _wait_for_port(host, port, address, wait)
    client = jaxlib_dist.make_client(address, pid, wait, init_timeout_s=wait + 60)
    _connect(client, address, n, pid, wait)
    _STATE.args, _STATE.process_id, _STATE.num_processes = (address, n, pid), pid, n
    _STATE.client, _STATE.timeout_s = client, wait
    runtime.set_distributed(client, pid, n)
    _STATE.watchdog = threading.Thread(target=_watch_peers, name="hlotrace-dist-watchdog", daemon=True)
    _STATE.watchdog.start()
    _install_excepthook()
    atexit.register(_shutdown)


def _wait_for_port(host: str, port: int, address: str, wait: float) -> None:
    deadline = time.monotonic() + wait
    last = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, wait)):
                return
        except OSError as exc:
            last = exc
            time.sleep(0.2)
    raise HlotraceError(
        f"could not reach the coordinator at {address} within {wait} s ({TIMEOUT_ENV}): {last}. Is process 0 "
        f"running, with the same {COORDINATOR_ENV}, and is that port open between the hosts?"
    )


def _connect(client, address: str, n: int, pid: int, wait: float) -> None:
    # connect() waits for every process and ends the process (not an exception) at its own
    # deadline: run it where this thread can stop waiting first, and raise a real error.
    errors: list = []

    def run():
        try:
            jaxlib_dist.connect(client)
        except BaseException as exc:  # pragma: no cover (XLA usually aborts instead)
            errors.append(exc)

    thread = threading.Thread(target=run, name="hlotrace-dist-connect", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        raise HlotraceError(
            f"process {pid} reached the coordinator at {address}, but not all {n} processes joined within "
            f"{wait} s ({TIMEOUT_ENV}); start every process with {NUM_PROCESSES_ENV}={n} and its own "
            f"{PROCESS_ID_ENV} in 0..{n - 1}"
        )
    if errors:
        raise HlotraceError(f"process {pid} could not connect to the coordinator at {address}: {errors[0]}")


# -- who am I ------------------------------------------------------------------------------


def process_index() -> int:
    """This process's index in the job (0 when not distributed)."""
    return _STATE.process_id


def process_count() -> int:
    """How many processes the job has (1 when not distributed)."""
    return _STATE.num_processes


def is_initialized() -> bool:
    return _STATE.client is not None


def local_devices(platform: str | None = None) -> list:
    """The devices this process drives (``dist.devices()`` lists every process's)."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    return list(jaxlib_compat.client_devices(runtime.client(platform)))


def spans_processes(devices) -> bool:
    """Whether ``devices`` include another process's."""
    if _STATE.client is None:
        return False

    me = _STATE.process_id
    return any(jaxlib_dist.process_index_of(d) != me for d in devices)


# -- failures ------------------------------------------------------------------------------


def _report_failure(message: str) -> None:
    try:
        jaxlib_dist.kv_set(_STATE.client, f"{_FAILED}{_STATE.process_id}", message[-2000:])
    except Exception:  # the service itself may be gone: the heartbeat timeout ends the others
        pass


def peer_failure(wait_s: float = 2.0) -> str | None:
    """What another process reported when it failed (waiting up to ``wait_s`` for it), or None."""
    if _STATE.client is None:
        return None
    me = f"{_FAILED}{_STATE.process_id}"
    deadline = time.monotonic() + wait_s
    while True:
        try:
            entries = [(k, m) for k, m in jaxlib_dist.kv_dir(_STATE.client, _FAILED) if not k.endswith(me)]
        except Exception:
            entries = []
        if entries:
            key, message = entries[0]
            return f"process {key.rsplit('/', 1)[-1]} failed: {message.strip()}"
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _watch_peers() -> None:
    me = f"{_FAILED}{_STATE.process_id}"
    while not _STATE.stop.wait(_POLL_S):
        try:
            entries = jaxlib_dist.kv_dir(_STATE.client, _FAILED)
        except Exception:
            continue
        for key, message in entries:
            if not key.endswith(me) and not _STATE.stop.is_set():
                who = key.rsplit("/", 1)[-1]
                sys.stderr.write(
                    f"hlotrace.distributed: process {who} failed, so process {_STATE.process_id} stops too. "
                    f"Its error:\n{message.rstrip()}\n"
                )
                sys.stderr.flush()
                sys.stdout.flush()
                os._exit(1)


def _install_excepthook() -> None:
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        last = "".join(traceback.format_exception_only(kind, value)).strip()
        _report_failure(f"{last}")
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip the orderly shutdown: it waits for every other process.
        os._exit(130 if issubclass(kind, KeyboardInterrupt) else 1)

    sys.excepthook = hook


def _shutdown() -> None:
    # The watchdog must be out of jaxlib before the interpreter finalizes: a daemon thread
    # that returns from a C++ call (its kv_dir, with the GIL released) during finalization
    # is ended by a forced unwind, which nanobind's catch-all swallows, and glibc aborts the
    # process ("FATAL: exception not rethrown", SIGABRT) after its work is done.
    _STATE.stop.set()
    if _STATE.watchdog is not None and _STATE.watchdog is not threading.current_thread():
        _STATE.watchdog.join(_STATE.timeout_s)
    sys.stdout.flush()
    try:
        jaxlib_dist.shutdown(_STATE.client)  # waits for every process to get here
        if _STATE.service is not None:
            jaxlib_dist.shutdown(_STATE.service)
    except Exception as exc:
        sys.stderr.write(f"hlotrace.distributed: process {_STATE.process_id} shutdown: {exc}\n")


# -- every process compiles the same module -------------------------------------------------

_LOCATION = re.compile(r" loc\(#loc\d*\)|^#loc.*$", re.MULTILINE)


def module_fingerprint(text: str) -> str:
    """A fingerprint of the module that ignores locations (file paths differ between hosts)."""
    return hashlib.sha256(_LOCATION.sub("", text).encode()).hexdigest()[:32]


def agree_on_module(name: str, trace, text: str) -> None:
    """Before compiling for a mesh that spans processes: every process must be compiling the
    same module (else XLA's collectives would wait forever). Exchanges fingerprints through
    the coordination service; a difference is a TraceError on every process naming the first
    record that differs, a process that does not arrive in time one naming it."""
    client, me, n = _STATE.client, _STATE.process_id, _STATE.num_processes
    _STATE.compiles += 1
    prefix = f"hlotrace/module/{_STATE.compiles}/"
    mine = f"{module_fingerprint(text)} {name}"
    records = str(trace)
    jaxlib_dist.kv_set(client, f"{prefix}records/{me}", records)
    jaxlib_dist.kv_set(client, f"{prefix}{me}", mine)
    for other in range(n):
        if other == me:
            continue
        try:
            theirs = jaxlib_dist.kv_get(client, f"{prefix}{other}", _STATE.timeout_s)
        except TimeoutError:
            raise TraceError(
                f"process {other} did not reach compile #{_STATE.compiles} ({name}) within {_STATE.timeout_s} s "
                f"({TIMEOUT_ENV}): every process must call the same compiled functions, in the same order, "
                f"with inputs of the same shapes"
            ) from None
        if theirs != mine:
            other_records = jaxlib_dist.kv_get(client, f"{prefix}records/{other}", _STATE.timeout_s)
            raise TraceError(_difference(name, theirs, mine, other, me, other_records, records))


def _difference(name, theirs, mine, other, me, other_records, records) -> str:
    their_name = theirs.split(" ", 1)[1] if " " in theirs else "?"
    head = (
        f"processes {me} and {other} are compiling different programs for one mesh "
        f"(process {me}: {name}, process {other}: {their_name}); every process must record the same "
        f"function on inputs of the same shapes"
    )
    a, b = records.splitlines(), other_records.splitlines()
    for i, (line_a, line_b) in enumerate(zip(a, b, strict=False)):
        if _without_location(line_a) != _without_location(line_b):
            what = "inputs" if i == 0 else "first differing record"
            return f"{head}. The {what}:\n  process {me}: {line_a.strip()}\n  process {other}: {line_b.strip()}"
    if len(a) != len(b):
        i = min(len(a), len(b))
        extra = (a if len(a) > len(b) else b)[i - 1 : i + 1]
        return f"{head}. One recording is longer ({len(a)} vs {len(b)} lines), from:\n  " + "\n  ".join(extra)
    return f"{head}. The recordings are equal, but the lowered modules differ (pass pipeline, XLA flags, rules?)"


def _without_location(line: str) -> str:
    return line.split("  # ", 1)[0]
