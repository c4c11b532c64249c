"""``hlotrace diff``: compare two traces, modules or dump directories."""

from __future__ import annotations

import os
import re
from collections import Counter

from hlotrace.passes.op_count import RULE as OP_COUNT_RULE
from hlotrace.passes.op_count import op_counts
from hlotrace.tools.common import CliError, _write_stdout, load_trace

DESCRIPTION = f"""\
Compare A and B, each a trace file (*.json: lowered first), a StableHLO module (*.mlir, as
'hlotrace lower' or 'stages -o' write it, with locations), or a directory of them (files
with the same name are compared; files in only one side are listed). Prints per op name
the count in A, in B and the difference ({OP_COUNT_RULE}, as in every hlotrace command), then the structural diff aligned by source
location: for each location (the user's file:line, else hlotrace's rec<i>:<op> name) whose
ops differ, the ops only A or only B has there. Ops inside a control-flow region (a loop
body, a branch) are located under their control-flow op: 'model.py:9 scan/body > model.py:6'
is line 6 in the body of the scan called at line 9 (the lowering's rec0:scan/body/rec2:tanh).
Exit status 0 when A and B hold the same ops at the same locations, 1 when they differ (as
diff(1)), 2 for bad input."""

EPILOG = """\
examples:
  hlotrace diff before.trace.json after.trace.json
  hlotrace stages model.py:f -i 'f32[8,8]' -o a/ && hlotrace diff a/01-stablehlo.mlir a/05-after-fuse-reductions.mlir
  hlotrace diff dumps-main/ dumps-branch/"""

_OP = re.compile(r"^\s*(?:%[\w#:, %]+=\s*)?\"?([a-z_]+\.[a-z_][\w.]*)\"?[ (]")
_LOC_REF = re.compile(r"loc\((#loc\d*)\)\s*$")
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_FILE_LINE = re.compile(r'"([^"]+)":(\d+)')
_NAME = re.compile(r'^"([^"]+)"')


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "diff",
        help="compare two traces, modules or dump directories: op counts and a diff by source location",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("a", metavar="A", help="a trace file, a .mlir module or a directory of them")
    parser.add_argument("b", metavar="B", help="the same kind of thing as A")
    parser.set_defaults(handler=run)


def module_text(path: str) -> str:
    """The module text of a .mlir file, or of a trace file lowered (with locations)."""
    if path.endswith(".json"):
        from hlotrace.lowering import lower_trace  # lazy: loads jax

        return lower_trace(load_trace(path)).text(debug_info=True)
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None


def located_ops(text: str) -> Counter:
    """(location, op name) -> count, for every op line of a module's text.

    An op with regions (``stablehlo.while``, ``case``) prints its location after its
    regions, on the line that closes them: it is counted there, at its own location."""
    definitions = {}
    for line in text.splitlines():
        match = _LOC_DEF.match(line)
        if match:
            definitions[match.group(1)] = match.group(2)
    names = {}  # location name -> its definition (a nested op's location names its parent's)
    for definition in definitions.values():
        name = _NAME.match(definition)
        if name:
            names.setdefault(name.group(1), definition)
    counts: Counter = Counter()
    open_ops: list[tuple[str, int]] = []  # ops whose regions are being printed, with their depth
    depth = 0
    for line in text.splitlines():
        if line.startswith("#loc"):
            continue
        stripped = line.strip()
        before, depth = depth, depth + line.count("{") - line.count("}")
        ref = _LOC_REF.search(line)
        if stripped.startswith("}"):
            if ref and open_ops and open_ops[-1][1] == depth:
                counts[(_where(definitions.get(ref.group(1), ""), definitions, names), open_ops.pop()[0])] += 1
            continue
        if stripped.startswith(("func.func", "module", "^")):
            continue
        op = _OP.match(line)
        if not op:
            continue
        if ref is None:
            open_ops.append((op.group(1), before))
            continue
        counts[(_where(definitions.get(ref.group(1), ""), definitions, names), op.group(1))] += 1
    return counts


# "<control-flow op's name>/<region>/<the nested op's name>", e.g. rec0:scan/body/rec2:tanh
_NESTED = re.compile(r"^(.*)/([A-Za-z_]\w*)/((?:rec\d+:|const%)[^/]*)$")
_OP_NAME = re.compile(r"rec\d+:([^:@/]+)")


