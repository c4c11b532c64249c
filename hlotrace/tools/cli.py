"""The ``hlotrace`` command-line program.

::

    hlotrace lower model.py:step --input 'f32[64,1000]' --input 'i32[5]'   # StableHLO with loc(...)
    hlotrace lower model.py:step --input 'f32[8,8]' --compiled            # compiled HLO text
    hlotrace rules                                                       # op / rule / test coverage
    hlotrace show step.trace.json --lower                                # a saved trace, lowered
    hlotrace passes                                                      # the passes pipelines may name
    hlotrace export step.trace.json -o step.mlirbc                       # portable artifact, composites kept
    hlotrace fuzz --seconds 60                                           # random programs vs every oracle
    hlotrace replay fuzz-out/rule-bug-123.trace.json                     # re-run a saved repro
    hlotrace cache                                                       # the persistent compile cache

User mistakes (a missing or broken file, an unknown function, a malformed ``--input``, the
wrong number of inputs, a bad trace file, a bad $HLOTRACE_* value, an hlotrace error while
recording or lowering) print one line ``hlotrace: error: ...`` on stderr and exit with
status 2; so does anything else that goes wrong (an internal error says so), the traceback
shown only with ``HLOTRACE_DEBUG=1``. Output into a closed pipe (``| head``) ends quietly. ``main`` returns
the exit status instead of raising ``SystemExit`` (the console script passes it to
``sys.exit``), so tests can call ``main([...])`` in-process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hlotrace import config
from hlotrace.engines import EAGER_ENV, set_eager_engine
from hlotrace.errors import HlotraceError
from hlotrace.tools.common import (  # noqa: F401  (re-exported: tests and tools import them from here)
    ACCEPTED_DTYPES,
    PROG,
    CliError,
    _write_stdout,
    error_line,
    load_trace,
    parse_input_spec,
    random_input,
)

# One module per command, in the order `hlotrace --help` lists them.
COMMANDS = (
    "lower",
    "rules",
    "show",
    "stages",
    "explain",
    "diff",
    "graph",
    "passes",
    "export",
    "fuzz",
    "replay",
    "cache",
    "bisect",
)


# -- argument parsing -----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse usage errors: one error line, status 2
        self.exit(2, f"{PROG}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


_FORMATTER = argparse.RawDescriptionHelpFormatter

_MAIN_DESCRIPTION = """\
Record NumPy-eager programs, lower them to StableHLO through hlotrace's per-op rule
registry, compile them with PJRT, and inspect the registries and saved traces."""

_MAIN_EPILOG = """\
examples:
  hlotrace lower model.py:forward --input 'f32[64,1000]'
  hlotrace lower model.py:step --input 'bf16[2,3]' --input 'f32[]' --compiled
  hlotrace rules --json
  hlotrace show forward.trace.json --lower
  hlotrace explain train.py:train_step --setup train.py:make
  hlotrace passes
  hlotrace fuzz --seconds 60 --ops matmul,add,exp
  hlotrace cache clear

Run 'hlotrace COMMAND --help' for a command's options. Errors print one line
'hlotrace: error: ...' and exit with status 2 (HLOTRACE_DEBUG=1 adds the traceback)."""


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(prog=PROG, description=_MAIN_DESCRIPTION, epilog=_MAIN_EPILOG, formatter_class=_FORMATTER)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in COMMANDS:
        importlib.import_module(f"hlotrace.tools.{name}_cmd").add_parser(sub, _FORMATTER)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hlotrace")
    except Exception:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the program on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BrokenPipeError:  # `hlotrace lower --help | head -3`
        _silence_stdout()
        return 141
    if getattr(args, "handler", None) is None:
        error_line(
            f"a command is required ({', '.join(COMMANDS[:-1])} or {COMMANDS[-1]}; see '{PROG} --help')",
        )
        return 2
    if not config.is_set(EAGER_ENV):
        # The commands record, lower, fuzz and compare with the NumPy references: eager ops
        # there run on the oracle engine (no one-op compiles) unless $HLOTRACE_EAGER says.
        set_eager_engine("numpy")
    return run_handler(args)


DEBUG_ENV = "HLOTRACE_DEBUG"

# Environment variables naming a path hlotrace writes to: an OSError there names the variable.
PATH_VARIABLES = ("HLOTRACE_DUMP_TO", "HLOTRACE_CACHE_DIR")


def run_handler(args) -> int:
    """Run the command; every failure becomes one ``hlotrace: error:`` line and status 2
    (with $HLOTRACE_DEBUG=1 the traceback first). Output cut short by a closed pipe
    (``| head``) ends the program quietly with 141, as SIGPIPE ends other Unix tools."""
    debug = False
    try:
        debug = config.get(DEBUG_ENV)
        check_environment()
        return args.handler(args)
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        return 130
    except (CliError, HlotraceError) as exc:
        failure, message = exc, str(exc)
    except MemoryError as exc:
        failure, message = exc, f"out of memory ({type(exc).__name__}: {exc}); try smaller inputs"
    except OSError as exc:
        failure, message = exc, _os_error(exc)
    except Exception as exc:  # an internal error: still one line, the traceback on request
        failure, message = exc, f"internal error, {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)"
    if debug:
        import traceback

        traceback.print_exception(failure)
    error_line(message)
    return 2


def check_environment() -> None:
    """Every HLOTRACE_* setting a command may read, parsed before it runs (some are read only
    on some paths: a bad value would go unseen); a bad one is one ConfigError naming it."""
    config.check(("library", "command"))


def _os_error(exc: OSError) -> str:
    import os

    where = str(exc.filename) if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    for variable in PATH_VARIABLES:
        value = config.get(variable)
        if value and where and os.path.abspath(where).startswith(os.path.abspath(value)):
            return f"{variable}={value}: cannot write there: {reason} ({where})"
    return f"{where}: {reason}" if where else reason


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush into the closed pipe
    prints nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is no file (a test's capture)
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
