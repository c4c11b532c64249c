"""Malformed input to the public API is one clear hlotrace error (issue 37, item 5).

Every case below calls a public function or constructor with a wrong type, size, path or
spec and expects an :class:`HlotraceError` whose one-line message names the bad value and
what was expected; an :class:`ArgumentError` also names the caller's line (this file). The
cases are generated: a table per API, and for ``hlotrace.nn`` every Module class found in
``dir(hlotrace.nn)`` gets each of its size parameters replaced by bad sizes -- a new module
is covered as soon as it is exported (and fails here until its sizes are checked, or until
``GOOD`` names a valid value for a new required parameter).
"""

from __future__ import annotations

import inspect
import os
import zipfile
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import distributed as dist
from hlotrace import nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.dispatch import apply
from hlotrace.distributed import launch
from hlotrace.errors import ArgumentError, HlotraceError
from hlotrace.jit import partial_trace, xla_trace

HERE = os.path.basename(__file__)


class Case(NamedTuple):
    name: str
    call: Callable  # call(tmp_path) -> anything; must raise
    says: tuple[str, ...]  # fragments the message must hold: the bad value, what was expected


def _assert_one_clear_error(call: Callable, says, tmp_path) -> HlotraceError:
    with pytest.raises(HlotraceError) as info:
        call(tmp_path)
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    for fragment in says:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    for noise in ("allow_pickle", "Traceback", "object is not iterable", "negative dimensions"):
        assert noise not in message, message
    if isinstance(info.value, ArgumentError):  # the user's line, where there is one: this file
        assert f"(at {__file__}:" in message and HERE in message, message
    return info.value


def _x(*shape):
    return ht.tensor(np.ones(shape or (2,), np.float32))


def _mesh():
    return dist.Mesh((1,), ("data",), devices=dist.devices()[:1])


def _identity(x):
    return x


# -- tables: one per API ----------------------------------------------------------------------

TRACING = [
    Case("xla_trace(5)", lambda tmp: xla_trace(5), ("xla_trace: fn=5", "expected a function")),
    Case("xla_trace('step')", lambda tmp: xla_trace("step"), ("fn='step'",)),
    Case("partial_trace(5)", lambda tmp: partial_trace(5), ("partial_trace: fn=5",)),
    Case("first_call", lambda tmp: xla_trace(_identity, first_call="bogus"), ("'bogus'", "'eager' or 'compiled'")),
    Case("capture_as_const", lambda tmp: xla_trace(_identity, capture_as_const="yes"), ("'yes'",)),
    Case("passes", lambda tmp: xla_trace(_identity, passes="nope"), ("'nope'", "unknown pass")),
    # An unknown or unavailable platform fails at decoration (not at the first call), in
    # every spelling of the decorator.
    Case("platform tpu", lambda tmp: xla_trace(_identity, platform="tpu"), ("platform='tpu'", "'cpu', 'cuda'")),
    Case("@xla_trace(platform=tpu)", lambda tmp: xla_trace(platform="tpu"), ("'tpu'", "cannot provide")),
    Case("platform unknown", lambda tmp: xla_trace(_identity, platform="nope"), ("'nope'", "register_plugin")),
    Case("platform 5", lambda tmp: xla_trace(_identity, platform=5), ("platform=5", "'cpu', 'cuda'")),
    Case("partial_trace tpu", lambda tmp: partial_trace(_identity, platform="tpu"), ("'tpu'", "'cpu', 'cuda'")),
]

