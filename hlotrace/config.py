"""Every ``HLOTRACE_*`` environment variable, declared once: its type, default, meaning and
valid values (:data:`VARIABLES`), read through :func:`get`.

>>> from hlotrace import config
>>> config.get("HLOTRACE_TIERED_COMPILE")       # $HLOTRACE_TIERED_COMPILE, parsed; False when unset
False

``get`` reads the environment each time it is called (a variable set later is seen later)
and parses a given text once: a value that is not valid raises one :class:`ConfigError`
naming the variable, the value and what it accepts. Booleans accept ``1``, ``true``,
``yes``, ``on`` and ``0``, ``false``, ``no``, ``off`` (any case); choices are matched in
any case; an empty value is the same as an unset one (except ``HLOTRACE_PASSES``, where
empty means no passes). ``import hlotrace`` warns once (:class:`UnknownVariableWarning`)
about an ``HLOTRACE_*`` variable that is declared nowhere here, a typo most of the time.
The README's "Environment variables" table is :func:`markdown_table`'s output
(``python -m hlotrace.config`` prints it; tests/test_config.py checks they agree).

This module is in the lowest layer: it imports only the standard library and
:mod:`hlotrace.errors`. What a value means beyond its syntax (a pipeline's passes, a
platform's plugin, a directory's permissions) is checked by the code that uses it.
"""

from __future__ import annotations

import functools
import math
import os
import re
import warnings
from collections.abc import Callable

from hlotrace.errors import ConfigError

PREFIX = "HLOTRACE_"


class UnknownVariableWarning(UserWarning):
    """An ``HLOTRACE_*`` environment variable that hlotrace does not read (a typo?)."""


class Variable:
    """One declared variable (a plain slotted class: a dataclass would cost every
    ``import hlotrace`` half a millisecond)."""

    __slots__ = (
        "default",
        "default_text",
        "empty_is_unset",
        "invalid",
        "meaning",
        "name",
        "parse",
        "scope",
        "syntax",
        "valid",
    )

    def __init__(
        self,
        name: str,
        syntax: str,  # what the README shows after ``NAME=``
        parse: Callable[[str], object],  # stripped, non-empty text -> value; ValueError(what it expects)
        default: object,  # what get() returns when the variable is unset or empty
        meaning: str,  # one line: the README's "effect" column
        default_text: str,  # the default in words, the README's "default" column
        valid: tuple[str, ...],  # texts the tests parse
        invalid: tuple[str, ...] = (),  # texts the tests see refused (none: any text is accepted)
        scope: str = "library",  # library | command | distributed | tests | benchmarks
        empty_is_unset: bool = True,
    ):
        self.name, self.syntax, self.parse, self.default = name, syntax, parse, default
        self.meaning, self.default_text, self.valid, self.invalid = meaning, default_text, valid, invalid
        self.scope, self.empty_is_unset = scope, empty_is_unset

    def __repr__(self) -> str:
        return f"Variable({self.name!r})"


# -- parsers: stripped, non-empty text -> value, or ValueError saying what is expected -------

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_bool(text: str) -> bool:
    word = text.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"expected {', '.join(_TRUE)} (on) or {', '.join(_FALSE)} (off)")


def _integer(minimum: int | None, what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or (minimum is not None and value < minimum):
            bound = "" if minimum is None else f" >= {minimum}"
            raise ValueError(f"expected an integer{bound} ({what})")
        return value

    return parse


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError("expected a positive number of seconds")
    return value


_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2}
_UNITS.update({"g": 1024**3, "gb": 1000**3, "gib": 1024**3})


def parse_size(text: str) -> int:
    """Bytes, or a number with a unit: ``500MB`` (10**6), ``2GiB`` (2**30), ``1.5k`` (1024)."""
    number = text.rstrip("bBkKmMgGiI ")
    unit = text[len(number) :].strip().lower()
    try:
        value = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(
            "expected a positive size: bytes, or with a unit (500MB, 2GiB, 1.5k); "
            "HLOTRACE_CACHE_DIR=off turns the cache off"
        )
    return int(value)


def _choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in names:
            raise ValueError(f"expected {', '.join(names[:-1])} or {names[-1]}")
        return text.lower()

    return parse


_NAME = re.compile(r"[a-z][a-z0-9_-]*")


def parse_platform(text: str) -> str:
    if not _NAME.fullmatch(text.lower()):
        raise ValueError("expected cpu, cuda, or a PJRT plugin's name (letters, digits, _ and -)")
    return text.lower()


