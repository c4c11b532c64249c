"""hlotrace.config: every HLOTRACE_* variable declared once, validated with one error, an
unknown one warned about, the README's table rendered from the declarations.

The per-variable cases are generated from ``config.VARIABLES``: a new variable brings its
own valid and refused values, and these tests check them."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import hlotrace.distributed.process as process
import hlotrace.runtime.cache as cache
import hlotrace.runtime.tiered as tiered
from hlotrace import config
from hlotrace.errors import ConfigError, HlotraceError
from hlotrace.tools.cli import main

ROOT = Path(__file__).resolve().parents[1]
VALID = [(name, text) for name, v in config.VARIABLES.items() for text in v.valid]
INVALID = [(name, text) for name, v in config.VARIABLES.items() for text in v.invalid]
ANY_TEXT = (config.parse_text, config.parse_cache_dir)  # parsers that accept every text


@pytest.mark.parametrize("name, text", VALID, ids=[f"{n}={t}" for n, t in VALID])
def test_a_valid_value_parses_and_get_reads_it(name, text, monkeypatch):
    value = config.parse(name, text)
    monkeypatch.setenv(name, f" {text} ")  # blanks around a value are no part of it
    assert config.get(name) == value


@pytest.mark.parametrize("name, text", INVALID, ids=[f"{n}={t}" for n, t in INVALID])
def test_a_refused_value_is_one_error_naming_the_variable_and_what_it_accepts(name, text, monkeypatch):
    monkeypatch.setenv(name, text)
    with pytest.raises(ConfigError) as info:
        config.get(name)
    message = str(info.value)
    assert isinstance(info.value, HlotraceError)
    assert message.startswith(f"{name}={text!r}: expected "), message
    assert "\n" not in message


@pytest.mark.parametrize("name", sorted(config.VARIABLES))
def test_unset_or_empty_is_the_default(name, monkeypatch):
    variable = config.VARIABLES[name]
    monkeypatch.delenv(name, raising=False)
    assert config.get(name) == variable.default
    monkeypatch.setenv(name, "  ")
    assert config.get(name) == (variable.default if variable.empty_is_unset else "")


def test_every_declaration_is_complete():
    for name, v in config.VARIABLES.items():
        assert name.startswith(config.PREFIX) and v.name == name
        assert v.meaning and v.default_text and v.syntax and v.valid, name
        assert v.scope in ("library", "command", "distributed", "tests", "benchmarks"), name
        # A variable with no refused value must be one whose parser takes any text.
        assert v.invalid or v.parse in ANY_TEXT, f"{name}: give it refused values, or say it takes any text"


def test_every_variable_named_anywhere_is_declared_and_every_declared_one_is_used():
    named = set()
    for folder in ("hlotrace", "tests", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "test_config.py":
                named |= set(re.findall(r"HLOTRACE_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text()))
    named |= set(re.findall(r"HLOTRACE_[A-Z][A-Z0-9_]*[A-Z0-9]", (ROOT / "Makefile").read_text()))
    assert sorted(named - set(config.VARIABLES)) == [], "declare them in hlotrace/config.py"
    used = set()
    for folder in ("hlotrace", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name not in ("config.py", "test_config.py", "test_cli_bad_inputs.py"):
                used |= set(re.findall(r"HLOTRACE_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text()))
    assert sorted(set(config.VARIABLES) - used) == [], "declared but read nowhere"


# -- every read goes through the table ----------------------------------------------------------

# Files that still read HLOTRACE_* variables from os.environ themselves. May only shrink
# (empty since the eager engines read HLOTRACE_EAGER through the table).
NOT_YET_THROUGH_THE_TABLE: tuple[str, ...] = ()


def _environment_reads(path: Path) -> list[int]:
    """Lines of ``path`` that read an HLOTRACE_* variable from os.environ / os.getenv
    (a key that is an HLOTRACE_* string, or a name bound to one in the module or imported)."""
    tree = ast.parse(path.read_text())
    constants = {
        node.targets[0].id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and str(node.value.value).startswith(config.PREFIX)
    }
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}

    def hlotrace_key(node) -> bool:
        if isinstance(node, ast.Constant):
            return str(node.value).startswith(config.PREFIX)
        # A name not bound to a literal here: one of the *_ENV constants imported, or unknown.
        return isinstance(node, ast.Name) and (node.id in constants or (node.id in imported and "ENV" in node.id))

    def is_environ(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id in ("environ", "_environ", "env")
        )

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and hlotrace_key(node.args[0]):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (name == "get" and is_environ(func.value)) or name == "getenv" or "environ" in name:
                lines.append(node.lineno)  # os.environ.get, os.getenv, a reader of its own (*environ*)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            if hlotrace_key(node.slice):
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            if hlotrace_key(node.left) and any(is_environ(c) for c in node.comparators):
                lines.append(node.lineno)
    return sorted(lines)


def test_every_read_goes_through_the_table():
    direct, pending = [], set()
    for path in sorted((ROOT / "hlotrace").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        lines = _environment_reads(path)
        if lines and relative.startswith(NOT_YET_THROUGH_THE_TABLE):
            pending |= {p for p in NOT_YET_THROUGH_THE_TABLE if relative.startswith(p)}
        elif lines:
            direct += [f"{relative}:{line}" for line in lines]
    assert direct == [], "read these through hlotrace.config.get"
    assert sorted(pending) == sorted(NOT_YET_THROUGH_THE_TABLE), "they read through the table now: shrink the list"


def test_the_read_checker_sees_a_direct_read(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom x import DUMP_ENV\nNAME = 'HLOTRACE_DEBUG'\n"
        "a = os.environ.get(NAME)\nb = os.environ['HLOTRACE_PASSES']\nc = DUMP_ENV in os.environ\n"
        "d = os.getenv('HLOTRACE_PLATFORM')\ne = os.environ.get('XDG_CACHE_HOME')\n"
        "f = _raw_environment_reader(NAME)\n"
    )
    assert _environment_reads(sample) == [4, 5, 6, 7, 9]


# -- values are read anew, parsed once -------------------------------------------------------------


def test_get_sees_a_value_set_later(monkeypatch):
    monkeypatch.setenv("HLOTRACE_TIERED_COMPILE", "0")
    assert config.get("HLOTRACE_TIERED_COMPILE") is False
    monkeypatch.setenv("HLOTRACE_TIERED_COMPILE", "1")
    assert config.get("HLOTRACE_TIERED_COMPILE") is True
    monkeypatch.delenv("HLOTRACE_TIERED_COMPILE")
    assert config.get("HLOTRACE_TIERED_COMPILE") is False


def test_the_raw_reader_of_a_per_call_path_sees_every_change(monkeypatch):
    read = config.raw_reader("HLOTRACE_PASSES")
    monkeypatch.delenv("HLOTRACE_PASSES", raising=False)
    assert read() is None
    for text in ("cse", "", "simplify,cse"):
        monkeypatch.setenv("HLOTRACE_PASSES", text)
        assert os.fsdecode(read()) == text
        assert config.parse("HLOTRACE_PASSES", os.fsdecode(read())) == config.get("HLOTRACE_PASSES") == text


def test_an_undeclared_name_is_a_key_error():
    with pytest.raises(KeyError):
        config.get("HLOTRACE_NOT_DECLARED")
    with pytest.raises(KeyError):
        config.is_set("HLOTRACE_NOT_DECLARED")
    with pytest.raises(KeyError):
        config.raw_reader("HLOTRACE_NOT_DECLARED")


# -- regressions: what was accepted silently -------------------------------------------------------


@pytest.mark.parametrize("text", ["-1", "-500MB", "0"])
def test_a_negative_or_zero_cache_size_is_refused(text, monkeypatch, capsys):
    # It used to be max(value, 0): a cap of 0 bytes, every entry evicted, the cache silently empty.
    monkeypatch.setenv("HLOTRACE_CACHE_MAX_BYTES", text)
    with pytest.raises(ConfigError, match=r"HLOTRACE_CACHE_MAX_BYTES='-?\d+(MB)?': expected a positive size"):
        config.get("HLOTRACE_CACHE_MAX_BYTES")
    with pytest.raises(ConfigError, match="HLOTRACE_CACHE_MAX_BYTES"):
        cache.max_bytes()  # the cache's own reader: no cap of 0 bytes
    assert main(["cache"]) == 2
    assert capsys.readouterr().err.strip().startswith(f"hlotrace: error: HLOTRACE_CACHE_MAX_BYTES='{text}'")


def test_booleans_take_the_documented_words_in_any_case_and_nothing_else(monkeypatch):
    # HLOTRACE_TIERED_COMPILE=yes is on, as documented for every boolean; a word outside the
    # eight is refused (the tiered switch's own reader included).
    for text, value in (("yes", True), ("ON", True), ("True", True), ("1", True), ("no", False), ("Off", False)):
        monkeypatch.setenv("HLOTRACE_TIERED_COMPILE", text)
        assert config.get("HLOTRACE_TIERED_COMPILE") is value
        assert tiered.enabled() is value
    for text in ("y", "enable", "2", "-1"):
        monkeypatch.setenv("HLOTRACE_TIERED_COMPILE", text)
        with pytest.raises(ConfigError, match="expected 1, true, yes, on"):
            config.get("HLOTRACE_TIERED_COMPILE")
        with pytest.raises(ConfigError, match=f"HLOTRACE_TIERED_COMPILE='{text}'"):
            tiered.enabled()


def test_a_typo_in_a_switch_is_refused_where_it_was_taken_as_on(monkeypatch):
    # HLOTRACE_EXPLAIN_RECOMPILES and HLOTRACE_DIST_CHECK took any other word as on.
    monkeypatch.setenv("HLOTRACE_DIST_CHECK", "of")
    with pytest.raises(ConfigError, match="HLOTRACE_DIST_CHECK='of'"):
        config.get("HLOTRACE_DIST_CHECK")


def test_the_distributed_settings_read_through_the_table(monkeypatch):
    monkeypatch.setenv("HLOTRACE_DIST_TIMEOUT", "0.2")
    assert process.timeout_s() == 1
    monkeypatch.setenv("HLOTRACE_DIST_TIMEOUT", "inf")
    with pytest.raises(ConfigError, match="HLOTRACE_DIST_TIMEOUT='inf'"):
        process.timeout_s()
    monkeypatch.setenv("HLOTRACE_COORDINATOR", "localhost")
    with pytest.raises(ConfigError, match="HLOTRACE_COORDINATOR='localhost': expected HOST:PORT"):
        process.initialize()


# -- unknown variables -------------------------------------------------------------------------------


def test_an_unknown_variable_warns_once_with_the_closest_name(monkeypatch):
    monkeypatch.setenv("HLOTRACE_TIERD_COMPILE", "1")
    monkeypatch.setenv("HLOTRACE_SOMETHING_ELSE", "1")
    monkeypatch.setattr(config, "_warned", [])
    with pytest.warns(config.UnknownVariableWarning) as record:
        config.warn_unknown()
    assert len(record) == 1
    message = str(record[0].message)
    assert "HLOTRACE_TIERD_COMPILE (did you mean HLOTRACE_TIERED_COMPILE?)" in message
    assert "HLOTRACE_SOMETHING_ELSE, " in message  # nothing close: no suggestion
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.warn_unknown()  # once per process


def test_known_variables_do_not_warn():
    assert config.unknown({name: "1" for name in config.VARIABLES} | {"PATH": "/bin"}) == {}


def test_import_hlotrace_warns_about_a_typo(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HLOTRACE_PLATFROM": "cpu", "HLOTRACE_CACHE_DIR": "off"}
    proc = subprocess.run(
        [sys.executable, "-c", "import hlotrace"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("UnknownVariableWarning") == 1, proc.stderr
    assert "HLOTRACE_PLATFROM (did you mean HLOTRACE_PLATFORM?)" in proc.stderr


# -- the README's table ----------------------------------------------------------------------------


def test_the_readme_table_is_the_rendered_declarations():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Environment variables\n") :]
    section = section[: section.index("\n## ", 1)]
    table = "".join(line + "\n" for line in section.splitlines() if line.startswith("|"))
    assert table == config.markdown_table(), "regenerate it: python -m hlotrace.config"
