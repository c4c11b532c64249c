"""benchmarks/program_ab.py still builds and runs its three executables.

It is run by hand when a training step is slower than jax.jit's, to tell the program from the
call path apart (BENCHMARKS.md, seventh session); a drifted helper would otherwise surface
only then.
"""

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_program_ab_runs_hlotraces_and_jaxs_executables(capsys):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks import program_ab

    result = program_ab.main(["--repeat", "1"])
    times = {k: v for k, v in result.items() if k != "bench"}
    assert len(times) == 3 and all(math.isfinite(t) and t > 0 for t in times.values())
    assert "vol. switches/call" in capsys.readouterr().out
