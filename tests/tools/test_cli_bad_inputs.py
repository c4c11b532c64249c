"""Every ``hlotrace`` command fed malformed input answers with one clear line.

The cases are generated from the argparse parser: each subcommand's positionals (missing,
wrong-kind, garbage files), each option by its kind (an int or float that is not one, or
out of range; a choice that is not one; a path that cannot be written; a malformed spec,
pipeline, mesh, module or op name) and each HLOTRACE_* variable the package reads. A new
command, option or variable without a known malformed value fails
``test_every_option_has_malformed_values`` until it gets one here.

Each case runs ``main([...])`` in-process and must exit with status 2, print exactly one
line on stderr, ``hlotrace: error: ...``, naming the bad value, and no traceback. A few
cases run the real program in a subprocess: output into a closed pipe, HLOTRACE_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlotrace import config
from hlotrace.tools.cli import build_parser, main

PROGRAM = "from hlotrace import functional as F\n\n\ndef f(x):\n    return F.exp(x) * 2.0\n"
# --setup's factories for PROGRAM's f: one good (make), the others each a mistake.
SETUP = """\
import numpy as np


def make():
    return (np.ones((2, 3), np.float32),), {}


def returns_five():
    return 5


def raises():
    raise ValueError("boom")


def too_many():
    return (1, 2, 3), {}


