"""``--setup FILE.py:FACTORY`` and ``--static NAME=VALUE``: the commands on a real training step.

Generated over the commands whose parser takes ``--setup``: each inspects an ``xla_trace``'d
MLP step (net, AdamW, GradManager passed as keyword arguments) on the factory's arguments
and shows what that command shows of it; none of them changes the factory's parameters
(the step is recorded from shapes: hlotrace.aot). The malformed --setup/--static values are
in test_cli_bad_inputs.py's generated table.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pytest

from hlotrace.tools.cli import build_parser, main

STEP = """\
import numpy as np

import hlotrace as ht
import hlotrace.functional as F
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.jit import xla_trace

MADE = []  # what make() built, for the test to look at afterwards


@xla_trace
def train_step(data, label, *, net, opt, gm, scale=1.0):
    with gm:
        loss = F.cross_entropy(net(data), label) * scale
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def make():
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = optim.AdamW(net.parameters(), lr=1e-3)
    gm = GradManager().attach(net.parameters())
    rng = np.random.default_rng(0)
    x = ht.tensor(rng.standard_normal((4, 8)).astype("float32"))
    y = ht.tensor(rng.integers(0, 3, 4).astype("int32"))
    MADE.append({name: p.numpy().copy() for name, p in net.named_parameters()})
    MADE.append(net)
    return (x, y), {"net": net, "opt": opt, "gm": gm}
"""


def _setup_commands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(name for name, p in sub.choices.items() if any(a.dest == "setup" for a in p._actions))


def test_the_commands_that_take_setup():
    assert _setup_commands() == ["explain", "graph", "lower", "show", "stages"]


# Per command: extra options and what its output (stdout, or the file it writes) must hold.
EXPECT = {
    "lower": ([], ["module @jit_train_step", "tf.aliasing_output", "stablehlo.dot_general"]),
    "show": ([], ["trace train_step(", "matmul"]),
    "stages": (["--passes", "cse"], ["==== 00 trace", "after cse", "xla optimized"]),
    "explain": ([], ["aliasing (donated input -> the output written into its buffer): in"]),
    "graph": (["-o", "@TMP/g.html"], ["<svg", "matmul"]),
}


@pytest.mark.parametrize("command", _setup_commands())
def test_each_command_inspects_a_training_step_made_by_a_factory(command, tmp_path, capsys, monkeypatch):
    module_name = f"setup_step_{command}"
    path = tmp_path / f"{module_name}.py"
    path.write_text(STEP)
    monkeypatch.chdir(tmp_path)
    options, shown = EXPECT[command]
    options = [o.replace("@TMP", str(tmp_path)) for o in options]
    status = main([command, f"{path}:train_step", "--setup", f"{path}:make", *options])
    out, err = capsys.readouterr()
    assert status == 0, err
    if command == "graph":
        out = (tmp_path / "g.html").read_text()
    for fragment in shown:
        assert fragment in out, (fragment, out[:2000])
    if command == "explain":  # the step's in-place updates: every parameter and AdamW state donated
        assert "aliasing (donated input -> the output written into its buffer): none" not in out
    if command == "lower":
        assert "train_step(f32[4,8], i32[4], net=Sequential, opt=AdamW, gm=GradManager)" in err
    # Recorded from shapes: the factory's parameters are as it made them.
    module = sys.modules[module_name]
    before, net = module.MADE
    for name, parameter in net.named_parameters():
        np.testing.assert_array_equal(parameter.numpy(), before[name])


def test_a_separate_setup_file_and_static_values(tmp_path, capsys):
    (tmp_path / "model_for_setup.py").write_text(STEP)
    (tmp_path / "make_args.py").write_text(
        "from model_for_setup import make\n\n\ndef batch():\n    args, kwargs = make()\n    return list(args), kwargs\n"
    )
    texts = []
    for scale in ("0.25", "4"):
        status = main(
            [
                "lower",
                f"{tmp_path}/model_for_setup.py:train_step",
                "--setup",
                f"{tmp_path}/make_args.py:batch",
                "--static",
                f"scale={scale}",
                "--no-locations",
            ]
        )
        out, err = capsys.readouterr()
        assert status == 0, err
        assert f"scale={scale}" in err
        texts.append(out)
    assert "2.500000e-01" in texts[0] and "4.000000e+00" in texts[1]


def test_static_values_with_random_inputs(tmp_path, capsys):
    (tmp_path / "powers.py").write_text("def f(x, *, k=1, mode='add'):\n    return x * k if mode == 'mul' else x + k\n")
    status = main(
        [
            "lower",
            f"{tmp_path}/powers.py:f",
            "-i",
            "f32[3]",
            "--static",
            "k=7",
            "--static",
            "mode=mul",
            "--no-locations",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "stablehlo.multiply" in out and "7.000000e+00" in out
    assert "k=7" in err and "mode=mul" in err