MESHES = [
    Case(
        "devices of ints", lambda tmp: dist.Mesh((2,), ("data",), devices=[0, 1]), ("devices=[0, 1]", "dist.devices()")
    ),
    Case("devices=5", lambda tmp: dist.Mesh((1,), ("data",), devices=5), ("devices=5",)),
    Case("no shape", lambda tmp: dist.Mesh(devices=dist.devices()), ("shape=None", "positive ints")),
    Case("shape 0", lambda tmp: dist.Mesh((0,), ("data",)), ("shape=(0,)",)),
    Case("shape str", lambda tmp: dist.Mesh("4", ("data",)), ("shape='4'",)),
    Case("names count", lambda tmp: dist.Mesh((1,), ("a", "b")), ("axis_names=('a', 'b')", "1 axis name")),
    Case("names empty", lambda tmp: dist.Mesh((1,), ("",)), ("axis_names=('',)", "non-empty")),
    Case("names int", lambda tmp: dist.Mesh((1,), 5), ("axis_names=5",)),
    Case("too many devices", lambda tmp: dist.Mesh((10_000,), ("data",)), ("needs 10000 devices",)),
    Case("P(3)", lambda tmp: dist.P(3), ("P: entry=3", "axis name")),
    Case("P(1.5)", lambda tmp: dist.P("data", 1.5), ("entry=1.5",)),
    Case("NamedSharding mesh", lambda tmp: dist.NamedSharding("mesh"), ("mesh='mesh'", "dist.Mesh")),
    Case("NamedSharding axis", lambda tmp: dist.NamedSharding(_mesh(), dist.P("batch")), ("'batch'", "('data',)")),
    Case("NamedSharding spec=5", lambda tmp: dist.NamedSharding(_mesh(), 5), ("spec=5",)),
]

PLACEMENT = [
    Case("shard unknown axis name", lambda tmp: dist.shard(_x(4), _mesh(), "batch"), ("'batch'", "('data',)")),
    Case("shard mesh str", lambda tmp: dist.shard(_x(4), "mesh", "data"), ("mesh='mesh'", "dist.Mesh")),
    Case("shard spec=5", lambda tmp: dist.shard(_x(4), _mesh(), 5), ("spec=5", "dist.P")),
    Case("shard axis twice", lambda tmp: dist.shard(_x(4, 4), _mesh(), ("data", "data")), ("used twice",)),
    Case("shard both", lambda tmp: dist.shard(_x(4), dist.NamedSharding(_mesh()), "data"), ("spec='data'",)),
    Case(
        "shard_module unmatched",
        lambda tmp: dist.shard_module(nn.Linear(2, 2), _mesh(), {"weight": dist.P(), "fc9.*": dist.P()}),
        ("plan=['fc9.*']", "match none", "weight, bias"),
    ),
    Case(
        "shard_module list", lambda tmp: dist.shard_module(nn.Linear(2, 2), _mesh(), ["weight"]), ("plan=['weight']",)
    ),
]

OPS = [
    Case("apply unknown name", lambda tmp: apply("ad", _x(), _x()), ("apply: op='ad'", "add")),
    Case("apply 5", lambda tmp: apply(5, _x()), ("op=5", "OpDef")),
    Case("apply None", lambda tmp: apply(None, _x()), ("op=None",)),
    Case("tensor of str", lambda tmp: ht.tensor("abc"), ("str", "not supported")),
    Case("tensor dtype", lambda tmp: ht.tensor([1.0], dtype="float99"), ("'float99'",)),
]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def _foreign_zip(tmp):
    with zipfile.ZipFile(tmp / "other.zip", "w") as archive:
        archive.writestr("notes.txt", "hello")
    return tmp / "other.zip"


def _npy(tmp):
    np.save(tmp / "a.npy", np.ones(3))
    return tmp / "a.npy"


FILES = [
    Case("save missing dir", lambda tmp: ht.save({}, tmp / "nope" / "c.npz"), ("c.npz'", "nope does not exist")),
    Case("save into a directory", lambda tmp: ht.save({}, tmp), ("save: path=", "names a directory")),
    Case("save path=5", lambda tmp: ht.save({}, 5), ("save: path=5",)),
    Case("load garbage", lambda tmp: ht.load(_write(tmp / "g.bin", b"\x00\xff" * 20)), ("g.bin'", "hlotrace.save")),
    Case("load text", lambda tmp: ht.load(_write(tmp / "t.txt", b"hello")), ("t.txt'", "not a zip archive")),
    Case("load .npy", lambda tmp: ht.load(_npy(tmp)), ("a.npy'", "np.load")),
    Case("load foreign zip", lambda tmp: ht.load(_foreign_zip(tmp)), ("other.zip'", "notes.txt")),
    Case("load directory", lambda tmp: ht.load(tmp), ("is a directory",)),
    Case("load missing", lambda tmp: ht.load(tmp / "missing.npz"), ("missing.npz'", "no such file")),
    Case("load path=5", lambda tmp: ht.load(5), ("load: path=5",)),
    Case("load_state_dict(5)", lambda tmp: nn.Linear(2, 2).load_state_dict(5), ("state_dict=5",)),
]