not_callable = 3
"""
INPUT = ["-i", "f32[2,3]"]

# -- what a valid call looks like, per positional (by dest) and per command ------------------

POSITIONAL_BASE = {
    "target": ["@PROG:f", *INPUT],
    "trace_file": ["@TRACE"],
    "file": ["@TRACE"],
    "a": ["@MLIR_A"],
    "b": ["@MLIR_B"],
    "action": ["show"],
}
# Options a command needs for the bad value of another one to be reached (and to stay quick).
COMMAND_BASE = {
    "show": ["--lower"],
    "graph": ["-o", "@TMP/g.html"],
    "export": ["-o", "@TMP/out.mlirbc"],
    "replay": ["--no-interpreter", "--passes", "cse"],
    "fuzz": ["--seconds", "30", "--programs", "1", "--jobs", "1", "--no-interpreter", "--passes", "", "--ops", "add"],
    "bisect": ["--window", "4"],
}

# -- malformed values ---------------------------------------------------------------------------

# Positionals: (argv replacing the positional's base, a fragment the error line must name).
POSITIONAL_BAD = {
    "target": [
        (["@TMP/missing.py:f", *INPUT], "missing.py"),
        (["@TMP:f", *INPUT], "is a directory"),
        (["@PROG:no_such_function", *INPUT], "no_such_function"),
        (["@PROG", *INPUT], "FILE.py:FUNC"),
        (["@SYNTAX:f", *INPUT], "syntax.py"),
        (["@GARBAGE_JSON"], "garbage.json"),
        (["@TMP/missing.json"], "missing.json"),
    ],
    "trace_file": [
        (["@TMP/missing.json"], "missing.json"),
        (["@TMP"], "directory"),
        (["@GARBAGE_JSON"], "garbage.json"),
        (["@WRONG_JSON"], "wrong.json"),
    ],
    "a": [
        (["@TMP/missing.mlir"], "missing.mlir"),
        (["@GARBAGE_MLIR"], "garbage.mlir"),
        (["@TMP"], "directories"),
    ],
    "action": [(["bogus"], "bogus")],
}
POSITIONAL_BAD["file"] = POSITIONAL_BAD["trace_file"]
POSITIONAL_BAD["b"] = POSITIONAL_BAD["a"]

UNWRITABLE = "@FILE/sub"  # below a regular file: no directory can be made there
# Options by dest: (values, the fragment each must name; None: the value itself).
OPTION_BAD = {
    "inputs": [("f32[4", None), ("q8[2]", "q8"), ("f32[-1]", "-1"), ("f32[100000,100000,100]", None)],
    "passes": [("nope", None), ("remat{policy=wrong}", "wrong")],
    "pipeline": [("nope", None)],
    "check": [("remat{policy=wrong}", "wrong"), ("cse{foo=1}", "foo")],
    "mesh": [("4x:data", None), ("2x2:data", None)],
    "imports": [("no_such_module_xyz", None)],
    "ops": [("no_such_op", None)],
    "trace_out": [(f"{UNWRITABLE}/t.json", "sub")],
    "out": [(f"{UNWRITABLE}/g.html", "sub")],
    "dump_passes": [(f"{UNWRITABLE}/dumps", "sub")],
    "output": [(f"{UNWRITABLE}/out.mlirbc", "sub")],
    "target": [("99.99.99", None)],  # export --target: a StableHLO version
    # --setup FILE.py:FACTORY (the target is then @PROG:f, without --input; see _cases)
    "setup": [
        ("@TMP/missing.py:make", "missing.py"),
        ("@SETUP", "FILE.py:FACTORY"),
        ("@SYNTAX:make", "syntax.py"),
        ("@SETUP:no_such_factory", "no_such_factory"),
        ("@SETUP:not_callable", "not_callable"),
        ("@SETUP:returns_five", "(args, kwargs)"),
        ("@SETUP:raises", "boom"),
        ("@SETUP:too_many", "too many positional"),
    ],
    "statics": [("nameonly", None), ("1x=2", None), ("zz=3", None), ("k={}", None)],
}
# Per command, where the generic value does not fit (P,Q lists of pass names, not pipelines).
OPTION_BAD_FOR = {
    ("fuzz", "passes"): [("nope", None)],
    ("replay", "passes"): [("nope", None)],
}
INT_BAD = [("abc", None), ("-1", None)]
FLOAT_BAD = [("abc", None), ("nan", None)]
CHOICE_BAD = [("bogus", None)]


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _takes_value(action) -> bool:
    return not isinstance(action, argparse._HelpAction) and action.nargs != 0


def _option_values(command: str, action):
    if (command, action.dest) in OPTION_BAD_FOR:
        return OPTION_BAD_FOR[(command, action.dest)]
    if action.choices is not None:
        return CHOICE_BAD
    if action.type is float or getattr(action.type, "__name__", "") == "float":
        return FLOAT_BAD
    if action.type is int or getattr(action.type, "__name__", "").startswith("int"):
        return INT_BAD
    return OPTION_BAD.get(action.dest)


def _base(command: str, parser) -> list[str]:
    argv = [command]
    for action in parser._actions:
        if not action.option_strings and _takes_value(action):
            argv += POSITIONAL_BASE[action.dest]
    return argv + COMMAND_BASE.get(command, [])


def _cases():
    for command, parser in _commands().items():
        positionals = [a for a in parser._actions if not a.option_strings and _takes_value(a)]
        for action in positionals:
            for bad, named in POSITIONAL_BAD.get(action.dest, []):
                argv = [command]
                for other in positionals:
                    argv += bad if other is action else POSITIONAL_BASE[other.dest]
                if action.dest == "target" and "-i" not in bad:
                    argv = [a for a in argv if a not in INPUT]  # a trace file takes no --input
                argv += COMMAND_BASE.get(command, [])
                yield pytest.param(argv, named, id=f"{command}-{action.dest}-{bad[0]}")
        for action in parser._actions:
            if not action.option_strings or not _takes_value(action):
                continue
            for value, named in _option_values(command, action) or []:
                argv = [*_base(command, parser), action.option_strings[0], value]
                if action.dest == "setup":  # the factory makes the arguments: no --input, a function target
                    argv = [command, "@PROG:f", *COMMAND_BASE.get(command, []), "--setup", value]
                if action.dest == "mesh":
                    argv = [a if a != "f32[2,3]" else "f32[2,3]@data" for a in argv]
                yield pytest.param(argv, named or value, id=f"{command}-{action.option_strings[0]}-{value}")


def test_every_option_has_malformed_values():
    missing = []
    for command, parser in _commands().items():
        for action in parser._actions:
            if not _takes_value(action):
                continue
            if not action.option_strings:
                if action.dest not in POSITIONAL_BASE or (action.dest not in POSITIONAL_BAD and not action.choices):
                    missing.append(f"{command} {action.dest}")
            elif _option_values(command, action) is None:
                missing.append(f"{command} {action.option_strings[0]}")
    assert not missing, f"no malformed values known for: {', '.join(missing)} (add them to this file)"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-inputs")
    (tmp / "prog.py").write_text(PROGRAM)
    (tmp / "setup_factories.py").write_text(SETUP)
    (tmp / "syntax.py").write_text("def f(x:\n    return x\n")
    (tmp / "garbage.json").write_text("{not json")
    (tmp / "wrong.json").write_text('{"hello": "world"}')
    (tmp / "garbage.mlir").write_text("this is not MLIR\n")
    (tmp / "a_file").write_text("a regular file\n")
    trace = tmp / "prog.trace.json"
    with open(tmp / "a.mlir", "w") as out:
        assert subprocess_free_lower(tmp, trace, out) == 0
    (tmp / "b.mlir").write_text((tmp / "a.mlir").read_text().replace("stablehlo.exponential", "stablehlo.sine"))
    return {
        "@PROG": str(tmp / "prog.py"),
        "@SYNTAX": str(tmp / "syntax.py"),
        "@SETUP": str(tmp / "setup_factories.py"),
        "@GARBAGE_JSON": str(tmp / "garbage.json"),
        "@WRONG_JSON": str(tmp / "wrong.json"),
        "@GARBAGE_MLIR": str(tmp / "garbage.mlir"),
        "@TRACE": str(trace),
        "@MLIR_A": str(tmp / "a.mlir"),
        "@MLIR_B": str(tmp / "b.mlir"),
        "@FILE": str(tmp / "a_file"),
        "@TMP": str(tmp),
    }


def subprocess_free_lower(tmp: Path, trace: Path, out) -> int:
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
        status = main(["lower", f"{tmp / 'prog.py'}:f", *INPUT, "--trace-out", str(trace)])
    out.write(text.getvalue())
    return status


def _fill(argv: list[str], files: dict) -> list[str]:
    pattern = re.compile("|".join(sorted(map(re.escape, files), key=len, reverse=True)))
    return [pattern.sub(lambda m: files[m.group(0)], a) for a in argv]


def _one_error_line(status: int, err: str, named: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, (status, err)
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("hlotrace: error: "), lines
    assert named in lines[0], (named, lines[0])
    assert "internal error" not in lines[0], lines[0]  # a user's mistake is recognized as one
    return lines[0]


@pytest.mark.parametrize("argv, named", list(_cases()))
def test_malformed_input_is_one_line_naming_it(argv, named, files, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # fuzz's default output directory and the like land here
    argv = _fill(argv, files)
    status = main(argv)
    _one_error_line(status, capsys.readouterr().err, _fill([named], files)[0])


# -- environment variables -----------------------------------------------------------------------

# Every HLOTRACE_* variable a command may read (hlotrace.config's "library" and "command"
# scopes): the table's first refused value makes `lower` one line naming the variable (the
# command checks every set variable before it runs). The variables below take any text the
# table accepts; a value the code that uses it refuses is given instead.
ENV_REFUSED_IN_USE = {
    "HLOTRACE_DUMP_TO": ("@FILE/dumps", "HLOTRACE_DUMP_TO"),
    "HLOTRACE_PASSES": ("remat{policy=wrong}", "wrong"),
    "HLOTRACE_PLATFORM": ("bogus", "bogus"),
}
ENV_NOT_CHECKED = {
    "HLOTRACE_CACHE_DIR": "any directory: one that cannot be made turns the cache off (it is an optimization)",
    "HLOTRACE_PJRT_PLUGIN": "a plugin library: HLOTRACE_PLATFORM=<its name> is what fails (above)",
}
COMMAND_SCOPES = ("library", "command")


def _env_cases():
    for name, variable in config.VARIABLES.items():
        if variable.scope in COMMAND_SCOPES and variable.invalid:
            yield name, variable.invalid[0], f"{name}={variable.invalid[0]!r}"
    for name, (value, named) in ENV_REFUSED_IN_USE.items():
        yield name, value, named


ENV_CASES = list(_env_cases())


def test_every_variable_a_command_reads_has_a_malformed_value():
    covered = {name for name, _, _ in ENV_CASES} | set(ENV_NOT_CHECKED)
    read = {name for name, v in config.VARIABLES.items() if v.scope in COMMAND_SCOPES}
    assert sorted(read - covered) == [], "add a refused value to hlotrace/config.py (or a reason there is none here)"
    assert sorted(covered - read) == [], "a case for a variable no command reads"


@pytest.mark.parametrize("variable, value, named", ENV_CASES, ids=[f"{n}={v}" for n, v, _ in ENV_CASES])
def test_a_malformed_environment_variable_is_one_line(variable, value, named, files, capsys, monkeypatch, tmp_path):
    value = _fill([value], files)[0]
    program = tmp_path / "envprog.py"  # a program of its own: no in-process cache hit skips the variable
    program.write_text(PROGRAM.replace("2.0", f"{len(variable)}.0"))
    monkeypatch.setenv(variable, value)
    status = main(["lower", f"{program}:f", *INPUT])
    _one_error_line(status, capsys.readouterr().err, named)


# -- the real program: pipes, HLOTRACE_DEBUG, a variable read at start-up ----------------------


def _hlotrace() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "hlotrace")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "hlotrace"]


def test_output_into_a_closed_pipe_ends_quietly():
    read, write = os.pipe()
    os.close(read)  # like `| head` that has exited: every write fails with EPIPE
    try:
        proc = subprocess.run([*_hlotrace(), "passes"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr


def test_debug_shows_the_traceback_and_still_the_one_line(files):
    env = {**os.environ, "HLOTRACE_DEBUG": "1", "HLOTRACE_REWRITE_DRIVER": "bogus"}
    proc = subprocess.run(
        [*_hlotrace(), "lower", f"{files['@PROG']}:f", *INPUT], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("hlotrace: error: HLOTRACE_REWRITE_DRIVER='bogus'")


def test_cpu_devices_read_at_start_up(files):
    env = {**os.environ, "HLOTRACE_CPU_DEVICES": "abc"}
    proc = subprocess.run(
        [*_hlotrace(), "lower", f"{files['@PROG']}:f", *INPUT], capture_output=True, text=True, env=env, timeout=300
    )
    _one_error_line(proc.returncode, proc.stderr, "HLOTRACE_CPU_DEVICES='abc'")


# -- traces of ops this process has not registered ------------------------------------------------


@pytest.mark.parametrize("command", ["bisect", "replay"])
def test_a_trace_of_an_unregistered_op_asks_for_import(command, files, capsys, tmp_path):
    # A user's op, saved by a process that had imported it; this one has not.
    text = Path(files["@TRACE"]).read_text().replace('"exp"', '"my_user_exp"')
    assert '"my_user_exp"' in text
    path = tmp_path / "user.trace.json"
    path.write_text(text)
    npz = Path(files["@TRACE"] + ".npz")
    if npz.exists():
        (tmp_path / "user.trace.json.npz").write_bytes(npz.read_bytes())
    line = _one_error_line(main([command, str(path)]), capsys.readouterr().err, "my_user_exp")
    assert "not registered here" in line and "--import MODULE" in line