def _where(definition: str, definitions: dict, names: dict | None = None, depth: int = 0) -> str:
    """file:line of a location (following #loc references), else its name, else '-'. A
    location nested in a region reads ``<where the control-flow op is> <op>/<region> >
    <where the nested op is>``."""
    name = _NAME.match(definition)
    nested = _NESTED.match(name.group(1)) if name else None
    if nested and depth < 8:
        outer, region, inner = nested.groups()
        outer_op = _OP_NAME.search(outer.rsplit("/", 1)[-1])
        where_outer = _where(names[outer], definitions, names, depth + 1) if names and outer in names else outer
        inner_where = _where(definition.replace(name.group(1), inner, 1), definitions, None, depth + 1)
        return f"{where_outer} {outer_op.group(1) if outer_op else outer}/{region} > {inner_where}"
    found = _FILE_LINE.search(definition)
    if found:
        return f"{os.path.basename(found.group(1))}:{found.group(2)}"
    for ref in re.findall(r"#loc\d*", definition):
        if depth < 8 and ref in definitions:
            inner = _where(definitions[ref], definitions, names, depth + 1)
            if inner != "-":
                return inner
    return name.group(1) if name else "-"


def kind_counts(text: str, what: str) -> Counter:
    """Op name -> count of a module's text, by the rule every hlotrace command counts with
    (hlotrace.passes.op_count)."""
    from hlotrace.runtime.jaxlib_compat import ir, shared_context  # lazy: loads jax

    try:
        module = ir.Module.parse(text, context=shared_context())
    except Exception as exc:  # MLIRError: not a module these dialects can read
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()][:3]
        raise CliError(f"cannot parse {what} as a StableHLO module: {' '.join(lines) or type(exc).__name__}") from None
    return op_counts(module)


def compare(text_a: str, text_b: str, label: str = "", names=("A", "B")) -> tuple[bool, list[str]]:
    a, b = located_ops(text_a), located_ops(text_b)
    ops_a, ops_b = kind_counts(text_a, names[0]), kind_counts(text_b, names[1])
    out = [f"== {label}" if label else "== op counts"]
    out.append(f"  {'op':<32} {'A':>5} {'B':>5} {'B-A':>5}")
    for op in sorted(set(ops_a) | set(ops_b)):
        delta = ops_b[op] - ops_a[op]
        mark = "" if delta == 0 else " *"
        out.append(f"  {op:<32} {ops_a[op]:>5} {ops_b[op]:>5} {delta:>+5}{mark}")
    out.append(
        f"  {'total':<32} {sum(ops_a.values()):>5} {sum(ops_b.values()):>5} {sum(ops_b.values()) - sum(ops_a.values()):>+5}"
    )
    locations = sorted({loc for loc, _ in a} | {loc for loc, _ in b}, key=_location_key)
    changed = []
    for loc in locations:
        only_a = {op: n - b[(loc, op)] for (where, op), n in a.items() if where == loc and n > b[(loc, op)]}
        only_b = {op: n - a[(loc, op)] for (where, op), n in b.items() if where == loc and n > a[(loc, op)]}
        if only_a or only_b:
            parts = [f"-{n} {op}" for op, n in sorted(only_a.items())] + [
                f"+{n} {op}" for op, n in sorted(only_b.items())
            ]
            changed.append(f"  {loc:<28} {', '.join(parts)}")
    out.append("by location (ops only in A: -, only in B: +):" if changed else "by location: the same ops everywhere")
    out.extend(changed)
    return bool(changed) or ops_a != ops_b, out


def _location_key(loc: str):
    """Sort by file and line, a region's ops right after the op that holds them."""
    key = []
    for part in loc.split(" > "):
        where, _, region = part.partition(" ")
        file, _, line = where.rpartition(":")
        key.append((file, int(line), region) if line.isdigit() else (part, 0, ""))
    return tuple(key)


def run(args) -> int:
    for path in (args.a, args.b):
        if not os.path.exists(path):
            raise CliError(f"no such file or directory: {path}")
    if os.path.isdir(args.a) != os.path.isdir(args.b):
        raise CliError("A and B must both be directories, or both files")
    if os.path.isdir(args.a):
        names_a = {f for f in os.listdir(args.a) if f.endswith((".mlir", ".json"))}
        names_b = {f for f in os.listdir(args.b) if f.endswith((".mlir", ".json"))}
        if not names_a and not names_b:
            raise CliError(f"neither {args.a} nor {args.b} holds .mlir or .json files")
        differ, lines = False, []
        for name in sorted(names_a & names_b):
            path_a, path_b = os.path.join(args.a, name), os.path.join(args.b, name)
            d, out = compare(module_text(path_a), module_text(path_b), name, (path_a, path_b))
            differ |= d
            lines.extend(out)
        for name in sorted(names_a ^ names_b):
            differ = True
            lines.append(f"only in {args.a if name in names_a else args.b}: {name}")
    else:
        differ, lines = compare(module_text(args.a), module_text(args.b), names=(args.a, args.b))
    _write_stdout("\n".join(lines))
    return 1 if differ else 0