def parse_address(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected HOST:PORT (e.g. 10.0.0.1:8476)")
    return text


def parse_text(text: str) -> str:
    """A path, a pipeline: any text (what it names is checked where it is used)."""
    return text


def parse_cache_dir(text: str) -> str:
    return "off" if text.lower() == "off" else text


# -- the table --------------------------------------------------------------------------------

_ON_OFF = "1\\|0"
# xla_trace(precision=...) and $HLOTRACE_MATMUL_PRECISION: float32 dot/convolution precision,
# most precise first (StableHLO's HIGHEST, HIGH, DEFAULT; README "Matmul precision").
MATMUL_PRECISIONS = ("highest", "high", "default")

VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            "HLOTRACE_PLATFORM", "cpu\\|cuda\\|NAME", parse_platform, None,
            "force the PJRT platform; `NAME` is a PJRT plugin's, with its library in `HLOTRACE_PJRT_PLUGIN`",
            "CUDA if available, else CPU", ("cpu", "CUDA", "gpu", "my_plugin"), ("cpu cuda", "../lib", "cpu:0"),
        ),
        Variable(
            "HLOTRACE_PJRT_PLUGIN", "/path/libNAME.so", parse_text, None,
            "the PJRT C-API plugin library of `HLOTRACE_PLATFORM=NAME` (or `hlotrace.runtime.register_plugin(name, "
            "path)`), loaded through jaxlib's plugin loader; a missing or broken library is one error naming the "
            "path. Tested only up to the loader here (no third-party plugin was available)",
            "none", ("/opt/pjrt/libtpu.so",),
        ),
        Variable(
            "HLOTRACE_DUMP_TO", "DIR", parse_text, None,
            "write `<fn>.<n>.trace.json`, `.stablehlo.mlir`, `.optimized.mlir`, `.passes/` (the module after each "
            "pass) and `.compiled.hlo.txt` for every compiled function (an unwritable DIR: one error naming it)",
            "no dumps", ("/tmp/dumps", "dumps"),
        ),
        Variable(
            "HLOTRACE_PASSES", "PIPELINE", parse_text, "simplify,elide-guards,cse,fuse-reductions",
            "the pass pipeline of every `xla_trace` without `passes=` (empty: none; checked as `hlotrace passes "
            "--check` does); unset: the default of the platform it compiles for (`hlotrace passes --default`)",
            "`simplify,elide-guards,cse,fuse-reductions`, then `layout` on the CPU", ("cse", "simplify,remat{policy=sqrt}"),
            empty_is_unset=False,
        ),
        Variable(
            "HLOTRACE_MATMUL_PRECISION", "highest\\|high\\|default", _choice(*MATMUL_PRECISIONS), "highest",
            "the precision of float32 matmuls and convolutions in every `xla_trace` without `precision=`: `high` and "
            "`default` let a GPU use TF32 (see \"Matmul precision\"); the CPU computes all three in float32",
            "`highest`", ("highest", "high", "default", "Default"), ("fast", "tf32", "float32"),
        ),
        Variable(
            "HLOTRACE_HYPOTHESIS_PROFILE", "ci\\|dev\\|thorough\\|gpu", _choice("ci", "dev", "thorough", "gpu"), "ci",
            "property-test depth (tests/conftest.py's hypothesis profiles)",
            "`ci`", ("ci", "dev", "Thorough", "gpu"), ("fast", "ci,dev"), scope="tests",
        ),
        Variable(
            "HLOTRACE_HYPOTHESIS_SEED", "N", _integer(None, "the base of every property test's seed"), None,
            "base of every property test's seed",
            "0 under `ci` and `gpu`, random otherwise", ("0", "12345", "-7"), ("seven", "1.5"), scope="tests",
        ),
        Variable(
            "HLOTRACE_FIRST_CALL", "eager\\|compiled", _choice("eager", "compiled"), "eager",
            "how a first call records: running the NumPy references, or from shapes only, then running the "
            "compiled program",
            "`eager`", ("eager", "compiled", "Compiled"), ("lazy", "1"),
        ),
        Variable(
            "HLOTRACE_EAGER", "device\\|numpy", _choice("numpy", "device"), "device",
            "the engine of eager ops (read when hlotrace is imported): a cached one-op executable on the device, "
            "or each op's NumPy reference on the host (the `hlotrace` command and the test suite use `numpy` "
            "unless it is set)",
            "`device`", ("numpy", "device", "Device"), ("gpu", "numpy,device"),
        ),
        Variable(
            "HLOTRACE_TIERED_COMPILE", _ON_OFF, parse_bool, False,
            "on the CPU, with `first_call=\"compiled\"` and in the device eager engine: a first call (an op's first "
            "application) runs a quickly compiled executable while the optimized one, which every later call runs, "
            "compiles in the background",
            "0", ("1", "0", "yes", "off", "TRUE"), ("maybe", "2", "enabled"),
        ),
        Variable(
            "HLOTRACE_EXPLAIN_RECOMPILES", _ON_OFF, parse_bool, False,
            "log why every compile after a function's first happened (logger `\"hlotrace\"`)",
            "0", ("1", "no"), ("verbose", "2"),
        ),
        Variable(
            "HLOTRACE_CACHE_DIR", "DIR\\|off", parse_cache_dir, None,
            "the persistent compile cache's directory; `off` disables it (one that cannot be made turns the cache "
            "off with a warning)",
            "`$XDG_CACHE_HOME/hlotrace`, else `~/.cache/hlotrace`", ("off", "OFF", "/tmp/hc", "~/cache"),
        ),
        Variable(
            "HLOTRACE_CACHE_MAX_BYTES", "N", parse_size, 1 << 30,
            "the compile cache's size cap, in bytes or with a unit (`500MB`, `2GiB`), least recently used entries "
            "evicted",
            "1 GiB", ("1073741824", "500MB", "2GiB", "1.5k"), ("-1", "0", "lots", "5 parsecs", "inf", "nan"),
        ),
        Variable(
            "HLOTRACE_CPU_DEVICES", "N", _integer(1, "the number of CPU devices"), None,
            "the CPU client's device count, read when hlotrace makes it (SPMD on one host)",
            "1", ("1", "8"), ("0", "-2", "abc", "8.5"),
        ),
        Variable(
            "HLOTRACE_COORDINATOR", "HOST:PORT", parse_address, None,
            "the coordinator of the job `dist.initialize()` joins (set by `python -m hlotrace.distributed.launch`)",
            "none: one process", ("127.0.0.1:8476", "[::1]:80", "host:65535"), ("localhost", "host:0", "host:http"),
            scope="distributed",
        ),
        Variable(
            "HLOTRACE_NUM_PROCESSES", "N", _integer(1, "the processes of the job"), None,
            "the number of processes of that job (set by the launcher)",
            "none: one process", ("1", "4"), ("two", "0"), scope="distributed",
        ),
        Variable(
            "HLOTRACE_PROCESS_ID", "I", _integer(0, "this process's index in the job"), None,
            "this process's index in that job (set by the launcher)",
            "none: one process", ("0", "3"), ("-1", "first"), scope="distributed",
        ),
        Variable(
            "HLOTRACE_DIST_TIMEOUT", "S", parse_seconds, 300.0,
            "seconds every wait of a multi-process job may take",
            "300", ("300", "0.5", "1e3"), ("0", "-5", "soon", "inf"), scope="distributed",
        ),
        Variable(
            "HLOTRACE_DIST_CHECK", _ON_OFF, parse_bool, True,
            "check that replicated inputs (and `make_global`'s replicated data) are equal across processes; "
            "`off` skips it (see \"Several processes and hosts\")",
            "1", ("off", "0", "on"), ("skip",), scope="distributed",
        ),
        Variable(
            "HLOTRACE_REWRITE_DRIVER", "native\\|python", _choice("native", "python"), None,
            "the driver of the passes' rewrite tables: MLIR's greedy driver, or a Python sweep over @main",
            "native where jaxlib has the bindings, else python", ("native", "python"), ("greedy", "bogus"),
        ),
        Variable(
            "HLOTRACE_DEBUG", _ON_OFF, parse_bool, False,
            "the `hlotrace` command prints the traceback before its one-line error",
            "0", ("1", "0", "true"), ("please",), scope="command",
        ),
        Variable(
            "HLOTRACE_SPMD_EXAMPLES", "N", _integer(1, "examples per op"), None,
            "examples per op of the SPMD differential tests (tests/distributed/)",
            "6 (1 in test_platform_mesh.py)", ("1", "6"), ("0", "many"), scope="tests",
        ),
        Variable(
            "HLOTRACE_TEST_SESSION_CACHE", "DIR", parse_text, None,
            "set by tests/conftest.py: the test session's private compile cache, removed at its end",
            "none", ("/tmp/hlotrace-test-cache-x",), scope="tests",
        ),
        Variable(
            "HLOTRACE_BENCH_SMALL", _ON_OFF, parse_bool, False,
            "benchmarks/ run their small sizes (as `--small`)",
            "0", ("1", "0"), ("tiny",), scope="benchmarks",
        ),
    )
}  # fmt: skip


