"""`hlotrace export`: a saved trace as a StableHLO portable artifact (VHLO bytecode) that
keeps fuse-elementwise's composites; one-line errors with exit status 2."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import runtime
from hlotrace.jit import xla_trace
from hlotrace.lowering import lower_trace
from hlotrace.runtime import jaxlib_compat
from hlotrace.testing.differential import assert_bitwise_equal, run_lowered
from hlotrace.tools.cli import load_trace, main


def _values():
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    x.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return x


@pytest.fixture
def saved_trace(tmp_path):
    traced = xla_trace(lambda x: F.softmax(x, axis=-1) * 2.0, passes="")
    traced(ht.tensor(_values()))
    path = str(tmp_path / "s.trace.json")
    traced.trace.save(path)
    return path


def test_export_writes_a_portable_artifact_that_keeps_the_composites(saved_trace, tmp_path, capsys):
    out = str(tmp_path / "s.mlirbc")
    assert main(["export", saved_trace, "-o", out]) == 0
    assert "1 composites" in capsys.readouterr().err
    with open(out, "rb") as f:
        data = f.read()
    ctx = jaxlib_compat.shared_context()
    module = jaxlib_compat.deserialize_portable_artifact(ctx, data)
    assert 'stablehlo.composite "hlotrace.softmax"' in str(module)
    # The artifact read back runs, bitwise equal to the unfused module.
    plain = lower_trace(load_trace(saved_trace))
    back = runtime.compile(str(module), plain.in_avals, plain.out_avals)
    outs = [np.asarray(b) for b in back.run([back.to_device(0, _values())])]
    assert_bitwise_equal(outs, run_lowered(plain, [_values()]), "exported artifact")
    assert main(["export", saved_trace, "-o", str(tmp_path / "s.mlir"), "--text", "--passes", ""]) == 0
    assert "stablehlo.composite" not in (tmp_path / "s.mlir").read_text()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--target", "0.9.0"], "cannot write StableHLO 0.9.0"),
        (["--target", "99.0.0"], "outside the versions"),
        (["--target", "one"], "not a version"),
        (["--passes", "nope"], "unknown pass 'nope'"),
    ],
)
def test_export_errors_are_one_line(saved_trace, tmp_path, capsys, argv, message):
    assert main(["export", saved_trace, "-o", str(tmp_path / "x.mlirbc"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.strip().splitlines()[-1].startswith("hlotrace: error:")


def test_export_needs_its_arguments(capsys, tmp_path):
    assert main(["export"]) == 2
    assert main(["export", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["export", "--versions"]) == 0


def test_export_rewrites_chlo_ops_and_the_artifact_runs_bitwise_equal(tmp_path, capsys):
    traced = xla_trace(lambda x: F.gelu(x) + F.gelu(x * 0.5, approximate="none"), passes="")
    traced(ht.tensor(_values()))
    assert "chlo." in traced.lowered.text()  # erf: VHLO cannot carry it as is
    saved, out = str(tmp_path / "g.trace.json"), str(tmp_path / "g.mlirbc")
    traced.trace.save(saved)
    assert main(["export", saved, "-o", out]) == 0
    with open(out, "rb") as f:
        module = jaxlib_compat.deserialize_portable_artifact(jaxlib_compat.shared_context(), f.read())
    assert str(module).count('stablehlo.composite "hlotrace.gelu"') == 2 and "chlo." not in str(module)
    plain = traced.lowered
    back = runtime.compile(str(module), plain.in_avals, plain.out_avals)
    outs = [np.asarray(b) for b in back.run([back.to_device(0, _values())])]
    assert_bitwise_equal(outs, run_lowered(plain, [_values()]), "exported GELU artifact")