TRAINING = [
    Case("SGD(5)", lambda tmp: optim.SGD(5, lr=0.1), ("optim.SGD: params=5", "iterable")),
    Case("SGD lr", lambda tmp: optim.SGD(nn.Linear(2, 2).parameters(), lr=-1), ("lr", "-1")),
    Case("Adam lr str", lambda tmp: optim.Adam(nn.Linear(2, 2).parameters(), lr="x"), ("lr", "'x'")),
    Case("Adam betas", lambda tmp: optim.Adam(nn.Linear(2, 2).parameters(), betas=(2, 0.9)), ("betas[0]", "2")),
    Case("GradManager.attach(5)", lambda tmp: GradManager().attach(5), ("GradManager.attach: params=5",)),
]

TABLES = {
    "tracing": TRACING,
    "meshes": MESHES,
    "placement": PLACEMENT,
    "ops": OPS,
    "files": FILES,
    "training": TRAINING,
}
API_CASES = [pytest.param(case, id=f"{table}:{case.name}") for table, cases in TABLES.items() for case in cases]


@pytest.mark.parametrize("case", API_CASES)
def test_public_api_bad_input_is_one_clear_error(case, tmp_path):
    _assert_one_clear_error(case.call, case.says, tmp_path)


def test_the_decisions_for_strings_where_objects_go():
    """A bare axis name is the spec ``P(name)``; an op's name looks the op up."""
    mesh = _mesh()
    assert dist.shard(_x(4), mesh, "data").sharding == dist.NamedSharding(mesh, dist.P("data"))
    assert dist.NamedSharding(mesh, "data") == dist.NamedSharding(mesh, dist.P("data"))
    np.testing.assert_array_equal(apply("add", _x(), 1.0).numpy(), [2.0, 2.0])


def test_an_unavailable_platform_fails_at_decoration_only_when_it_is_unavailable(monkeypatch):
    """'cuda' is refused at decoration exactly when no CUDA PJRT plugin is installed; 'cpu'
    and None always decorate (nothing is compiled or loaded yet)."""
    from hlotrace import platforms

    assert xla_trace(_identity, platform="cpu").platform == "cpu"
    assert xla_trace(_identity).platform is None
    monkeypatch.setattr(platforms, "cuda_plugin_installed", lambda: False)
    _assert_one_clear_error(lambda tmp: xla_trace(_identity, platform="cuda"), ("'cuda'", "no CUDA PJRT plugin"), None)
    monkeypatch.setattr(platforms, "cuda_plugin_installed", lambda: True)
    assert xla_trace(_identity, platform="cuda").platform == "cuda"  # decorates; the call would load it


# -- the launcher: a usage error, exit status 2, before any process starts -----------------------


