"""The matmul precision policy (issue 38 item 3): ``xla_trace(precision=...)``,
``partial_trace(precision=...)`` and $HLOTRACE_MATMUL_PRECISION reach every float32
dot_general and convolution of the lowered module, key the compiled entries (two precisions,
two executables, two disk-cache keys), leave the default module and results as they were,
and compiled results stay within the tolerance table's row of each precision."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim, runtime
from hlotrace.autodiff import GradManager
from hlotrace.errors import ArgumentError, ConfigError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.lowering import lower_trace
from hlotrace.ops.conv.forward import conv_reference
from hlotrace.runtime import compiler
from hlotrace.testing.tolerances import (
    MATMUL_PRECISION_TOLERANCES,
    assert_close,
    matmul_precision_tolerance,
)
from hlotrace.tools.cli import main as cli_main

PRECISIONS = ("highest", "high", "default")
ENV = "HLOTRACE_MATMUL_PRECISION"
# Every float32 dot_general / convolution carries its precision_config: dot_general prints it
# as `precision = [HIGH, HIGH]`, convolution as `precision_config = [#stablehlo<precision HIGH>, ...]`.
_LEVEL = r"(?:#stablehlo<precision )?(\w+)>?"
_CONFIG = re.compile(rf"precision(?:_config)? = \[{_LEVEL}, {_LEVEL}\]")
_HEAVY = re.compile(r"stablehlo\.(dot_general|convolution)\b")


@pytest.fixture(autouse=True)
def _no_precision_variable(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def _array(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _layer(x, w, k):
    """A convolution, then a matmul of its flattened result (both float32)."""
    y = F.conv2d(x, k, padding=1)
    return F.relu(y.reshape(x.shape[0], -1) @ w)


def _operands():
    return _array((4, 8, 6, 6), 0), _array((8 * 6 * 6, 64), 1), _array((8, 8, 3, 3), 2)


def _configs(text: str) -> list[str]:
    """The precision of every dot_general and convolution of ``text``, one per op."""
    heavy = [line for line in text.splitlines() if _HEAVY.search(line)]
    found = []
    for line in heavy:
        match = _CONFIG.search(line)
        assert match and match.group(1) == match.group(2), f"no precision config, or two different ones: {line}"
        found.append(match.group(1))
    return found


def _expected(x, w, k):
    y = conv_reference(
        x.astype(np.float64), k.astype(np.float64), stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1
    )
    return y.reshape(x.shape[0], -1) @ w.astype(np.float64)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_precision_reaches_every_dot_and_convolution(precision):
    step = xla_trace(_layer, precision=precision)
    step(*map(ht.tensor, _operands()))
    for text in (step.stablehlo_text, step.optimized_text):
        configs = _configs(text)
        assert len(configs) == 2 and set(configs) == {precision.upper()}


def test_the_default_is_highest_as_before_in_text_and_bits():
    """Unset, the module is the one precision="highest" gives (what every dot carried before
    the option existed), and so are the results of a training step, bit for bit."""
    operands = [ht.tensor(a) for a in _operands()]
    plain, highest = xla_trace(_layer), xla_trace(_layer, precision="highest")
    plain(*operands), highest(*operands)
    assert plain.stablehlo_text == highest.stablehlo_text
    assert set(_configs(plain.stablehlo_text)) == {"HIGHEST"}

    losses, states = [], []
    for precision in (None, "highest"):
        nn.init.seed(0)
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt, gm = optim.SGD(net.parameters(), lr=0.1), GradManager().attach(net.parameters())

        @xla_trace(precision=precision)
        def step(x, y, *, net, opt, gm):
            with gm:
                loss = F.cross_entropy(net(x), y)
                gm.backward(loss)
            opt.step().clear_grad()
            return loss

        rng = np.random.default_rng(0)
        run = [
            step(
                ht.tensor(rng.standard_normal((16, 8)).astype(np.float32)),
                ht.tensor(rng.integers(0, 4, 16)),
                net=net,
                opt=opt,
                gm=gm,
            ).numpy()
            for _ in range(3)
        ]
        losses.append(np.array(run))
        states.append([p.numpy() for p in net.parameters()])
    np.testing.assert_array_equal(losses[0], losses[1])
    for a, b in zip(*states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_lower_trace_keeps_highest_whatever_the_variable(monkeypatch):
    monkeypatch.setenv(ENV, "default")
    step = xla_trace(_layer)
    step(*map(ht.tensor, _operands()))
    assert set(_configs(step.stablehlo_text)) == {"DEFAULT"}
    # lower_trace (the tools, the device engine's one-op executables) lowers at "highest"
    # unless asked: eager ops keep comparing with NumPy.
    assert set(_configs(lower_trace(step.trace).text())) == {"HIGHEST"}
    assert set(_configs(lower_trace(step.trace, precision="high").text())) == {"HIGH"}
    with pytest.raises(ArgumentError, match="precision='fast'"):
        lower_trace(step.trace, precision="fast")


def test_the_variable_is_read_per_call_and_keys_the_entries(monkeypatch):
    """Changing $HLOTRACE_MATMUL_PRECISION between calls compiles again (hot path included), and
    setting it back finds the first entry; an explicit precision= wins over it."""
    operands = [ht.tensor(a) for a in _operands()]
    step = xla_trace(_layer)
    step(*operands)
    first = step(*operands).numpy()  # compiled; the hot path now holds the "highest" entry
    monkeypatch.setenv(ENV, "Default")
    step(*operands)
    assert step.cache_size == 2 and set(_configs(step.stablehlo_text)) == {"DEFAULT"}
    step(*operands)
    monkeypatch.delenv(ENV)
    np.testing.assert_array_equal(step(*operands).numpy(), first)
    assert step.cache_size == 2
    assert [set(_configs(e.lowered.text())) for e in step.entries()] == [{"HIGHEST"}, {"DEFAULT"}]

    monkeypatch.setenv(ENV, "high")
    pinned = xla_trace(_layer, precision="highest")
    pinned(*operands)
    assert set(_configs(pinned.stablehlo_text)) == {"HIGHEST"}

    monkeypatch.setenv(ENV, "fastest")
    with pytest.raises(ConfigError, match="HLOTRACE_MATMUL_PRECISION='fastest': expected highest, high or default"):
        xla_trace(_layer)(*operands)


def test_two_precisions_are_two_executables_and_two_disk_cache_keys(monkeypatch, tmp_path):
    monkeypatch.setenv("HLOTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "EXECUTABLES", collections.OrderedDict())
    operands = [ht.tensor(a) for a in _operands()]
    steps = [xla_trace(_layer, precision=p) for p in ("highest", "default")]
    for step in steps:
        step(*operands)
    assert steps[0].executable is not steps[1].executable
    assert len(compiler.EXECUTABLES) == 2
    texts = [s.optimized_text for s in steps]
    avals = steps[0].optimized.in_avals, steps[0].optimized.out_avals
    pjrt = runtime.client()
    device = pjrt.devices()[0]
    disk = [compiler.disk_cache_key(pjrt, t, *avals, device) for t in texts]
    assert disk[0] != disk[1] and disk[0]["module_sha256"] != disk[1]["module_sha256"]
    memory = [compiler.cache_key(t, *avals, device, ()) for t in texts]
    assert memory[0] != memory[1]


def test_lower_ahead_of_time_uses_the_functions_precision(monkeypatch):
    monkeypatch.setenv(ENV, "high")
    x, w, k = map(ht.tensor, _operands())
    pinned = xla_trace(_layer, precision="default")
    assert set(_configs(pinned.lower(x, w, k).as_text())) == {"DEFAULT"}
    compiled = pinned.lower(x, w, k).compile()
    compiled(x, w, k)
    assert pinned.cache_size == 1
    pinned(x, w, k)
    assert pinned.cache_size == 1  # the call found the entry lowered ahead of time
    assert set(_configs(xla_trace(_layer).lower(x, w, k).as_text())) == {"HIGH"}


def test_partial_trace_takes_the_precision_for_both_executables():
    x, w, k = (ht.tensor(a) for a in _operands())
    part = partial_trace(_layer, precision="default")
    gm = GradManager().attach([w])
    with gm:
        loss = F.sum(part(x, w, k))
        gm.backward(loss)
    assert set(_configs(part.forward.stablehlo_text)) == {"DEFAULT"}
    assert set(_configs(part.backward.stablehlo_text)) == {"DEFAULT"}


@pytest.mark.parametrize("bad", ["fast", "HIGHEST ", 2, "tf32"])
def test_a_bad_precision_is_refused_at_decoration(bad):
    with pytest.raises(ArgumentError, match="precision="):
        xla_trace(_layer, precision=bad)
    with pytest.raises(ArgumentError, match="precision="):
        partial_trace(precision=bad)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_compiled_results_stay_within_the_precision_row(precision):
    """Each precision against the float64 reference, within its row of the tolerance table. On
    the CPU all three are float32 computations: the results are bitwise those of "highest"."""
    arrays = _operands()
    step = xla_trace(_layer, precision=precision)
    x, w, k = map(ht.tensor, arrays)
    step(x, w, k)
    got = step(x, w, k).numpy()
    expected = np.maximum(_expected(*arrays), 0.0)
    magnitudes = _expected(*(np.abs(a) for a in arrays))
    platform = runtime.platform_name()
    assert_close(got, expected.astype(np.float32), matmul_precision_tolerance(precision, platform, magnitudes))
    if platform == "cpu":
        highest = xla_trace(_layer, precision="highest")
        highest(x, w, k)
        np.testing.assert_array_equal(got, highest(x, w, k).numpy())


def _tf32(a: np.ndarray) -> np.ndarray:
    """``a`` with its float32 mantissa truncated to TF32's 10 explicit bits."""
    bits = a.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


