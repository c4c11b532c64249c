"""``hlotrace passes``: every registered pass (hlotrace's and MLIR's) with its options."""

from __future__ import annotations

import json
import sys

DESCRIPTION = """\
List every pass a pipeline may name: hlotrace's own passes (Python, in hlotrace/passes/ or
registered by your code with @hlotrace.passes.register_pass) and MLIR's built-in passes, with
their options and one-line descriptions. 'exact' passes never change a computed bit (the
differential tests compare them bitwise). A pipeline is a comma-separated list, options in
braces: 'simplify,fuse-reductions,cse,remat{policy=sqrt}'. xla_trace(passes=...) and
$HLOTRACE_PASSES choose the pipeline; --default prints the one used otherwise. --check
PIPELINE parses a pipeline and prints its canonical form, checking every pass's options
exactly as running the pipeline would (the same function): an unknown option or a bad value
exits 2 naming the pass, the option, the value and the valid ones. MLIR's passes are listed
with the options hlotrace passes on to MLIR's own parser."""

EPILOG = """\
examples:
  hlotrace passes
  hlotrace passes --json
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
    parser.add_argument("--default", action="store_true", help="print the default pipeline and exit")
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
    from hlotrace.passes import DEFAULT_PIPELINE, parse_pipeline, pipeline_text  # lazy: parse_pipeline loads jax

    if args.default:
        print(DEFAULT_PIPELINE or '""  (no passes)')
        return 0
    if args.check is not None:
        print(pipeline_text(parse_pipeline(args.check)) or '""  (no passes)')
        return 0
    report = passes_report()
    if args.json:
        json.dump({"passes": report, "default_pipeline": DEFAULT_PIPELINE}, sys.stdout, indent=2)
        print()
        return 0
    width = max(len(p["name"]) for p in report)
    lines = [f"{'PASS':<{width}}  {'KIND':<8}  {'EXACT':<5}  DESCRIPTION"]
    for p in report:
        lines.append(f"{p['name']:<{width}}  {p['kind']:<8}  {'yes' if p['exact'] else 'no':<5}  {p['description']}")
        for option, text in p["options"].items():
            lines.append(f"{'':<{width}}  {'':<8}  {'':<5}    {{{option}=...}}  {text}")
    lines.append("")
    lines.append(f"default pipeline: {DEFAULT_PIPELINE or '(none)'}")
    print("\n".join(lines))
    return 0
