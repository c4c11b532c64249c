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
(hlotrace.trace.scope). Layers are longest paths from the inputs. The output is one
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


def layout(trace) -> tuple[dict, list, dict]:
    """(node id -> (layer, column), edges, node id -> label lines) for values and records."""
    producer = {r.outputs[0]: i for i, r in enumerate(trace.records)}
    layer: dict = {}
    labels: dict = {}
    for v in trace.inputs:
        layer[("var", v)] = 0
        labels[("var", v)] = (f"input %{v}", str(trace.aval(v)), "")
    for v, value in trace.constants.items():
        if value.ndim:  # scalar constants are shown in the attributes, not as boxes
            layer[("var", v)] = 0
            labels[("var", v)] = (f"constant %{v}", str(trace.aval(v)), "")
    edges = []
    for i, record in enumerate(trace.records):
        sources = []
        for v in record.inputs:
            if v in producer:
                sources.append(("rec", producer[v]))
            elif ("var", v) in layer:
                sources.append(("var", v))
        layer[("rec", i)] = 1 + max((layer[s] for s in sources), default=0)
        edges.extend((s, ("rec", i)) for s in sources)
        where = f"{os.path.basename(record.location.file)}:{record.location.line}" if record.location else ""
        labels[("rec", i)] = (f"[{i}] {record.op}", str(trace.aval(record.outputs[0])), where)
    columns: dict[int, int] = {}
    position = {}
    for node in sorted(layer, key=lambda n: (layer[n], n[0] != "var", n[1])):
        column = columns.get(layer[node], 0)
        columns[layer[node]] = column + 1
        position[node] = (layer[node], column)
    return position, edges, labels


def render_svg(trace, groups: dict[int, str]) -> str:
    position, edges, labels = layout(trace)

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
        if ("rec", index) in position:
            boxes.setdefault(label, []).append(xy(("rec", index)))
    for k, (label, corners) in enumerate(sorted(boxes.items())):
        x0, y0 = min(x for x, _ in corners) - 8, min(y for _, y in corners) - 18
        x1, y1 = max(x for x, _ in corners) + NODE_W + 8, max(y for _, y in corners) + NODE_H + 8
        color = ("#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#b9770e")[k % 5]
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" stroke="{color}" '
            f'stroke-dasharray="5,3" rx="6"/><text x="{x0 + 4}" y="{y0 + 12}" fill="{color}">{html.escape(label)}</text>'
        )
    for source, target in edges:
        (x0, y0), (x1, y1) = xy(source), xy(target)
        parts.append(
            f'<line x1="{x0 + NODE_W / 2}" y1="{y0 + NODE_H}" x2="{x1 + NODE_W / 2}" y2="{y1}" stroke="#777" '
            f'marker-end="url(#arrow)"/>'
        )
    for node, (title, aval, where) in labels.items():
        x, y = xy(node)
        fill = "#eef5fb" if node[0] == "rec" else "#f4f4f4"
        tip = title
        if node[0] == "rec":
            record = trace.records[node[1]]
            tip = f"{title} {record.attrs!r} inputs {list(record.inputs)} -> %{record.outputs[0]}"
        parts.append(
            f'<g><title>{html.escape(tip)}</title><rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="4" '
            f'fill="{fill}" stroke="#34495e"/>'
            f'<text x="{x + 6}" y="{y + 14}" font-weight="bold">{html.escape(title[:28])}</text>'
            f'<text x="{x + 6}" y="{y + 27}">{html.escape(aval[:30])}</text>'
            f'<text x="{x + 6}" y="{y + 40}" fill="#666">{html.escape(where[:30])}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(trace, groups: dict[int, str], title: str) -> str:
    svg = render_svg(trace, groups)
    legend = f"{len(trace.records)} ops, {len(trace.inputs)} inputs; frames: {len(set(groups.values()))} groups"
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
    print(f"{args.out}: {len(trace.records)} ops, {len(set(groups.values()))} groups", file=sys.stderr)
    return 0
