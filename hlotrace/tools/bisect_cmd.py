"""``hlotrace bisect``: the first recorded op whose compiled result leaves the tolerance."""

from __future__ import annotations

import os
import sys

from hlotrace import debug
from hlotrace.debug import AGAINST, DEFAULT_WINDOW
from hlotrace.errors import HlotraceError
from hlotrace.jit import TracedFunction
from hlotrace.tools.checks import check_fits, check_source_file, int_at_least, random_inputs, require_registered_ops
from hlotrace.tools.common import (
    CliError,
    _check_arity,
    _find_function,
    _import_file,
    _split_target,
    _write_stdout,
    add_import_argument,
    add_target_arguments,
    import_arguments,
    load_trace,
    parse_input_spec,
    random_input,
)

DESCRIPTION = """\
Find the first op whose compiled value diverges. The program (FILE.py:FUNC recorded once on
random inputs of the --input types, or a saved trace file) runs compiled with its
intermediate results as extra outputs, a window of records at a time, and each record's
value is compared, with the tolerance table along its path, against a reference: the eager
NumPy references (default), float64 re-execution, the StableHLO interpreter, or the same
module compiled for another platform. The report names the first record outside tolerance:
its index, op, your file:line, module path, the largest error and where, and its inputs
summarised; it says when adding the extra outputs changed XLA's optimized program and when
the divergence is a known XLA behaviour (subnormals flushed to zero). A trace file saved by
'hlotrace fuzz' carries its inputs; another trace file runs on random inputs (--seed).

Exit status: 1 when a record diverges, 0 when none does, 2 for bad arguments or files."""

EPILOG = """\
examples:
  hlotrace bisect model.py:forward --input 'f32[8,784]'
  hlotrace bisect model.py:forward -i 'f32[8,784]' --against float64 --window 16
  hlotrace bisect fuzz-out/rule-bug-123.trace.json --json
  hlotrace bisect dumps/step.1.trace.json --against interpreter"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "bisect",
        help="name the first op whose compiled result diverges from the eager (or another) reference",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    add_target_arguments(parser)
    parser.add_argument("--against", choices=AGAINST, default="eager", help="the reference (default: eager)")
    parser.add_argument(
        "--window",
        type=int_at_least(1),
        default=DEFAULT_WINDOW,
        help=f"records added as outputs at a time (default {DEFAULT_WINDOW})",
    )
    parser.add_argument("--passes", metavar="PIPELINE", help="the pass pipeline (default: the default pipeline)")
    add_import_argument(parser, ": your ops and rules")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def _trace_inputs(path: str, seed: int):
    """(trace, input arrays): a fuzz repro's own inputs, else random ones."""
    import numpy as np

    trace = load_trace(path)
    require_registered_ops(trace, path)
    try:
        from hlotrace.testing.fuzz.program import Program  # lazy: loads testing.fuzz.program (3 modules)

        program = Program.load(path)
        if len(program.inputs) == len(trace.inputs):
            return program.trace, program.inputs
    except Exception:  # not a fuzz repro: no stored inputs
        pass
    avals = [trace.aval(v) for v in trace.inputs]
    check_fits(
        [(a.shape, a.dtype) for a in avals],
        [f"{path}: input %{v} {a}" for v, a in zip(trace.inputs, avals, strict=True)],
    )
    rng = np.random.default_rng(seed)
    try:
        return trace, [random_input(trace.aval(v).shape, trace.aval(v).dtype, rng) for v in trace.inputs]
    except Exception as exc:
        raise CliError(f"cannot make inputs for {path}: {exc}") from None


def run(args) -> int:
    if args.window < 1:
        raise CliError("--window must be at least 1")
    import_arguments(args)
    try:
        if args.target.endswith(".json"):
            if args.inputs:
                raise CliError("--input is for FILE.py:FUNC targets; a trace file knows its inputs")
            trace, inputs = _trace_inputs(args.target, args.seed)
            report = debug.bisect_trace(
                trace, inputs, against=args.against, window=args.window, platform=args.platform, passes=args.passes
            )
        else:
            fn, tensors = _function_and_inputs(args)
            report = debug.bisect(
                fn, *tensors, against=args.against, window=args.window, platform=args.platform, passes=args.passes
            )
    except HlotraceError as exc:
        raise CliError(str(exc)) from None
    _write_stdout(report.to_json() if args.json else report.text())
    return 1 if report.divergence is not None else 0


def _function_and_inputs(args):
    path, func_name = _split_target(args.target)
    check_source_file(path)
    path = os.path.abspath(path)
    sys.path.insert(0, os.path.dirname(path))
    try:
        obj = _find_function(_import_file(path), path, func_name)
    finally:
        sys.path.remove(os.path.dirname(path))
    fn = obj.fn if isinstance(obj, TracedFunction) else obj
    specs = [parse_input_spec(s) for s in args.inputs]
    tensors = random_inputs(specs, args.inputs, args.seed)
    _check_arity(fn, func_name, tensors)
    return fn, tensors
