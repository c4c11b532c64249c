"""``hlotrace graph``: a picture of a program's op graph (self-contained HTML or SVG)."""

from __future__ import annotations

import html
import os

DESCRIPTION = """\
Draw the op graph of a program (FILE.py:FUNC recorded once on random --input values, or a
saved trace file): a box per recorded op with its name, result type and source line, an
edge per value passed from one op to the next, inputs and array constants at the top. Ops
are grouped in a dashed frame per fuse-elementwise composite (the groups that pass outlines:
softmax, attention, chains of elementwise ops) or, with --group scope, per named scope
(hlotrace.trace.scope). The records of a control-flow op's regions (a scan's body, a cond's
branches) are drawn in a grey frame named like their locations (rec12:scan/body), fed by
the op's inputs and feeding the op. Layers are longest paths from the inputs. The output is one
self-contained file, no network needed: HTML (hover a box for its attributes) or, for a
name ending in .svg, plain SVG.

--open hands the lowered StableHLO module to Google's Model Explorer (the optional
`model_explorer` package: pip install ai-edge-model-explorer) instead; its graph groups ops
by the location names hlotrace lowers with (rec<i>:<op> inside the user's file:line)."""

EPILOG = """\
examples:
  hlotrace graph examples/softmax_demo.py:fused_softmax --input 'f32[64,1000]' -o softmax.html
  hlotrace graph dumps/step.1.trace.json -o step.svg --group scope
  hlotrace graph model.py:forward -i 'f32[8,784]' --open"""

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 190, 46, 30, 46, 30


