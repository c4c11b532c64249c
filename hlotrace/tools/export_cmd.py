"""``hlotrace export``: a saved trace as a StableHLO portable artifact (VHLO bytecode)."""

from __future__ import annotations

from hlotrace import passes
from hlotrace.tools.checks import check_writable
from hlotrace.tools.common import CliError, load_trace

# Composites need 1.0.0 or later (0.9.0, the minimum, cannot express them).
DEFAULT_TARGET = "1.0.0"

DESCRIPTION = f"""\
Load a saved trace, lower it, run a pass pipeline (default 'fuse-elementwise', so softmax,
attention, layer norm, GELU and elementwise groups become named stablehlo.composite ops),
and write the module as a StableHLO portable artifact: versioned VHLO bytecode that any
StableHLO consumer of the target version or later can read (--target, default
{DEFAULT_TARGET}; 'hlotrace export --versions' prints the range this jaxlib supports). The
artifact is read back and checked before the command succeeds. --text writes MLIR text
instead of bytecode."""

EPILOG = """\
examples:
  hlotrace export step.trace.json -o step.mlirbc
  hlotrace export step.trace.json -o step.mlirbc --target 1.5.0 --passes 'simplify,fuse-elementwise'
  hlotrace export step.trace.json -o step.mlir --text
  hlotrace export --versions"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "export",
        help="write a saved trace as a StableHLO portable artifact (VHLO bytecode)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("trace_file", metavar="TRACE.json", nargs="?", help="a trace saved by Trace.save / --trace-out")
    parser.add_argument("-o", "--output", metavar="FILE", help="where to write the artifact")
    parser.add_argument("--passes", metavar="PIPELINE", default="fuse-elementwise", help="pass pipeline to run first")
    parser.add_argument(
        "--target", default=DEFAULT_TARGET, help=f"StableHLO version to target (default {DEFAULT_TARGET})"
    )
    parser.add_argument("--text", action="store_true", help="write MLIR text (after the passes) instead of bytecode")
    parser.add_argument("--versions", action="store_true", help="print the StableHLO versions this jaxlib can target")
    parser.set_defaults(handler=run)


def _version_tuple(text: str, what: str):
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise CliError(f"{what} {text!r} is not a version like 1.0.0")
    return tuple(int(p) for p in parts)


def run(args) -> int:
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax
    from hlotrace.lowering import lower_trace  # lazy: loads jax

    minimum, current = jaxlib_compat.stablehlo_versions()
    if args.versions:
        print(f"minimum {minimum}, current {current} (composites need 1.0.0 or later)")
        return 0
    if not args.trace_file or not args.output:
        raise CliError("export needs TRACE.json and -o FILE (or --versions)")
    check_writable(args.output, "-o")
    target = _version_tuple(args.target, "--target")
    if not _version_tuple(minimum, "minimum") <= target <= _version_tuple(current, "current"):
        raise CliError(f"--target {args.target} is outside the versions this jaxlib can write ({minimum} to {current})")
    trace = load_trace(args.trace_file)
    lowered = passes.run(lower_trace(trace), args.passes)
    composites = lowered.text(debug_info=False).count("stablehlo.composite")
    if args.text:
        data = lowered.text().encode()
    else:
        try:
            # Serializing legalizes the module to VHLO in place: hand it a copy, its CHLO
            # ops (erf in GELU, ...) rewritten to StableHLO first (VHLO has no CHLO).
            portable = passes.run(lowered, "").module
            jaxlib_compat.legalize_chlo(portable)
            data = jaxlib_compat.serialize_portable_artifact(portable, args.target)
        except Exception as exc:  # MLIR reports an op the target cannot express as a plain error
            raise CliError(f"cannot write StableHLO {args.target}: {str(exc).strip().splitlines()[0]}") from None
        back = jaxlib_compat.deserialize_portable_artifact(lowered.module.context, data)
        back.operation.verify()
    try:
        with open(args.output, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    kind = "MLIR text" if args.text else f"StableHLO {args.target} portable artifact"
    import sys

    print(f"wrote {args.output}: {kind}, {len(data):,} bytes, {composites} composites", file=sys.stderr)
    return 0
