"""Several processes, one SPMD program (issue 21): jobs started through the launcher
(``python -m hlotrace.distributed.launch``), each process with its own
``HLOTRACE_CPU_DEVICES``, so this pytest process's own client does not matter.

Timeouts are seconds here (``--timeout``: HLOTRACE_DIST_TIMEOUT); every job is also bounded by
``subprocess.run(timeout=...)``, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import hlotrace.distributed as dist
from hlotrace.errors import HlotraceError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_multiprocess.py"
LAUNCH = [sys.executable, "-m", "hlotrace.distributed.launch"]
JOB_TIMEOUT_S = 90


def _run(args, timeout=JOB_TIMEOUT_S, env=None):
    start = time.monotonic()
    done = subprocess.run(
        [*LAUNCH, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A small job: every process feeds its rows of a batch to one compiled step; `mode` breaks it.
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    import hlotrace.distributed as dist
    from hlotrace.jit import xla_trace

    dist.initialize()
    mode, me = sys.argv[1], dist.process_index()
    mesh = dist.Mesh((len(dist.devices()),), ("data",))
    step = xla_trace(lambda x: (x * 2).sum())
    for i in range(3):
        part = np.full((2 * len(dist.local_devices()), 3), me + 1, np.float32)
        x = dist.make_global(part, mesh, dist.P("data"))
        if i == 1 and me == 1 and mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if i == 1 and me == 1 and mode == "raise":
            raise ValueError("process 1 gives up")
        print("loss", float(step(x).numpy()), flush=True)
    if mode == "mismatch":
        other = xla_trace(lambda x: x * 3 if me == 0 else x + 3)
        other(x)
    if mode == "gather":
        try:
            x.numpy()
        except Exception as exc:
            print("numpy:", type(exc).__name__, exc, flush=True)
        whole = dist.process_allgather({"x": x})["x"].numpy()
        print("gathered", whole.shape, sorted(set(whole[:, 0].tolist())), flush=True)
        print("local", dist.local_part(x).shape, flush=True)
    print("done", flush=True)
    """
)


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("multiprocess") / "job.py"
    path.write_text(SCRIPT)
    return path


def _final_parameters(tmp_path, nproc, cpu_devices, steps=8):
    out = tmp_path / f"params_{nproc}x{cpu_devices}.npz"
    # One process records its first call eagerly by default (NumPy computes the first step);
    # a job of several processes records from shapes: compare compiled with compiled.
    status, output, _ = _run(
        ["--nproc", nproc, "--cpu-devices", cpu_devices, EXAMPLE, "--steps", steps, "--out", out],
        env={"HLOTRACE_FIRST_CALL": "compiled"},
    )
    assert status == 0, output
    losses = [line.split("loss")[1].strip() for line in output.splitlines() if " loss " in line]
    return dict(np.load(out)), losses, output


def test_two_processes_of_two_devices_train_the_mlp_like_one_process_of_four(tmp_path):
    two, two_losses, output = _final_parameters(tmp_path, 2, 2)
    assert "2 process(es) x 2 CPU devices" in output and "all-reduce" in output
    one, one_losses, _ = _final_parameters(tmp_path, 1, 4)
    assert two_losses == one_losses  # printed to 4 decimals
    assert sorted(two) == sorted(one) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    for name in one:
        # Not bitwise: the gradients' all-reduce over 4 devices sums in another order through
        # gloo (across processes) than XLA:CPU's in-process all-reduce: last-bit differences
        # (2x2 equals 4x1 bitwise, and 2x1 equals 1x2 below, where a sum of two has one order).
        np.testing.assert_allclose(two[name], one[name], rtol=0, atol=2e-7, err_msg=name)


def test_two_processes_of_one_device_train_bitwise_like_one_process_of_two(tmp_path):
    """With two devices the all-reduce is one addition, the same in either order: the job of
    two processes ends with exactly the parameters of one process with two devices."""
    two, two_losses, _ = _final_parameters(tmp_path, 2, 1)
    one, one_losses, _ = _final_parameters(tmp_path, 1, 2)
    assert two_losses == one_losses
    for name in one:
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)


def test_processes_exit_cleanly_while_the_watchdog_polls(tmp_path):
    """Regression: the peer watchdog (a daemon thread) still inside a jaxlib call when the
    interpreter finalized was ended by a forced unwind that nanobind swallowed, and glibc
    aborted the process after its work was done ("FATAL: exception not rethrown", SIGABRT; one
    make test run in twelve). Polling without pause, 5 of 12 two-process jobs aborted so;
    _shutdown now stops and joins the watchdog first."""
    job = tmp_path / "exit_job.py"
    job.write_text(
        "import hlotrace.distributed as dist\n"
        "import hlotrace.distributed.process as process\n"
        "process._POLL_S = 0.0  # the watchdog is nearly always inside kv_dir\n"
        "dist.initialize()\n"
        "print('done', dist.process_index())\n"
    )
    for _ in range(3):
        status, output, _ = _run(["--nproc", 4, "--cpu-devices", 1, "--timeout", 20, job])
        assert status == 0, output
        assert output.count("done") == 4 and "SIGABRT" not in output


