"""Start the processes of one hlotrace job: ``python -m hlotrace.distributed.launch``.

    python -m hlotrace.distributed.launch --nproc 2 --cpu-devices 4 examples/train_multiprocess.py

starts 2 processes of the script on this host with the environment ``dist.initialize()``
reads (a free local port for the coordinator unless ``--coordinator`` names one), prefixes
each line of their output with ``[i]`` (the process index), forwards Ctrl-C (SIGINT) and
SIGTERM to them, and when one fails stops the others and exits with the failed process's
status (128 + N for a process ended by signal N). A process's stdout lines go to the
launcher's stdout, its stderr lines to its stderr, each line whole. The runtime's chatter is
left out unless ``--verbose``: Gloo's "[Gloo] Rank N is connected to M peer ranks" lines
(printed by several threads at once, often garbled together) and XLA's C++ info and warning
log lines (errors are kept). A progress bar (text rewritten after ``\r``) is redrawn in
place, prefixed, when the launcher's stdout is a terminal; otherwise only its last state is
written, once, when the process ends the line. On several hosts run it once per host, with
the total process count, this host's first process index and a shared coordinator (process
0's host), e.g. two hosts with 4 processes each:

    host A: python -m hlotrace.distributed.launch --nproc 4 --num-processes 8 --process-id 0 \\
                --coordinator hostA:8476 train.py
    host B: python -m hlotrace.distributed.launch --nproc 4 --num-processes 8 --process-id 4 \\
                --coordinator hostA:8476 train.py
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from hlotrace.distributed.process import (
    COORDINATOR_ENV,
    NUM_PROCESSES_ENV,
    PROCESS_ID_ENV,
    TIMEOUT_ENV,
    _split_address,
)
from hlotrace.errors import HlotraceError

CPU_DEVICES_ENV = "HLOTRACE_CPU_DEVICES"  # (hlotrace.runtime.CPU_DEVICES_ENV; not imported: no jax here)
GRACE_S = 5.0  # how long stopped processes get before SIGKILL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hlotrace.distributed.launch",
        description=(
            "Run SCRIPT as several processes of one hlotrace job (one SPMD program over the devices of every "
            "process). Each process gets HLOTRACE_COORDINATOR, HLOTRACE_NUM_PROCESSES and HLOTRACE_PROCESS_ID; "
            "the script calls hlotrace.distributed.initialize() before its first computation."
        ),
        epilog=(
            "Several hosts: run the launcher once per host with the same --num-processes (all hosts together) "
            "and --coordinator (process 0's host and a free port), and --process-id set to the index of this "
            "host's first process (host A: --process-id 0, host B: --process-id NPROC, ...). Exit status: 0 when "
            "every process succeeded, else the status of the first process that failed (128+N for signal N); "
            "the others are stopped. HLOTRACE_DIST_TIMEOUT (or --timeout) bounds every wait between processes."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nproc", type=int, default=1, metavar="N", help="processes to start on this host (1)")
    parser.add_argument(
        "--cpu-devices", type=int, default=None, metavar="K", help="CPU devices per process (HLOTRACE_CPU_DEVICES)"
    )
    parser.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="where process 0 serves the coordination service (default: 127.0.0.1 and a free port)",
    )
    parser.add_argument(
        "--num-processes", type=int, default=None, metavar="M", help="processes of the whole job, every host (N)"
    )
    parser.add_argument("--process-id", type=int, default=0, metavar="I", help="index of this host's first process (0)")
    parser.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="seconds every wait may take (HLOTRACE_DIST_TIMEOUT)"
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="pass the runtime's chatter through: Gloo's connection lines and XLA's C++ info/warning logs",
    )
    parser.add_argument("script", help="the Python script every process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return parser


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check(parser, options) -> int:
    if options.nproc < 1:
        parser.error(f"--nproc must be at least 1, got {options.nproc}")
    total = options.nproc if options.num_processes is None else options.num_processes
    if total < 1:
        parser.error(f"--num-processes must be at least 1, got {total}")
    if not 0 <= options.process_id or options.process_id + options.nproc > total:
        parser.error(
            f"--process-id {options.process_id} with --nproc {options.nproc} gives processes "
            f"{options.process_id}..{options.process_id + options.nproc - 1}, outside 0..{total - 1} (--num-processes)"
        )
    if total > options.nproc and options.coordinator is None:
        parser.error("processes on several hosts (--num-processes > --nproc) need --coordinator HOST:PORT")
    if options.coordinator is not None:
        try:
            _split_address(options.coordinator)
        except HlotraceError:
            parser.error(
                f"--coordinator {options.coordinator!r}: expected HOST:PORT with a port in 1..65535 (10.0.0.1:8476)"
            )
    if options.cpu_devices is not None and options.cpu_devices < 1:
        parser.error(f"--cpu-devices must be at least 1, got {options.cpu_devices}")
    if options.timeout is not None and options.timeout <= 0:
        parser.error(f"--timeout must be positive, got {options.timeout}")
    if not os.path.isfile(options.script):
        parser.error(f"no such script: {options.script}")
    return total


# The runtime's chatter, left out unless --verbose. Gloo prints one line per connected
# rank from several threads at once (to stdout), so its lines arrive whole, cut or run
# together: a line made only of the message's words is chatter. XLA logs through absl
# (stderr): "I0000 00:00:1700000000.123456   12345 file.cc:123] text"; info and warnings go,
# errors (E, F) stay. absl also announces "WARNING: All log messages before
# absl::InitializeLog() is called are written to STDERR" once.
_GLOO_MESSAGE = re.compile(
    rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. Expected number of connected peer ranks is : \d+"
)
_GLOO_WORDS = frozenset(b"gloo rank is connected to peer ranks expected number of".split())
_ABSL_LOG = re.compile(rb"^\s*[IW]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-/]+:\d+\] ")
_ABSL_NOTICE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# Set in each process unless --verbose or already set: XLA's C++ logging at warnings and up.
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "1"}


def is_chatter(line: bytes) -> bool:
    """Whether ``line`` (one line of a process's output, without its newline) is the
    runtime's chatter that the launcher leaves out by default."""
    text = _GLOO_MESSAGE.sub(b"", line).strip()
    if not text:
        return bool(line.strip())  # only Gloo messages (an empty line is the user's)
    if text.startswith(_ABSL_NOTICE) or _ABSL_LOG.match(text):
        return True
    if b"[Gloo]" in line or b"peer ranks" in text:  # pieces of Gloo's lines, run together
        return all(word in _GLOO_WORDS for word in re.findall(rb"[a-z]+", text.lower()))
    return False


class _Writer:
    """Writes one process's lines (prefixed ``[i] ``) to ``out``: whole lines only, the
    chatter left out unless ``verbose``; a progress bar redrawn in place on a terminal,
    its last state only otherwise."""

    def __init__(self, index: int, out, lock, verbose: bool, tty: bool):
        self.prefix = f"[{index}] ".encode()
        self.out, self.lock, self.verbose, self.tty = out, lock, verbose, tty
        self.pending = b""  # the last text a \r would overwrite (not on a terminal)
        self.on_screen = False  # a bar is drawn without its newline (on a terminal)

    def _write(self, data: bytes) -> None:
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def segment(self, text: bytes) -> None:
        """Text that a ``\r`` ended: a progress bar's state."""
        if not text or (not self.verbose and is_chatter(text)):
            return
        if self.tty:
            self._write(b"\r" + self.prefix + text)
            self.on_screen = True
        else:
            self.pending = text

    def line(self, text: bytes) -> None:
        """Text that a newline ended."""
        text = text or self.pending
        self.pending = b""
        if text and not self.verbose and is_chatter(text):
            text = b""
            if not self.on_screen:
                return
        if self.on_screen:
            self._write(b"\r" + self.prefix + text + b"\n" if text else b"\n")
            self.on_screen = False
        else:
            self._write(self.prefix + text + b"\n")

    def close(self) -> None:
        if self.pending or self.on_screen:
            self.line(b"")


def _pump(stream, writer: _Writer) -> None:
    """Copy a process's pipe to ``writer`` as lines and ``\r``-ended segments."""
    read = getattr(stream, "read1", stream.read)
    buffer = b""
    while True:
        chunk = read(65536)
        if not chunk:
            break
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find(b"\n"), buffer.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                break
            text, end, buffer = buffer[:cut], buffer[cut : cut + 1], buffer[cut + 1 :]
            if end == b"\n":
                writer.line(text)
            else:
                writer.segment(text)
    if buffer:
        writer.line(buffer)
    writer.close()
    stream.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _describe(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def _say(lock, text: str) -> None:
    with lock:
        sys.stdout.write(f"[launch] {text}\n")
        sys.stdout.flush()


def _stop(children, sig) -> None:
    for child in children.values():
        if child.poll() is None:
            try:
                child.send_signal(sig)
            except ProcessLookupError:
                pass


def _stop_all(children, first_signal=signal.SIGTERM) -> None:
    _stop(children, first_signal)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(c.poll() is None for c in children.values()):
        time.sleep(0.05)
    _stop(children, signal.SIGKILL)
    for child in children.values():
        child.wait()


def main(argv=None) -> int:
    parser = _parser()
    options = parser.parse_args(argv)
    total = _check(parser, options)
    coordinator = options.coordinator or f"127.0.0.1:{_free_port()}"
    lock = threading.Lock()
    children: dict[int, subprocess.Popen] = {}
    pumps = []
    interrupted: list = []

    def forward(signum, frame):
        interrupted.append(signum)
        _stop(children, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for index in range(options.process_id, options.process_id + options.nproc):
            env = dict(os.environ)
            env.update({COORDINATOR_ENV: coordinator, NUM_PROCESSES_ENV: str(total), PROCESS_ID_ENV: str(index)})
            env["PYTHONUNBUFFERED"] = "1"
            if not options.verbose:
                for name, value in QUIET_ENV.items():
                    env.setdefault(name, value)
            if options.cpu_devices is not None:
                env[CPU_DEVICES_ENV] = str(options.cpu_devices)
            if options.timeout is not None:
                env[TIMEOUT_ENV] = str(options.timeout)
            # Own session: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
            child = subprocess.Popen(
                [sys.executable, options.script, *options.args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            children[index] = child
            for stream, out in ((child.stdout, sys.stdout), (child.stderr, sys.stderr)):
                writer = _Writer(index, out.buffer, lock, options.verbose, _is_terminal(out))
                pump = threading.Thread(target=_pump, args=(stream, writer), daemon=True)
                pump.start()
                pumps.append(pump)
        status, failed = 0, []  # failed: process indices in the order their failures were seen
        while True:
            running = [i for i, c in children.items() if c.poll() is None]
            failed.extend(i for i, c in children.items() if c.returncode not in (None, 0) and i not in failed)
            if failed:
                first = failed[0]
                code = children[first].returncode
                status = _status(code)
                if running and not interrupted:
                    _say(lock, f"process {first} {_describe(code)}; stopping processes {running}")
                    _stop_all(children)
                elif interrupted:
                    _stop_all(children, signal.SIGINT)
                break
            if not running:
                break
            time.sleep(0.05)
        for pump in pumps:
            pump.join(timeout=2)
        if status and not interrupted:
            _say(lock, f"the job failed: process {first} {_describe(children[first].returncode)}")
        return status
    finally:
        if any(c.poll() is None for c in children.values()):
            _stop_all(children)
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
