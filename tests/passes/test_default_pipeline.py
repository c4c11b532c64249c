"""The default pass pipeline per platform: the CPU adds ``layout`` after the common passes,
CUDA (and any other platform) runs the common ones; ``passes=`` and $HLOTRACE_PASSES
override it; the compiled entry's key holds the pipeline as resolved, so a changed default
compiles again; the command line resolves it the way a compiled call would."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.tools.explain_cmd as explain_cmd
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.jit import xla_trace
from hlotrace.passes import registry, selection
from hlotrace.passes.manager import resolve
from hlotrace.runtime import platform_name
from hlotrace.tools.cli import main

COMMON = passes.DEFAULT_PIPELINE


def _conv_relu(x, w):
    return F.relu(F.conv2d(x, w, padding=1))


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    return ht.tensor(x), ht.tensor(w)


def _ran(traced) -> list[str]:
    return [t.name for t in traced.optimized.pass_timings]


def test_each_platform_has_its_default():
    assert passes.default_pipeline("cpu") == f"{COMMON},layout"
    assert passes.default_pipeline("cuda") == passes.default_pipeline("gpu") == COMMON
    assert passes.default_pipeline("my_plugin") == passes.default_pipeline(None) == COMMON
    assert passes.platform_defaults() == {"cpu": f"{COMMON},layout", "cuda": COMMON}
    # The pipelines parse: a pass renamed or dropped fails here, not at a user's first call.
    for pipeline in passes.platform_defaults().values():
        assert passes.pipeline_text(passes.parse_pipeline(pipeline)) == pipeline


def test_a_compiled_call_on_the_cpu_runs_layout(monkeypatch):
    monkeypatch.delenv("HLOTRACE_PASSES", raising=False)
    x, w = _inputs()
    traced = xla_trace(_conv_relu, platform="cpu")
    out = traced(x, w)
    assert _ran(traced) == [*COMMON.split(","), "layout"]
    assert "stablehlo.transpose" in traced.optimized_text  # the convolution runs NHWC
    np.testing.assert_allclose(traced(x, w).numpy(), out.numpy(), rtol=1e-5, atol=1e-5)
    eager = xla_trace(_conv_relu, passes="")
    np.testing.assert_allclose(out.numpy(), eager(x, w).numpy(), rtol=1e-5, atol=1e-5)


def test_passes_and_the_variable_override_the_platform_default(monkeypatch):
    x, w = _inputs()
    given = xla_trace(_conv_relu, platform="cpu", passes="cse")
    given(x, w)
    assert _ran(given) == ["cse"]
    none = xla_trace(_conv_relu, platform="cpu", passes="")
    none(x, w)
    assert _ran(none) == []
    monkeypatch.setenv("HLOTRACE_PASSES", COMMON)  # the common default, spelled out: no layout
    common = xla_trace(_conv_relu, platform="cpu")
    common(x, w)
    assert _ran(common) == COMMON.split(",")
    assert common._pipeline() == COMMON


def test_a_changed_default_compiles_again(monkeypatch):
    monkeypatch.delenv("HLOTRACE_PASSES", raising=False)
    x, w = _inputs()
    traced = xla_trace(_conv_relu, platform="cpu")
    traced(x, w)
    traced(x=x, w=w)  # keyword arguments: the key of every call that is not positional Tensors
    assert traced.cache_size == 2 and "layout" in _ran(traced)
    monkeypatch.setitem(registry.PLATFORM_PASSES, "cpu", "")
    x2, w2 = _inputs(seed=1)  # host values: not the hot path's aval-keyed entries
    traced(x2, w2)
    traced(x=x2, w=w2)
    assert traced.cache_size == 4  # neither entry compiled under the old default was reused
    assert _ran(traced) == COMMON.split(",")


def test_the_platform_is_resolved_once_per_setting(monkeypatch):
    asked = []

    def name_platform(platform):
        asked.append(platform)
        return "cpu"

    monkeypatch.setattr(selection, "_PLATFORM_NAMES", {})
    monkeypatch.setenv("HLOTRACE_PLATFORM", "cpu")
    for _ in range(3):
        assert selection.call_pipeline(None, None, None, name_platform) == f"{COMMON},layout"
    assert asked == [None]
    assert selection.call_pipeline(b"cse", None, None, name_platform) == "cse"
    assert selection.call_pipeline(None, "", None, name_platform) == ""
    monkeypatch.setenv("HLOTRACE_PLATFORM", "cuda")  # another setting: asked again
    selection.call_pipeline(None, None, None, lambda p: asked.append(p) or "gpu")
    assert asked == [None, None]


def test_the_command_line_prints_each_platforms_default(capsys):
    assert main(["passes", "--default"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"cpu   {COMMON},layout", f"cuda  {COMMON}"]
    assert main(["passes", "--default", "--platform", "cpu"]) == 0
    assert capsys.readouterr().out.strip() == f"{COMMON},layout"
    assert main(["passes", "--default", "--platform", "cuda"]) == 0
    assert capsys.readouterr().out.strip() == COMMON
    assert main(["passes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["default_pipelines"] == passes.platform_defaults()
    assert main(["passes"]) == 0
    assert f"cpu   {COMMON},layout" in capsys.readouterr().out
    assert main(["passes", "--platform", "cpu"]) == 2


@pytest.mark.parametrize("command", ["stages", "explain"])
def test_the_inspecting_tools_run_the_platforms_default(command, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HLOTRACE_PASSES", raising=False)
    traced = xla_trace(_conv_relu, passes="")
    traced(*_inputs())
    path = str(tmp_path / "conv.trace.json")
    traced.trace.save(path)
    expected = passes.default_pipeline(platform_name("cpu"))
    if command == "stages":
        assert main(["stages", path, "--platform", "cpu", "-o", str(tmp_path / "st")]) == 0
        names = sorted(p.name for p in (tmp_path / "st").iterdir())
        assert any("layout" in n for n in names) and any("fuse-reductions" in n for n in names)
    else:
        seen, real = [], explain_cmd.explain
        monkeypatch.setattr(
            explain_cmd, "explain", lambda trace, pipeline, *a: seen.append(pipeline) or real(trace, pipeline, *a)
        )
        assert main(["explain", path, "--platform", "cpu", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["instructions"] and seen == [expected]
    assert resolve(None, "cpu") == expected
    monkeypatch.setenv("HLOTRACE_PASSES", "cse")
    assert resolve(None, "cpu") == "cse"
    assert resolve("", "cpu") == ""