def test_results_are_read_replicated_and_split_values_are_gathered_on_request(script):
    status, output, _ = _run(["--nproc", 2, "--cpu-devices", 2, "--timeout", 20, script, "gather"])
    assert status == 0, output
    # 4 rows of 1s (process 0) and 4 of 2s (process 1), times 2, summed over 3 columns.
    assert output.count("loss 72.0") == 6
    assert "numpy: HlotraceError" in output and "dist.process_allgather(t)" in output
    assert output.count("gathered (8, 3) [1.0, 2.0]") == 2  # on both processes
    assert output.count("local (4, 3)") == 2


def test_a_killed_process_stops_the_job_with_its_status(script):
    status, output, seconds = _run(["--nproc", 2, "--cpu-devices", 2, "--timeout", 20, script, "kill"])
    assert status == 128 + 9, output
    assert "process 1 was killed by SIGKILL; stopping processes [0]" in output
    assert "done" not in output
    assert seconds < 60


def test_a_raising_process_stops_the_job_and_its_traceback_is_shown(script):
    status, output, _ = _run(["--nproc", 2, "--cpu-devices", 2, "--timeout", 20, script, "raise"])
    assert status == 1, output
    assert "[1] ValueError: process 1 gives up" in output
    assert "the job failed: process 1 exited with status 1" in output


def test_processes_compiling_different_modules_fail_naming_the_first_differing_record(script):
    status, output, _ = _run(["--nproc", 2, "--cpu-devices", 1, "--timeout", 20, script, "mismatch"])
    assert status == 1, output
    assert "compiling different programs for one mesh" in output
    assert "multiply(%0, %1)" in output and "add(%0, %1)" in output
    assert "done" not in output


def _two_hosts(script, mode, timeout_s):
    """Two launchers, one process each, as on two hosts (the other is not stopped by a
    launcher: the distributed runtime must end it)."""
    common = ["--nproc", 1, "--num-processes", 2, "--cpu-devices", 1, "--timeout", timeout_s]
    common += ["--coordinator", f"127.0.0.1:{_free_port()}"]
    jobs = [
        subprocess.Popen(
            [*LAUNCH, *map(str, [*common, "--process-id", i, script, mode])],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        for i in (0, 1)
    ]
    start = time.monotonic()
    outputs = [job.communicate(timeout=JOB_TIMEOUT_S)[0] for job in jobs]
    return [job.returncode for job in jobs], outputs, time.monotonic() - start


def test_on_two_hosts_a_raising_process_ends_the_other_with_its_error(script):
    codes, outputs, _ = _two_hosts(script, "raise", 20)
    assert codes == [1, 1], outputs
    # Either its watchdog saw the report first, or its step's collective failed and then
    # found the report: both name process 1 and its error.
    assert (
        "process 1 failed, so process 0 stops too" in outputs[0]
        or "the SPMD step failed while exchanging data with the other processes" in outputs[0]
    ), outputs[0]
    assert "ValueError: process 1 gives up" in outputs[0]


def test_on_two_hosts_a_killed_process_ends_the_other_within_the_timeout(script):
    codes, outputs, seconds = _two_hosts(script, "kill", 3)
    assert codes[1] == 128 + 9, outputs
    assert codes[0] != 0 and "done" not in outputs[0], outputs[0]
    # Its step's collective fails (the peer's sockets closed), or, when it was not in one,
    # XLA's coordination service ends it after the heartbeat timeout.
    assert "another process of the job probably stopped" in outputs[0] or "another task died" in outputs[0], outputs[0]
    assert seconds < 45


def test_an_unreachable_coordinator_is_an_error_naming_its_address(script):
    port = _free_port()
    args = ["--nproc", 1, "--num-processes", 2, "--process-id", 1, "--timeout", 2]
    status, output, seconds = _run([*args, "--coordinator", f"127.0.0.1:{port}", script, "ok"])
    assert status == 1, output
    assert f"could not reach the coordinator at 127.0.0.1:{port} within 2 s" in output
    assert seconds < 45


def test_launcher_help_and_bad_arguments():
    status, output, _ = _run(["--help"])
    assert status == 0 and "--num-processes" in output and "Several hosts" in output
    status, output, _ = _run(["--nproc", 2, "--num-processes", 4, "missing.py"])
    assert status == 2 and "need --coordinator" in output
    status, output, _ = _run(["--nproc", 2, "--process-id", 1, "--coordinator", "h:1", "x.py"])
    assert status == 2 and "outside 0..1" in output


def test_initialize_without_a_job_is_a_no_op_and_bad_settings_are_clear_errors(monkeypatch):
    for name in ("HLOTRACE_COORDINATOR", "HLOTRACE_NUM_PROCESSES", "HLOTRACE_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    dist.initialize()
    assert (dist.process_index(), dist.process_count(), dist.is_initialized()) == (0, 1, False)
    with pytest.raises(HlotraceError, match="missing: HLOTRACE_NUM_PROCESSES, HLOTRACE_PROCESS_ID"):
        dist.initialize("127.0.0.1:1234")
    with pytest.raises(HlotraceError, match=r"process_id must be an int in \[0, 2\)"):
        dist.initialize("127.0.0.1:1234", 2, 2)
    with pytest.raises(HlotraceError, match="expected HOST:PORT"):
        dist.initialize("nowhere", 2, 0)
    monkeypatch.setenv("HLOTRACE_NUM_PROCESSES", "two")
    with pytest.raises(HlotraceError, match="HLOTRACE_NUM_PROCESSES='two': expected an integer"):
        dist.initialize("127.0.0.1:1234", None, 0)