# -- reading ----------------------------------------------------------------------------------

_parsed: dict[tuple[str, str | None], object] = {}  # (name, text as set) -> value


def parse(name: str, text: str | None) -> object:
    """The value of ``name`` set to ``text`` (None: unset); ConfigError if it is not valid."""
    variable = VARIABLES[name]
    stripped = None if text is None else text.strip()
    if stripped is None or (not stripped and variable.empty_is_unset):
        return variable.default
    try:
        return variable.parse(stripped)
    except ValueError as exc:
        raise ConfigError(f"{name}={stripped!r}: {exc}") from None


def get(name: str) -> object:
    """``$name`` parsed now (its default when unset); one ConfigError naming the variable,
    its value and what it accepts when the value is not valid.

    >>> get("HLOTRACE_CACHE_MAX_BYTES")       # with HLOTRACE_CACHE_MAX_BYTES=500MB
    500000000
    """
    text = os.environ.get(name)
    key = (name, text)
    if key in _parsed:
        return _parsed[key]
    value = parse(name, text)
    _parsed[key] = value
    return value


def raw_reader(name: str) -> Callable[[], bytes | str | None]:
    """A reader of ``$name``'s text as set, for a per-call path that keys a cache by it and
    parses it (``parse(name, os.fsdecode(raw))``) only when it changed: bytes on POSIX (str
    elsewhere), None when unset, read anew on every call by a C-level dict lookup without a
    Python frame (``os.environ.get`` encodes the name each time, ~0.7 us)."""
    VARIABLES[name]  # a name declared nowhere is a KeyError here
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and (not data or isinstance(next(iter(data)), bytes)):
        return functools.partial(data.get, os.fsencode(name))
    return functools.partial(os.environ.get, name)


