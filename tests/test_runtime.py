"""Runtime: platform choice, lazy jax import, compile cache, device-resident outputs."""

import os
import subprocess
import sys

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import runtime
from hlotrace.errors import BackendError
from hlotrace.jit import xla_trace
from hlotrace.runtime import compiler


def test_eager_use_does_not_import_jax():
    code = (
        "import sys, hlotrace as ht, hlotrace.functional as F\n"
        "x = ht.tensor([[1.0, 2.0]])\n"
        "F.softmax(x @ x.T, axis=-1).numpy()\n"
        "assert 'jax' not in sys.modules and 'jaxlib' not in sys.modules, 'jax imported eagerly'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "HLOTRACE_EAGER": "numpy"})


def test_the_default_engine_loads_jax_at_the_first_op_not_at_import():
    code = (
        "import sys, hlotrace as ht, hlotrace.functional as F\n"
        "from hlotrace.engines import current_eager_engine\nassert current_eager_engine() == 'device'\n"
        "x = ht.tensor([[1.0, 2.0]])\n"
        "assert 'jax' not in sys.modules and 'jaxlib' not in sys.modules, 'jax imported by import hlotrace'\n"
        "y = F.softmax(x @ x.T, axis=-1)\n"
        "assert y._device is not None and 'jaxlib' in sys.modules\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HLOTRACE_EAGER"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_platform_env_var_is_validated(monkeypatch):
    monkeypatch.setenv("HLOTRACE_PLATFORM", "tpu9000")
    monkeypatch.delenv("HLOTRACE_PJRT_PLUGIN", raising=False)
    with pytest.raises(BackendError, match="expected 'cpu', 'cuda', or a PJRT plugin's name"):
        runtime.client()


def test_forced_cpu_platform(monkeypatch):
    monkeypatch.setenv("HLOTRACE_PLATFORM", "cpu")
    assert runtime.platform_name() == "cpu"


def test_default_platform_is_cuda_when_present_else_cpu(monkeypatch):
    monkeypatch.delenv("HLOTRACE_PLATFORM", raising=False)
    assert runtime.platform_name() in ("cpu", "cuda")


def test_identical_modules_compile_once():
    def body(x):
        return x * 3.0 + 1.0

    first, second = xla_trace(body), xla_trace(body)
    x = ht.tensor(np.ones(5, "float32"))
    first(x)
    second(x)
    assert first.executable is second.executable  # same module text, same signature


def test_compile_failure_is_a_backend_error():
    text = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> { return %b : tensor<4xf32> }"
    with pytest.raises(BackendError, match="XLA failed to compile"):
        runtime.compile(text, [], [])


def test_the_compile_cache_is_bounded_and_keeps_the_recently_used(monkeypatch):
    import numpy as np

    from hlotrace import runtime
    from hlotrace.ops.registry import Aval

    monkeypatch.setattr(compiler, "COMPILE_CACHE_SIZE", 3)
    aval = [Aval((2,), np.dtype(np.float32))]

    def module(k):
        return (
            "func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
            f"  %c = stablehlo.constant dense<{k}.0> : tensor<2xf32>\n"
            "  %0 = stablehlo.add %a, %c : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}"
        )

    first = runtime.compile(module(1001), aval, aval)
    for k in range(1002, 1006):
        runtime.compile(module(k), aval, aval)
        assert runtime.compile(module(1001), aval, aval) is first  # used again: kept
    assert len(compiler.EXECUTABLES) <= 3
    out = first.run([first.to_device(0, np.ones(2, np.float32))])
    assert np.asarray(out[0]).tolist() == [1002.0, 1002.0]
