"""``hlotrace stages``: every stage of one program, from the trace to XLA's optimized HLO."""

from __future__ import annotations

import os
import sys

from hlotrace.passes.op_count import RULE as OP_COUNT_RULE
from hlotrace.passes.op_count import count_ops
from hlotrace.tools.checks import check_writable
from hlotrace.tools.common import CliError, _write_stdout, add_mesh_argument, add_target_arguments, target_program
from hlotrace.tools.setup import add_setup_arguments

DESCRIPTION = f"""\
Show every stage a program goes through: the recorded trace, the StableHLO module as
lowered, the module after each pass of the pipeline (--passes; default: what xla_trace
runs on that platform, $HLOTRACE_PASSES or 'hlotrace passes --default'), and the HLO module
after XLA's own optimizations. The target is FILE.py:FUNC (recorded once on random inputs
of the --input types, as 'hlotrace lower' does) or a saved trace file. Stages go to stdout, each under a '==== NN name ===='
header, or with -o DIR into one numbered file each (00-trace.txt, 01-stablehlo.mlir,
02-after-simplify.mlir, ..., NN-xla-optimized.hlo); a summary line per stage (op counts,
pass time) goes to stderr. StableHLO {OP_COUNT_RULE}, as in every hlotrace command; XLA's
HLO is counted in instructions.

With --mesh (and --input DTYPE[SHAPE]@SPEC placements, as 'hlotrace lower' takes them) the
program is compiled for a mesh of devices: the StableHLO stages carry the Shardy
annotations and the last stage is XLA's partitioned per-device HLO, with the collectives
the partitioner inserted (listed in its title).

With --setup FILE.py:FACTORY instead of --input, FACTORY() (in FILE.py, which may be the
target's own file) returns (args, kwargs), modules, optimizers and GradManagers included, and
the target is recorded on them from their shapes (nothing runs, no state changes): your own
training step. --static NAME=VALUE passes a keyword argument as a static value."""

EPILOG = """\
examples:
  hlotrace stages examples/softmax_demo.py:fused_softmax --input 'f32[64,1000]'
  hlotrace stages model.py:step -i 'f32[8,784]' -i 'i32[8]' --passes 'simplify,fuse-elementwise' -o stages/
  hlotrace stages dumps/step.1.trace.json --passes '' --no-locations
  hlotrace stages model.py:mlp --mesh 4x2:data,model -i 'f32[64,1000]@data' -i 'f32[1000,512]@None,model'
  hlotrace stages train.py:train_step --setup train.py:make -o stages/"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "stages",
        help="print the trace, the StableHLO, the module after each pass and XLA's optimized HLO",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    add_target_arguments(parser)
    parser.add_argument("--passes", metavar="PIPELINE", help="the pass pipeline (default: what xla_trace runs there)")
    parser.add_argument("-o", "--out", metavar="DIR", help="write one file per stage into DIR instead of stdout")
    parser.add_argument("--no-locations", action="store_true", help="print modules without loc(...) annotations")
    add_mesh_argument(parser)
    add_setup_arguments(parser)
    parser.set_defaults(handler=run)


def stages(trace, pipeline: str, platform=None, locations: bool = True, traced=None) -> list[tuple[str, str, str]]:
    """(file name, title, text) of every stage of ``trace`` under ``pipeline``. ``traced``: the
    compiled function that recorded ``trace`` under ``pipeline`` (on a mesh): its lowered
    module and (partitioned) executable are shown instead of compiling anew."""
    from hlotrace import passes, runtime  # lazy: loads runtime (7 modules)
    from hlotrace.lowering import lower_trace  # lazy: loads jax

    lowered = lower_trace(trace) if traced is None else traced.lowered
    result = [("00-trace.txt", "trace", str(trace))]
    count = count_ops(lowered.module)
    result.append(("01-stablehlo.mlir", f"stablehlo ({count} ops)", lowered.text(debug_info=locations)))
    current = lowered
    for k, spec in enumerate(passes.parse_pipeline(pipeline), start=2):
        current = passes.run(current, (spec,))
        timing = current.pass_timings[0]
        title = f"after {spec.name} ({timing.ops_before} -> {timing.ops_after} ops, {timing.seconds * 1e3:.1f} ms)"
        result.append((f"{k:02d}-after-{spec.name}.mlir", title, current.text(debug_info=locations)))
    if traced is None:
        exe = runtime.compile(current.text(), current.in_avals, current.out_avals, platform=platform)
    else:
        exe = traced.executable
    hlo = exe.hlo_text()
    instructions = sum(
        1 for line in hlo.splitlines() if " = " in line and not line.lstrip().startswith(("HloModule", "//"))
    )
    title = f"xla optimized ({instructions} instructions)"
    if traced is not None and getattr(exe, "in_shardings", None) is not None:
        title = (
            f"xla optimized, partitioned for {len(exe.devices)} devices ({instructions} instructions, {_kinds(hlo)})"
        )
    result.append((f"{len(result):02d}-xla-optimized.hlo", title, hlo))
    return result


def _kinds(hlo: str) -> str:
    from hlotrace.distributed.inspect import collectives  # lazy: loads distributed.inspect (16 modules)

    counts: dict[str, int] = {}
    for c in collectives(hlo):
        counts[c.kind] = counts.get(c.kind, 0) + 1
    listed = ", ".join(f"{kind} {n}" for kind, n in counts.items())
    return f"{sum(counts.values())} collectives" + (f": {listed}" if listed else "")


def run(args) -> int:
    if args.out:
        check_writable(args.out, "-o", directory=True)
    from hlotrace.passes.manager import resolve  # lazy: loads jax
    from hlotrace.runtime import platform_name  # lazy: loads jax

    pipeline = resolve(args.passes, platform_name(args.platform))  # what xla_trace would run there
    try:
        trace, traced = target_program(args, pipeline)
        found = stages(trace, pipeline, args.platform, locations=not args.no_locations, traced=traced)
    except (ValueError, KeyError) as exc:  # a malformed pipeline
        raise CliError(f"--passes: {exc.args[0] if exc.args else exc}") from None
    if args.out:
        try:
            os.makedirs(args.out, exist_ok=True)
            for name, title, text in found:
                with open(os.path.join(args.out, name), "w") as f:
                    f.write(text if text.endswith("\n") else text + "\n")
                print(f"{os.path.join(args.out, name)}: {title}", file=sys.stderr)
        except OSError as exc:
            raise CliError(f"cannot write to {args.out}: {exc.strerror or exc}") from None
        return 0
    for k, (_, title, text) in enumerate(found):
        _write_stdout(f"==== {k:02d} {title} ====\n{text}")
    return 0