def is_set(name: str) -> bool:
    """Whether ``$name`` is set to something other than blanks."""
    VARIABLES[name]  # a name declared nowhere is a KeyError here, not a silent False
    return bool(os.environ.get(name, "").strip())


def check(scopes: tuple[str, ...] = ("library", "command")) -> None:
    """Parse every variable of ``scopes`` that is set (the ``hlotrace`` command does, before
    it runs: some are read only on some paths, where a typo would go unseen)."""
    for name, variable in VARIABLES.items():
        if variable.scope in scopes:
            get(name)


# -- unknown variables ------------------------------------------------------------------------

_warned: list[bool] = []


def unknown(environ=None) -> dict[str, str | None]:
    """Every ``HLOTRACE_*`` name in ``environ`` (default: this process's) declared nowhere
    here, with the declared name closest to it (or None)."""
    names = [k for k in (os.environ if environ is None else environ) if k.startswith(PREFIX) and k not in VARIABLES]
    return {n: _closest(n) for n in names}


def _closest(name: str) -> str | None:
    import difflib  # here: 1 ms of every `import hlotrace`, needed only for a misspelt name

    # Compared without the prefix every name shares, which would make any two look alike.
    suffixes = [known[len(PREFIX) :] for known in VARIABLES]
    match = difflib.get_close_matches(name[len(PREFIX) :], suffixes, n=1, cutoff=0.6)
    return PREFIX + match[0] if match else None


def warn_unknown() -> None:
    """One UnknownVariableWarning per process for the unknown ``HLOTRACE_*`` variables set."""
    if _warned:
        return
    _warned.append(True)
    found = unknown()
    if found:
        parts = [f"{n} (did you mean {guess}?)" if guess else n for n, guess in sorted(found.items())]
        warnings.warn(
            f"hlotrace reads no such environment variable: {', '.join(parts)}; "
            "`python -m hlotrace.config` lists those it reads",
            UnknownVariableWarning,
            stacklevel=2,
        )


# -- the README's table -----------------------------------------------------------------------


def markdown_table() -> str:
    """The README's "Environment variables" table, one row per declared variable."""
    rows = ["| variable | default | effect |", "| --- | --- | --- |"]
    for v in VARIABLES.values():
        rows.append(f"| `{v.name}={v.syntax}` | {v.default_text} | {v.meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown_table(), end="")
