"""The launcher's output is quiet and readable (issue 37, item 6): no Gloo/XLA chatter by
default (``--verbose`` brings it back), whole prefixed lines, stdout to stdout and stderr to
stderr, and a ``\\r`` progress bar written once, at its last state, when stdout is not a
terminal (redrawn in place, prefixed, when it is)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from hlotrace.distributed import launch

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = [sys.executable, "-m", "hlotrace.distributed.launch"]

# A 2-process job (real Gloo connection lines) that also prints the chatter seen in the wild:
# Gloo lines run together by two threads, XLA's absl info/warning lines and absl's notice on
# stderr, an absl error line (kept), and a progress bar drawn with \r.
SCRIPT = textwrap.dedent(
    r"""
    import sys
    import numpy as np
    import hlotrace.distributed as dist
    from hlotrace.jit import xla_trace

    dist.initialize()
    me = dist.process_index()
    mesh = dist.Mesh((len(dist.devices()),), ("data",))
    x = dist.make_global(np.full((len(dist.local_devices()), 2), me + 1, np.float32), mesh, dist.P("data"))
    print("loss", float(xla_trace(lambda x: (x * 2).sum())(x).numpy()), flush=True)
    print("[Gloo] Rank 0 is [Gloo] Rank 1 is connected to 3 peer ranks. Expected number of connected peer "
          "ranks is : 3connected to 3 peer ranks. Expected number of connected peer ranks is : 3", flush=True)
    sys.stderr.write("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
    sys.stderr.write("I0000 00:00:1700000000.123456   4242 service.cc:152] XLA service initialized\n")
    sys.stderr.write("W1127 22:10:30.123456  4242 gloo.cc:99] a warning nobody asked for\n")
    sys.stderr.write(f"E1127 22:10:30.123456  4242 client.cc:7] a real error from {me}\n")
    for done in range(1, 4):
        sys.stdout.write(f"\rstep {done}/3 [{'#' * done}{'.' * (3 - done)}]")
        sys.stdout.flush()
    sys.stdout.write("\n")
    print("done", me, flush=True)
    """
)


def test_a_job_prints_its_own_lines_and_not_the_runtimes(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "HLOTRACE_CPU_DEVICES"}
    done = subprocess.run(
        [*LAUNCH, "--nproc", "2", "--cpu-devices", "2", "--timeout", "60", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    for index in (0, 1):
        assert out.count(f"[{index}] loss 24.0") == 1, out
        assert out.count(f"[{index}] step 3/3 [###]") == 1, out  # the bar's last state, once
        assert f"[{index}] done {index}" in out, out
        assert f"[{index}] E1127 22:10:30.123456  4242 client.cc:7] a real error from {index}" in err, err
    everything = done.stdout + done.stderr
    for chatter in ("Gloo", "peer ranks", "service.cc", "nobody asked", "absl::InitializeLog", "\r", "step 1/3"):
        assert chatter not in everything, (chatter, everything)
    assert all(line.startswith(("[0] ", "[1] ")) for line in out + err), (out, err)
    assert sorted(out) == sorted(
        f"[{i}] {text}" for i in (0, 1) for text in ("loss 24.0", "step 3/3 [###]", f"done {i}")
    )


def test_verbose_brings_the_chatter_back(tmp_path):
    script = tmp_path / "chatty.py"  # no jax: the launcher's filter alone
    script.write_text(
        "import sys\n"
        "print('[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1')\n"
        "sys.stderr.write('I0000 00:00:1700000000.123456   4242 service.cc:152] XLA service initialized\\n')\n"
        "print('mine')\n"
    )
    for options, chatty in (([], False), (["--verbose"], True)):
        done = subprocess.run(
            [*LAUNCH, *options, "--nproc", "1", str(script)], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert done.returncode == 0, done.stderr
        assert "[0] mine" in done.stdout.splitlines()
        assert ("[0] [Gloo] Rank 0 is connected" in done.stdout) is chatty, done.stdout
        assert ("[0] I0000 00:00:1700000000.123456" in done.stderr) is chatty, done.stderr


def _pumped(data: bytes, tty: bool, verbose: bool = False) -> bytes:
    read, write = os.pipe()
    out = io.BytesIO()
    writer = launch._Writer(3, out, threading.Lock(), verbose, tty)
    with os.fdopen(read, "rb") as stream:
        os.write(write, data)
        os.close(write)
        launch._pump(stream, writer)
    return out.getvalue()


def test_a_progress_bar_is_redrawn_in_place_only_on_a_terminal():
    data = b"start\n\rstep 1/2\rstep 2/2\nend\npartial"
    assert _pumped(data, tty=False) == b"[3] start\n[3] step 2/2\n[3] end\n[3] partial\n"
    assert _pumped(data, tty=True) == b"[3] start\n\r[3] step 1/2\r[3] step 2/2\n[3] end\n[3] partial\n"
    gloo = b"[Gloo] Rank 0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3\n"
    assert _pumped(gloo + b"\n", tty=False) == b"[3] \n"  # the user's empty line stays
    assert _pumped(gloo, tty=False, verbose=True) == b"[3] " + gloo
