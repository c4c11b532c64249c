"""``hlotrace show``: print a saved trace, or the StableHLO it lowers to (optionally after passes)."""

from __future__ import annotations

from hlotrace import passes
from hlotrace.passes.op_count import RULE as OP_COUNT_RULE
from hlotrace.tools.checks import check_writable
from hlotrace.tools.common import CliError, _write_stdout, check_trace_target, load_trace, setup_target
from hlotrace.tools.setup import add_setup_arguments

DESCRIPTION = f"""\
Load a trace saved by Trace.save, 'hlotrace lower --trace-out' or HLOTRACE_DUMP_TO (a JSON
file, plus FILE.npz beside it when it has array constants) and print it: one line per
recorded op with its inputs, attributes and source line. With --lower, print the StableHLO
module it lowers to instead; with --passes PIPELINE, that module after the pipeline (a
per-pass summary of time and op counts goes to stderr; --dump-passes DIR writes the module
after every pass; {OP_COUNT_RULE}, as in every hlotrace command). See 'hlotrace passes'
for the passes. With --setup FILE.py:FACTORY the target is a function, FILE.py:FUNC,
recorded on the (args, kwargs) FACTORY() returns (see 'hlotrace lower --help')."""

EPILOG = """\
examples:
  hlotrace show forward.trace.json
  hlotrace show dumps/forward.1.trace.json --lower
  hlotrace show forward.trace.json --lower --no-locations
  hlotrace show step.trace.json --lower --passes 'simplify,fuse-reductions,cse' --dump-passes stages/
  hlotrace show train.py:train_step --setup train.py:make --lower"""


def add_parser(sub, formatter) -> None:
    show = sub.add_parser(
        "show",
        help="print a saved trace, or the StableHLO it lowers to",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    show.add_argument(
        "trace_file",
        metavar="TRACE.json|FILE.py:FUNC",
        help="a trace saved by Trace.save / --trace-out, or a function recorded on --setup's arguments",
    )
    show.add_argument("--lower", action="store_true", help="print the lowered StableHLO module instead of the trace")
    show.add_argument("--no-locations", action="store_true", help="with --lower: omit loc(...) annotations")
    show.add_argument("--passes", metavar="PIPELINE", default="", help="with --lower: run this pass pipeline first")
    show.add_argument("--dump-passes", metavar="DIR", help="with --passes: write the module after each pass to DIR")
    add_setup_arguments(show)
    show.add_argument("--platform", choices=("cpu", "cuda"), help="with --setup: the PJRT platform to record for")
    show.set_defaults(handler=run)


def run(args) -> int:
    import sys

    if (args.passes or args.dump_passes) and not args.lower:
        raise CliError("--passes and --dump-passes need --lower")
    if args.dump_passes:
        check_writable(args.dump_passes, "--dump-passes", directory=True)
    if args.setup is not None and not args.trace_file.endswith(".json"):
        args.target, args.inputs, args.mesh = args.trace_file, [], None
        trace = setup_target(args, passes="").trace
    elif ".py:" in args.trace_file and not args.trace_file.endswith(".json"):
        raise CliError(
            f"show {args.trace_file}: a FILE.py:FUNC target needs --setup FILE.py:FACTORY (its arguments); "
            "'hlotrace lower' records one on random --input values"
        )
    else:
        check_trace_target(args, args.trace_file)
        trace = load_trace(args.trace_file)
    try:
        if not args.lower:
            text = str(trace)
        else:
            from hlotrace.lowering import lower_trace  # lazy: loads jax

            lowered = lower_trace(trace)
            if args.passes or args.dump_passes:
                lowered = passes.run(lowered, args.passes, dump_to=args.dump_passes)
                for t in lowered.pass_timings:
                    print(f"{t.name}: {t.seconds * 1e3:.1f} ms, {t.ops_before} -> {t.ops_after} ops", file=sys.stderr)
            text = lowered.text(debug_info=not args.no_locations)
    except KeyError as exc:  # a record naming a var the file does not declare
        raise CliError(f"bad trace file {args.trace_file}: it refers to undeclared var {exc}") from None
    _write_stdout(text)
    return 0