@pytest.mark.parametrize("coordinator", ["nonsense", "host:", ":8476", "host:0", "host:99999", "host:port"])
def test_the_launcher_refuses_a_coordinator_that_is_not_host_port(coordinator, tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    with pytest.raises(SystemExit) as info:
        launch.main(["--coordinator", coordinator, "--nproc", "1", str(script)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert f"--coordinator {coordinator!r}: expected HOST:PORT" in err[-1], err


# -- hlotrace.nn: generated from dir(nn) ---------------------------------------------------------

# A valid value per required constructor parameter (factories: each case builds fresh ones).
GOOD: dict[str, Callable] = {
    "in_features": lambda: 4,
    "out_features": lambda: 6,
    "in_channels": lambda: 4,
    "out_channels": lambda: 6,
    "kernel_size": lambda: 3,
    "num_embeddings": lambda: 10,
    "embedding_dim": lambda: 4,
    "embed_dim": lambda: 8,
    "num_heads": lambda: 2,
    "num_features": lambda: 4,
    "num_groups": lambda: 2,
    "num_channels": lambda: 4,
    "normalized_shape": lambda: 4,
    "output_size": lambda: 2,
    "upscale_factor": lambda: 2,
    "downscale_factor": lambda: 2,
    "d_model": lambda: 8,
    "nhead": lambda: 2,
    "num_layers": lambda: 2,
    "n": lambda: 2,
    "dim": lambda: 1,
    "unflattened_size": lambda: (2, 2),
    "make_block": lambda: lambda: nn.Linear(4, 4),
    "encoder_layer": lambda: nn.TransformerEncoderLayer(8, 2, 16),
    "decoder_layer": lambda: nn.TransformerDecoderLayer(8, 2, 16),
}
# Modules that need an optional argument to build (one of two that are both optional).
GOOD_OPTIONAL: dict[str, dict] = {"Upsample": {"scale_factor": 2}}
# Constructor parameters that are sizes (>= 1), and those that may be 0 (paddings).
SIZES = {
    "in_features", "out_features", "in_channels", "out_channels", "kernel_size", "stride", "dilation",
    "groups", "num_embeddings", "embedding_dim", "embed_dim", "num_heads", "num_features", "num_groups",
    "num_channels", "normalized_shape", "output_size", "upscale_factor", "downscale_factor", "d_model",
    "nhead", "dim_feedforward", "num_layers", "n", "scale_factor", "num_parameters",
}  # fmt: skip
MAY_BE_ZERO = {"padding", "output_padding"}
BAD_SIZES = (-3, 0, "4", 2.5, True, None)
# Other options checked when the module is built, with a value each must refuse.
BAD_OPTIONS = {"reduction": "bogus", "eps": -1.0, "momentum": 1.5, "p": 1.5, "mode": "bicubic", "activation": "swish"}
# Options whose None means "not given" (stride: the kernel size; eps: the dtype's epsilon).
NONE_ALLOWED = {("stride", None), ("eps", None), ("output_size", None)}
FRACTION_ALLOWED = {("scale_factor", 2.5)}  # nn.Upsample takes PyTorch's fractional factors


def _module_classes():
    return sorted(
        (name, obj)
        for name, obj in vars(nn).items()
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and obj is not nn.Module and not name.startswith("_")
    )


def _parameters(cls):
    signature = inspect.signature(cls.__init__)
    return [p for p in list(signature.parameters.values())[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _good_arguments(cls) -> dict:
    required = {p.name: GOOD[p.name]() for p in _parameters(cls) if p.default is p.empty and p.name in GOOD}
    return {**required, **GOOD_OPTIONAL.get(cls.__name__, {})}


def _nn_cases():
    cases = []
    for name, cls in _module_classes():
        for parameter in _parameters(cls):
            if parameter.name in SIZES or parameter.name in MAY_BE_ZERO:
                bad_values = [v for v in BAD_SIZES if not (parameter.name in MAY_BE_ZERO and v == 0)]
            elif parameter.name in BAD_OPTIONS:
                bad_values = [BAD_OPTIONS[parameter.name]]
            else:
                continue
            for value in bad_values:
                if (parameter.name, value) in NONE_ALLOWED | FRACTION_ALLOWED or (
                    value is None and parameter.default is None
                ):
                    continue
                cases.append(pytest.param(cls, parameter.name, value, id=f"nn.{name}({parameter.name}={value!r})"))
    return cases


def test_every_nn_module_is_built_from_the_good_values():
    """The generated cases start from a module that builds: a bad value is the only fault."""
    for name, cls in _module_classes():
        missing = [p.name for p in _parameters(cls) if p.default is p.empty and p.name not in GOOD]
        assert not missing, f"nn.{name}: add a valid value for {missing} to GOOD in this file"
        assert isinstance(cls(**_good_arguments(cls)), nn.Module)


def test_the_nn_cases_cover_the_size_parameters():
    covered = {case.values[1] for case in _nn_cases()}
    assert {"in_features", "out_features", "kernel_size", "num_features", "d_model", "reduction"} <= covered


@pytest.mark.parametrize(("cls", "parameter", "value"), _nn_cases())
def test_nn_constructor_refuses_a_bad_size_naming_it(cls, parameter, value, tmp_path):
    arguments = {**_good_arguments(cls), parameter: value}
    _assert_one_clear_error(lambda tmp: cls(**arguments), (f"{parameter}={value!r}", "expected"), tmp_path)


def test_nn_linear_0_minus_3_names_the_first_bad_size(tmp_path):
    error = _assert_one_clear_error(lambda tmp: nn.Linear(0, -3), ("nn.Linear: in_features=0",), tmp_path)
    assert isinstance(error, ArgumentError) and isinstance(error, ValueError)  # Python's conventions still catch it
