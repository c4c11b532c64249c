"""``hlotrace replay``: re-run a saved program against every oracle."""

from __future__ import annotations

from hlotrace.errors import TraceError
from hlotrace.tools.checks import require_registered_ops
from hlotrace.tools.common import CliError, add_import_argument, import_arguments
from hlotrace.tools.fuzz_cmd import check_pass_names

DESCRIPTION = """\
Load a program saved by 'hlotrace fuzz' (a trace file with its inputs; a plain trace file
gets random inputs), print it, run it against every oracle (eager NumPy, compiled, every
pass, the StableHLO interpreter, the program run eagerly by the device engine, the float64
re-execution) and print the verdict: each
disagreement with its class and evidence. Exit status 1 when the saved disagreement (its
class and oracle) reproduces, or, for a file without one, when any rule or pass bug shows;
0 when it does not; 2 for a bad file."""

EPILOG = """\
examples:
  hlotrace replay fuzz-out/rule-bug-123456.trace.json
  hlotrace replay --import mylib.ops fuzz-out/pass-bug-99.trace.json
  hlotrace replay step.trace.json --no-interpreter"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "replay",
        help="re-run a saved fuzz program against every oracle and print the verdict",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("file", metavar="FILE", help="a trace file written by 'hlotrace fuzz' (or any trace file)")
    add_import_argument(parser, "")
    parser.add_argument("--passes", metavar="P,Q", help="check only these passes (default: every registered pass)")
    parser.add_argument("--no-interpreter", action="store_true", help="skip the StableHLO interpreter oracle")
    parser.add_argument("--platform", choices=("cpu", "cuda"), help="PJRT platform (default: CUDA if present)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import os

    from hlotrace.testing.fuzz.interpreter import Interpreter  # lazy: loads testing.fuzz.interpreter (3 modules)
    from hlotrace.testing.fuzz.oracles import BUGS, Oracles, check  # lazy: loads testing.fuzz.oracles (8 modules)
    from hlotrace.testing.fuzz.program import Program  # lazy: loads testing.fuzz.program (3 modules)

    import_arguments(args)
    if not os.path.exists(args.file):
        raise CliError(f"no such file: {args.file}")
    try:
        program = Program.load(args.file)
    except (TraceError, KeyError, ValueError) as exc:
        raise CliError(f"{args.file}: {exc}") from None
    require_registered_ops(program.trace, args.file)
    passes = check_pass_names(args.passes)
    interpreter = None if args.no_interpreter else Interpreter()
    try:
        # Every program, whatever its size, under the eager-device oracle: one program to replay.
        oracles = Oracles(passes=passes, interpreter=interpreter, platform=args.platform, eager_device="all")
        verdict = check(program, oracles)
    finally:
        if interpreter is not None:
            interpreter.close()
    print(program.trace)
    if program.description:
        print(f"saved: {program.description}")
    for oracle, why in verdict.skipped.items():
        print(f"skipped {oracle}: {why}")
    if not verdict.findings:
        print("verdict: every oracle agrees")
    for finding in verdict.findings:
        print(f"verdict: {finding}")
    saved = (program.meta.get("class"), program.meta.get("oracle"))
    if saved[0]:
        reproduced = any((f.kind, f.oracle) == saved for f in verdict.findings)
        print(f"the saved {saved[0]} [{saved[1]}] {'reproduces' if reproduced else 'does not reproduce'}")
        return 1 if reproduced else 0
    return 1 if any(f.kind in BUGS for f in verdict.findings) else 0