def add_parser(sub, formatter) -> None:
    from hlotrace.tools.common import add_target_arguments

    parser = sub.add_parser(
        "graph",
        help="draw the op graph (HTML or SVG) with source lines, shapes and fusion groups",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    add_target_arguments(parser)
    parser.add_argument(
        "-o", "--out", default="graph.html", metavar="FILE", help="FILE.html or FILE.svg (default: graph.html)"
    )
    parser.add_argument(
        "--group",
        choices=("fusion", "scope", "none"),
        default="fusion",
        help="frames around fuse-elementwise groups (default), named scopes, or none",
    )
    parser.add_argument("--open", action="store_true", help="open the module in Model Explorer (optional package)")
    parser.set_defaults(handler=run)


def fusion_groups(trace) -> dict[int, str]:
    """Record index -> composite label (``hlotrace.softmax #2``), from fuse-elementwise."""
    from hlotrace import passes
    from hlotrace.lowering import lower_trace
    from hlotrace.passes.locations import record_location

    fused = passes.run(lower_trace(trace), "fuse-elementwise")
    functions = {f.attributes["sym_name"].value: f for f in fused.module.body.operations if "sym_name" in f.attributes}
    composites = {}  # decomposition function -> the composite's name
    for op in functions["main"].regions[0].blocks[0].operations:
        if op.operation.name == "stablehlo.composite":
            decomposition = str(op.attributes["decomposition"]).strip('@"')
            composites[decomposition] = op.attributes["name"].value
    groups: dict[int, str] = {}
    for k, (name, function) in enumerate(functions.items()):
        if name == "main":
            continue
        name = composites.get(name, name)
        for block in function.regions[0].blocks:
            for op in block.operations:
                found = record_location(op)
                if found is not None:
                    groups.setdefault(found.record, f"{name} #{k}")
    return groups


def _is_regions(value) -> bool:
    from hlotrace.trace import Region

    return isinstance(value, Region) or (
        isinstance(value, tuple | list) and bool(value) and all(isinstance(v, Region) for v in value)
    )


def _regions(record) -> list[tuple[str, object]]:
    """``(name, Region)`` of a control-flow record, named as the lowering's locations name
    them (``body``, ``cond``, ``branch0`` ...)."""
    out = []
    for key, value in record.attrs.items():
        if not _is_regions(value):
            continue
        if isinstance(value, tuple | list):
            stem = "branch" if key == "branches" else key
            out.extend((f"{stem}{k}", region) for k, region in enumerate(value))
        else:
            out.append((key, value))
    return out


def _nested_counts(records) -> tuple[int, int]:
    """(records inside regions, regions), nested ones included."""
    ops = regions = 0
    for record in records:
        for _, region in _regions(record):
            inner_ops, inner_regions = _nested_counts(region.records)
            ops, regions = ops + len(region.records) + inner_ops, regions + 1 + inner_regions
    return ops, regions


def layout(trace) -> tuple[dict, list, dict, dict]:
    """(node id -> (layer, column), edges, node id -> label lines, region frames) for values
    and records. A record's node id is ``("rec", path)``: ``(12,)`` for the trace's record
    12, ``(12, "body", 3)`` for record 3 of its body. A control-flow record's regions are
    drawn as their own records, reading from the record's inputs, before the record, which
    their results feed; ``frames`` maps ``rec12:scan/body`` to the nodes of that region
    (nested regions' nodes included)."""
    layer: dict = {}
    labels: dict = {}
    frames: dict[str, list] = {}
    producer: dict[int, tuple] = {}
    for v in trace.inputs:
        layer[("var", v)] = 0
        labels[("var", v)] = (f"input %{v}", str(trace.aval(v)), "")
        producer[v] = ("var", v)
    for v, value in trace.constants.items():
        if value.ndim:  # scalar constants are shown in the attributes, not as boxes
            layer[("var", v)] = 0
            labels[("var", v)] = (f"constant %{v}", str(trace.aval(v)), "")
            producer[v] = ("var", v)
    edges = []

    def place(records, path: tuple, name: str, enclosing: list[str]) -> None:
        for i, record in enumerate(records):
            node = ("rec", (*path, i))
            location = f"{name}/rec{i}:{record.op}" if name else f"rec{i}:{record.op}"
            sources = []
            through_regions: set[int] = set()  # inputs a region reads: drawn into it, not to the record
            for region_name, region in _regions(record):
                fed = record.inputs[len(record.inputs) - len(region.params) :]
                reads = {v for r in region.records for v in r.inputs} | set(region.results)
                for param, v in zip(region.params, fed, strict=True):
                    if v in producer:
                        producer[param] = producer[v]
                    if param in reads:
                        through_regions.add(v)
                inner = f"{location}/{region_name}"
                frames[inner] = []
                place(region.records, (*path, i, region_name), inner, [*enclosing, inner])
                sources.extend(producer[v] for v in region.results if v in producer)
            sources.extend(producer[v] for v in record.inputs if v in producer and v not in through_regions)
            sources = list(dict.fromkeys(sources))
            layer[node] = 1 + max((layer[s] for s in sources), default=0)
            edges.extend((s, node) for s in sources)
            for v in record.outputs:
                producer[v] = node
            where = f"{os.path.basename(record.location.file)}:{record.location.line}" if record.location else ""
            labels[node] = (f"[{i}] {record.op}", str(trace.aval(record.outputs[0])), where, location, record)
            for frame in enclosing:
                frames[frame].append(node)

    place(trace.records, (), "", [])
    columns: dict[int, int] = {}
    position = {}
    for node in sorted(layer, key=lambda n: (layer[n], n[0] != "var", str(n[1]))):
        column = columns.get(layer[node], 0)
        columns[layer[node]] = column + 1
        position[node] = (layer[node], column)
    return position, edges, labels, frames


def render_svg(trace, groups: dict[int, str]) -> str:
    position, edges, labels, frames = layout(trace)

    def xy(node):
        row, column = position[node]
        return MARGIN + column * (NODE_W + GAP_X), MARGIN + row * (NODE_H + GAP_Y)

    width = MARGIN * 2 + max((c for _, c in position.values()), default=0) * (NODE_W + GAP_X) + NODE_W
    height = MARGIN * 2 + max((r for r, _ in position.values()), default=0) * (NODE_H + GAP_Y) + NODE_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 20}" font-family="monospace" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>',
    ]
    boxes: dict[str, list] = {}
    for index, label in groups.items():
        if ("rec", (index,)) in position:
            boxes.setdefault(label, []).append(xy(("rec", (index,))))
    for k, (label, corners) in enumerate(sorted(boxes.items())):
        parts.append(_frame(corners, label, ("#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#b9770e")[k % 5], "5,3"))
    for label, nodes in frames.items():  # a region: a dotted grey frame, nested ones inside
        if nodes:
            depth = label.count("/rec")
            parts.append(_frame([xy(n) for n in nodes], label, "#555", "2,2", pad=8 + 6 * (3 - min(depth, 3))))
    for source, target in edges:
        (x0, y0), (x1, y1) = xy(source), xy(target)
        parts.append(
            f'<line x1="{x0 + NODE_W / 2}" y1="{y0 + NODE_H}" x2="{x1 + NODE_W / 2}" y2="{y1}" stroke="#777" '
            f'marker-end="url(#arrow)"/>'
        )
    for node, (title, aval, where, *record) in labels.items():
        x, y = xy(node)
        fill = "#eef5fb" if node[0] == "rec" else "#f4f4f4"
        tip = title
        if record:
            location, rec = record
            attrs = {k: v for k, v in rec.attrs.items() if not _is_regions(v)}
            tip = f"{location} {attrs!r} inputs {list(rec.inputs)} -> %{rec.outputs[0]}"
        parts.append(
            f'<g><title>{html.escape(tip)}</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="4" '
            f'fill="{fill}" stroke="#34495e"/>'
            f'<text x="{x + 6}" y="{y + 14}" font-weight="bold">{html.escape(title[:28])}</text>'
            f'<text x="{x + 6}" y="{y + 27}">{html.escape(aval[:30])}</text>'
            f'<text x="{x + 6}" y="{y + 40}" fill="#666">{html.escape(where[:30])}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _frame(corners, label: str, color: str, dashes: str, pad: int = 8) -> str:
    x0, y0 = min(x for x, _ in corners) - pad, min(y for _, y in corners) - pad - 10
    x1, y1 = max(x for x, _ in corners) + NODE_W + pad, max(y for _, y in corners) + NODE_H + pad
    return (
        f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" stroke="{color}" '
        f'stroke-dasharray="{dashes}" rx="6"/><text x="{x0 + 4}" y="{y0 + 12}" fill="{color}">{html.escape(label)}</text>'
    )


def render_html(trace, groups: dict[int, str], title: str) -> str:
    svg = render_svg(trace, groups)
    nested, regions = _nested_counts(trace.records)
    inside = f" (and {nested} in {regions} control-flow regions, framed in grey)" if regions else ""
    legend = f"{len(trace.records)} ops{inside}, {len(trace.inputs)} inputs; frames: {len(set(groups.values()))} groups"
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:16px} .svg{overflow:auto;border:1px solid #ddd}</style>"
        f"</head><body><h3>{html.escape(title)}</h3><p>{html.escape(legend)}. Hover a box for its attributes.</p>"
        f"<div class='svg'>{svg}</div></body></html>\n"
    )


