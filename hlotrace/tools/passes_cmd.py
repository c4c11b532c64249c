"""``hlotrace passes``: every registered pass (hlotrace's and MLIR's) with its options."""

from __future__ import annotations

import json
import sys

from hlotrace.passes.registry import default_pipeline, platform_defaults
from hlotrace.tools.common import CliError

DESCRIPTION = """\
List every pass a pipeline may name: hlotrace's own passes (Python, in hlotrace/passes/ or
registered by your code with @hlotrace.passes.register_pass) and MLIR's built-in passes, with
their options and one-line descriptions. 'exact' passes never change a computed bit (the
differential tests compare them bitwise). A pipeline is a comma-separated list, options in
braces: 'simplify,fuse-reductions,cse,remat{policy=sqrt}'. xla_trace(passes=...) and
$HLOTRACE_PASSES choose the pipeline; otherwise a call runs its platform's default (the CPU
adds 'layout', measured faster there; CUDA and other platforms run the common part until
measured): --default prints each platform's, --default --platform NAME one's. --check
PIPELINE parses a pipeline and prints its canonical form, checking every pass's options
exactly as running the pipeline would (the same function): an unknown option or a bad value
exits 2 naming the pass, the option, the value and the valid ones. MLIR's passes are listed
with the options hlotrace passes on to MLIR's own parser."""

EPILOG = """\
examples:
  hlotrace passes
  hlotrace passes --json
  hlotrace passes --default --platform cpu
  hlotrace passes --check 'simplify,remat{budget=200MB}'
  HLOTRACE_PASSES='fuse-reductions,cse' python train.py
  hlotrace show step.trace.json --lower --passes 'simplify,fuse-elementwise' --dump-passes stages/"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "passes",
        help="list the passes a pipeline may name (hlotrace's and MLIR's)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    parser.add_argument("--default", action="store_true", help="print each platform's default pipeline and exit")
    parser.add_argument(
        "--platform",
        choices=("cpu", "cuda"),
        help="with --default: only this platform's (any other runs the common part, as cuda)",
    )
    parser.add_argument("--check", metavar="PIPELINE", help="parse PIPELINE; print its canonical form")
    parser.set_defaults(handler=run)


def passes_report() -> list[dict]:
    from hlotrace.passes import PASSES, parse_pipeline  # lazy: parse_pipeline loads jax

    parse_pipeline("")  # imports hlotrace's own passes
    return [
        {
            "name": p.name,
            "kind": "mlir" if p.builtin else "hlotrace",
            "exact": p.exact,
            "options": dict(p.options),
            "description": p.description,
            "module": p.module,
        }
        for p in sorted(PASSES.values(), key=lambda p: (p.builtin, p.name))
    ]


def run(args) -> int:
    from hlotrace.passes import parse_pipeline, pipeline_text  # lazy: parse_pipeline loads jax

    if args.platform is not None and not args.default:
        raise CliError("--platform goes with --default")
    if args.default:
        if args.platform is not None:
            print(default_pipeline(args.platform) or '""  (no passes)')
            return 0
        for platform, pipeline in platform_defaults().items():
            print(f"{platform:<5} {pipeline or '(no passes)'}")
        return 0
    if args.check is not None:
        print(pipeline_text(parse_pipeline(args.check)) or '""  (no passes)')
        return 0
    report = passes_report()
    if args.json:
        json.dump({"passes": report, "default_pipelines": platform_defaults()}, sys.stdout, indent=2)
        print()
        return 0
    width = max(len(p["name"]) for p in report)
    lines = [f"{'PASS':<{width}}  {'KIND':<8}  {'EXACT':<5}  DESCRIPTION"]
    for p in report:
        lines.append(f"{p['name']:<{width}}  {p['kind']:<8}  {'yes' if p['exact'] else 'no':<5}  {p['description']}")
        for option, text in p["options"].items():
            lines.append(f"{'':<{width}}  {'':<8}  {'':<5}    {{{option}=...}}  {text}")
    lines.append("")
    lines.append("default pipeline (xla_trace without passes= or $HLOTRACE_PASSES), by platform:")
    lines.extend(f"  {platform:<5} {pipeline or '(none)'}" for platform, pipeline in platform_defaults().items())
    print("\n".join(lines))
    return 0