@pytest.mark.parametrize("precision", ["high", "default"])
def test_the_gpu_rows_hold_for_tf32_emulated_in_numpy(precision):
    """No GPU here: the GPU rows are checked against TF32 emulated in NumPy (operands truncated
    to 10 mantissa bits, products summed in float64), on operands of both signs (sums that
    cancel) and on positive ones (every truncation errs the same way). bfloat16's 7 bits break
    the row there: it is not looser than TF32 needs."""
    for arrays in (_operands(), [np.abs(a) for a in _operands()]):
        magnitudes = _expected(*(np.abs(a) for a in arrays))
        tolerance = matmul_precision_tolerance(precision, "cuda", magnitudes)
        assert_close(_expected(*map(_tf32, arrays)), _expected(*arrays), tolerance)
    bfloat16 = [(a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32) for a in arrays]
    with pytest.raises(AssertionError, match="elements differ"):
        assert_close(_expected(*bfloat16), _expected(*arrays), tolerance)
    assert MATMUL_PRECISION_TOLERANCES[(precision, None)].reason


def test_hlotrace_lower_prints_the_precision(tmp_path, capsys, monkeypatch):
    source = tmp_path / "model.py"
    source.write_text("import hlotrace.functional as F\n\n\ndef layer(x, w):\n    return F.relu(x @ w)\n")
    command = ["lower", f"{source}:layer", "-i", "f32[4,8]", "-i", "f32[8,3]"]
    assert cli_main([*command, "--precision", "default"]) == 0
    out, err = capsys.readouterr()
    assert set(_configs(out)) == {"DEFAULT"} and err.rstrip().endswith("; matmul precision default")
    assert cli_main(command) == 0  # --precision set the variable for its own run only
    out, err = capsys.readouterr()
    assert set(_configs(out)) == {"HIGHEST"} and err.rstrip().endswith("; matmul precision highest")
    monkeypatch.setenv(ENV, "high")
    assert cli_main(command) == 0
    out, err = capsys.readouterr()
    assert set(_configs(out)) == {"HIGH"} and err.rstrip().endswith("; matmul precision high")
    # --setup records through step.lower(...): the same setting reaches it.
    source.write_text(
        source.read_text() + "\n\ndef make():\n    import numpy as np\n    import hlotrace as ht\n\n"
        "    return (ht.tensor(np.ones((4, 8), 'float32')), ht.tensor(np.ones((8, 3), 'float32'))), {}\n"
    )
    assert cli_main(["lower", f"{source}:layer", "--setup", f"{source}:make", "--precision", "default"]) == 0
    out, err = capsys.readouterr()
    assert set(_configs(out)) == {"DEFAULT"} and err.rstrip().endswith("; matmul precision default")


def test_hlotrace_lower_keeps_a_decorated_functions_precision(tmp_path, capsys):
    source = tmp_path / "model.py"
    source.write_text(
        "import hlotrace.functional as F\nfrom hlotrace import xla_trace\n\n\n"
        "@xla_trace(precision='default')\ndef layer(x, w):\n    return F.relu(x @ w)\n"
    )
    assert cli_main(["lower", f"{source}:layer", "-i", "f32[4,8]", "-i", "f32[8,3]"]) == 0
    out, _ = capsys.readouterr()
    assert set(_configs(out)) == {"DEFAULT"}
