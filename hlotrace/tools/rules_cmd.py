"""``hlotrace rules``: what the registries cover — per op its lowering rule, property test
and VJP, plus the composites of ``hlotrace.functional`` (recorded as the ops they use)."""

from __future__ import annotations

import inspect
import json
import sys

from hlotrace import functional
from hlotrace.ops import OPS
from hlotrace.ops.registry import is_differentiable
from hlotrace.tools.common import _write_stdout

PROG = "hlotrace"

DESCRIPTION = """\
List every registered op (sorted by family, then name) with its family, whether it has a
lowering rule, whether it has a property test (the generated property tests cover exactly
the ops that declare a sample strategy), its VJP (yes; n/a when the op is not
differentiable; MISSING) and its doc line; then the composites of hlotrace.functional,
which are recorded as the primitive ops they call. Every listed op is a primitive. Lowering
rules registered for no op (stale) are listed on stderr. Exit status 1 if any op lacks a
rule or a sample strategy, or a differentiable op lacks a VJP; 0 otherwise, so CI and
scripts can check coverage. --json fields per op: op, family, primitive, has_rule,
has_property_test, differentiable, has_vjp, vjp, doc, platform_rules (the platforms with a
rule of their own for the op, '+cuda' in the table's rule column)."""

EPILOG = """\
examples:
  hlotrace rules
  hlotrace rules --json | python -c 'import json,sys; print(json.load(sys.stdin)["missing_rules"])'
  hlotrace rules --json | python -c 'import json,sys; print([o["op"] for o in json.load(sys.stdin)["ops"] if o["has_vjp"]])'
  hlotrace rules > /dev/null || echo 'some op lacks a rule or a property test'
  hlotrace rules --matrix          # op x dtype x platform: tested, rule only, no rule, refused"""


def add_parser(sub, formatter) -> None:
    rules = sub.add_parser(
        "rules",
        help="list registered ops with their lowering-rule and property-test coverage",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    rules.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    rules.add_argument(
        "--matrix",
        action="store_true",
        help="the support matrix instead: op x dtype (probed with each op's inference) x platform (cpu/cuda)",
    )
    rules.set_defaults(handler=run)


def run(args) -> int:
    if args.matrix:
        import hlotrace.tools.rules_matrix as rules_matrix  # lazy: loads tools.rules_matrix (1 module)

        report = rules_matrix.matrix()
        _write_stdout(json.dumps(report, indent=1) if args.json else rules_matrix.text(report))
        return 0
    return run_rules(args, _write_stdout)


def _vjp_status(op) -> str:
    if not is_differentiable(op):
        return "n/a"  # no gradient flows through it (or reverse mode is refused: while_loop)
    return "yes" if op.vjp is not None else "MISSING"


def composites() -> list[dict]:
    """Public functions of hlotrace.functional that are not registered ops (made of ops)."""
    found = []
    for name, fn in vars(functional).items():
        if name.startswith("_") or name in OPS or not inspect.isfunction(fn):
            continue
        if fn.__module__ != functional.__name__:
            continue
        doc = (fn.__doc__ or "").strip().splitlines()
        found.append({"name": name, "doc": doc[0] if doc else ""})
    return sorted(found, key=lambda c: c["name"])


def rules_report() -> dict:
    """Coverage of the registries: one entry per op (rule, property test, VJP), the
    composites, and the ops missing a rule, a sample strategy or a VJP."""
    import hlotrace.lowering.rules  # noqa: F401  lazy: loads jax (fills RULES)
    from hlotrace.lowering import PLATFORM_RULES, RULES  # lazy: loads jax

    ops = []
    for op in sorted(OPS.values(), key=lambda o: (o.family, o.name)):
        doc = (op.doc or "").strip().splitlines()
        ops.append(
            {
                "op": op.name,
                "family": op.family,
                "primitive": True,
                "has_rule": op.name in RULES,
                "platform_rules": sorted(p for p, table in PLATFORM_RULES.items() if op.name in table),
                "has_property_test": op.sample is not None,
                "differentiable": is_differentiable(op),
                "has_vjp": callable(op.vjp),
                "vjp": _vjp_status(op),
                "doc": doc[0] if doc else "",
            }
        )
    return {
        "ops": ops,
        "composites": composites(),
        "missing_rules": [o["op"] for o in ops if not o["has_rule"]],
        "missing_samples": [o["op"] for o in ops if not o["has_property_test"]],
        "missing_vjps": [o["op"] for o in ops if o["differentiable"] and not o["has_vjp"]],
        "stale_rules": sorted(name for name in RULES if name not in OPS),
    }


def run_rules(args, write) -> int:
    report = rules_report()
    status = 1 if report["missing_rules"] or report["missing_samples"] or report["missing_vjps"] else 0
    if args.json:
        write(json.dumps(report, indent=1))
        return status

    header = ("op", "family", "rule", "property test", "vjp", "doc")
    rows = [
        (
            o["op"],
            o["family"],
            ("yes" if o["has_rule"] else "no") + "".join(f" +{p}" for p in o["platform_rules"]),
            "yes" if o["has_property_test"] else "no",
            o["vjp"],
            o["doc"] or "-",
        )
        for o in report["ops"]
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    lines.append("")
    lines.append("vjp n/a: not differentiable (comparisons, logic, integer results). Every op above is a primitive.")
    lines.append("composites in hlotrace.functional (recorded as the primitives they call; no rule of their own):")
    width = max((len(c["name"]) for c in report["composites"]), default=0)
    lines.extend(f"  {c['name'].ljust(width)}  {c['doc'] or '-'}" for c in report["composites"])
    write("\n".join(lines))

    n = len(rows)
    print(
        f"{PROG}: {n} ops, {n - len(report['missing_rules'])} with lowering rules, "
        f"{n - len(report['missing_samples'])} with property tests, "
        f"{sum(o['has_vjp'] for o in report['ops'])} with VJPs "
        f"({sum(not o['differentiable'] for o in report['ops'])} not differentiable), "
        f"{len(report['composites'])} composites, {len(report['stale_rules'])} stale rules",
        file=sys.stderr,
    )
    for key, what in (
        ("missing_rules", "ops without a lowering rule"),
        ("missing_samples", "ops without a sample strategy (no property test)"),
        ("missing_vjps", "differentiable ops without a VJP"),
        ("stale_rules", "stale lowering rules (no op of that name)"),
    ):
        if report[key]:
            print(f"{PROG}: {what}: {', '.join(report[key])}", file=sys.stderr)
    return status