def _open_in_model_explorer(trace) -> None:
    import tempfile

    from hlotrace.lowering import lower_trace
    from hlotrace.tools.common import CliError

    try:
        import model_explorer
    except ImportError:
        raise CliError(
            "--open needs Google's Model Explorer: pip install ai-edge-model-explorer (or write HTML with -o)"
        ) from None
    path = os.path.join(tempfile.mkdtemp(prefix="hlotrace-graph-"), f"{trace.name}.mlir")
    with open(path, "w") as f:
        f.write(lower_trace(trace).text(debug_info=True))
    model_explorer.visualize(path)


def run(args) -> int:
    import sys

    from hlotrace.tools.common import CliError, target_trace

    if not args.open and not args.out.endswith((".html", ".htm", ".svg")):
        raise CliError(f"-o {args.out}: expected a name ending in .html or .svg")
    trace = target_trace(args)
    if args.open:
        _open_in_model_explorer(trace)
        return 0
    if args.group == "fusion":
        groups = fusion_groups(trace)
    elif args.group == "scope":
        groups = {i: f"{name} #{n}" for i, (name, n) in trace.scopes.items()}
    else:
        groups = {}
    text = render_svg(trace, groups) if args.out.endswith(".svg") else render_html(trace, groups, trace.name)
    try:
        with open(args.out, "w") as f:
            f.write(text)
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    nested, regions = _nested_counts(trace.records)
    inside = f" (and {nested} in {regions} regions)" if regions else ""
    print(f"{args.out}: {len(trace.records)} ops{inside}, {len(set(groups.values()))} groups", file=sys.stderr)
    return 0
