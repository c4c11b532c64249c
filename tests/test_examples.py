"""The training example runs end to end (few epochs) and learns."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "examples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_mlp_learns_the_digits(capsys):
    accuracy = _load("train_mlp").main(["--epochs", "3"])
    out = capsys.readouterr().out
    assert accuracy > 0.85, out
    assert "compiled executables for the step: 1" in out
    assert "steady-state step: compiled" in out


def test_train_cnn_learns_the_digits(capsys):
    accuracy = _load("train_cnn").main(["--epochs", "2"])
    out = capsys.readouterr().out
    assert accuracy > 0.85, out
    assert "compiled executables for the step: 1" in out


def test_train_transformer_learns_to_copy(capsys):
    accuracy = _load("train_transformer").main(["--steps", "200"])
    out = capsys.readouterr().out
    assert accuracy > 0.9, out
    assert "compiled executables for the step: 1" in out
