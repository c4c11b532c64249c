"""The SPMD benchmark's jax peers still run and agree with hlotrace's steps.

Benchmarks run by hand and rarely, so a peer that drifted from a helper it shares fails
only when someone next runs it: bench_spmd's MLP pair kept calling bench_train's jax step
with the arguments it took before that step gained per-parameter step counts. Here each
pair of ``benchmarks/bench_spmd.py`` (whose jax steps are bench_train's and bench_models')
runs its three checked steps (hlotrace's loss against jax's) on a 2-device mesh.
"""

import os
import sys
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_spmd():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    with mock.patch.dict(os.environ):  # its import sets HLOTRACE_CPU_DEVICES when unset
        from benchmarks import bench_spmd
    return bench_spmd


@pytest.mark.parametrize("pair", ["_mlp_pair", "_transformer_pair"])
def test_the_data_parallel_pairs_agree_for_three_steps(bench_spmd, devices, pair):
    hlotrace_call, jax_call = getattr(bench_spmd, pair)(devices[:2])
    bench_spmd._check(pair, hlotrace_call, jax_call)
