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
wrong number of inputs, a bad trace file, an hlotrace error while recording or lowering)
print one line ``hlotrace: error: ...`` on stderr and exit with status 2. ``main`` returns
the exit status instead of raising ``SystemExit`` (the console script passes it to
``sys.exit``), so tests can call ``main([...])`` in-process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
    def error(self, message: str):  # argparse usage errors: usage, then one error line, status 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


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
  hlotrace passes
  hlotrace fuzz --seconds 60 --ops matmul,add,exp
  hlotrace cache clear

Run 'hlotrace COMMAND --help' for a command's options. User errors print one line
'hlotrace: error: ...' and exit with status 2."""


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
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        print(
            f"{PROG}: error: a command is required ({', '.join(COMMANDS[:-1])} or {COMMANDS[-1]})",
            file=sys.stderr,
        )
        return 2
    from hlotrace.errors import HlotraceError

    try:
        return args.handler(args)
    except (CliError, HlotraceError) as exc:
        error_line(str(exc))
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
