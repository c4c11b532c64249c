"""``hlotrace graph``: a picture of a program's op graph (self-contained HTML or SVG, DOT,
or PNG through Graphviz)."""

from __future__ import annotations

import html
import os

from hlotrace import passes
from hlotrace.tools.checks import check_writable
from hlotrace.tools.common import CliError, add_target_arguments, target_trace
from hlotrace.tools.graph_layout import NODE_H, NODE_W, is_regions, layout, nested_counts
from hlotrace.tools.setup import add_setup_arguments

DESCRIPTION = """\
Draw the op graph of a program (FILE.py:FUNC recorded once on random --input values, or a
saved trace file): a box per recorded op with its name, result type and source line, an
edge per value passed from one op to the next, inputs and array constants at the top. Ops
are grouped in a dashed frame per fuse-elementwise composite (the groups that pass outlines:
softmax, attention, chains of elementwise ops) or, with --group scope, per named scope
(hlotrace.trace.scope). The records of a control-flow op's regions (a scan's body, a cond's
branches) are drawn in a grey frame named like their locations (rec12:scan/body), fed by
the op's inputs and feeding the op. Layers are longest paths from the inputs; each frame
gets its own band of columns, so a frame holds exactly its members (and the frames nested
in it). The output is one self-contained file, no network needed, chosen by the name's
ending: .html (hover a box for its attributes), .svg, .dot/.gv (Graphviz source: a cluster
per frame), or .png (the DOT rendered by Graphviz's 'dot' program, which must be on PATH).

--open hands the lowered StableHLO module to Google's Model Explorer (the optional
`model_explorer` package: pip install ai-edge-model-explorer) instead; its graph groups ops
by the location names hlotrace lowers with (rec<i>:<op> inside the user's file:line).

With --setup FILE.py:FACTORY instead of --input, FACTORY() (in FILE.py, which may be the
target's own file) returns (args, kwargs), modules, optimizers and GradManagers included, and
the target is recorded on them from their shapes (nothing runs, no state changes): your own
training step. --static NAME=VALUE passes a keyword argument as a static value."""

EPILOG = """\
examples:
  hlotrace graph examples/softmax_demo.py:fused_softmax --input 'f32[64,1000]' -o softmax.html
  hlotrace graph dumps/step.1.trace.json -o step.svg --group scope
  hlotrace graph model.py:forward -i 'f32[8,784]' -o forward.dot    # then: dot -Tpdf forward.dot
  hlotrace graph model.py:forward -i 'f32[8,784]' -o forward.png    # needs graphviz installed
  hlotrace graph model.py:forward -i 'f32[8,784]' --open"""

FORMATS = (".html", ".htm", ".svg", ".dot", ".gv", ".png")


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "graph",
        help="draw the op graph (HTML or SVG) with source lines, shapes and fusion groups",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    add_target_arguments(parser)
    parser.add_argument(
        "-o",
        "--out",
        default="graph.html",
        metavar="FILE",
        help="FILE.html, FILE.svg, FILE.dot (or .gv) or FILE.png (default: graph.html)",
    )
    parser.add_argument(
        "--group",
        choices=("fusion", "scope", "none"),
        default="fusion",
        help="frames around fuse-elementwise groups (default), named scopes, or none",
    )
    parser.add_argument("--open", action="store_true", help="open the module in Model Explorer (optional package)")
    add_setup_arguments(parser)
    parser.set_defaults(handler=run)


def fusion_groups(trace) -> dict[int, str]:
    """Record index -> composite label (``hlotrace.softmax #2``), from fuse-elementwise."""
    from hlotrace.lowering import lower_trace  # lazy: loads jax
    from hlotrace.passes.locations import record_location  # lazy: loads passes.locations (1 module)

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


def render_svg(trace, groups: dict[int, str]) -> str:
    geometry = layout(trace, groups)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{geometry.width}" height="{geometry.height}" '
        'font-family="monospace" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>',
    ]
    group_colors = ("#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#b9770e")
    groups_seen: list[str] = []
    for frame in geometry.all_frames():  # outermost first: nested frames are drawn over them
        if frame.kind == "group":
            groups_seen.append(frame.label)
            parts.append(_frame(frame.rect, frame.label, group_colors[(len(groups_seen) - 1) % 5], "5,3"))
        else:  # a region: a dotted grey frame
            parts.append(_frame(frame.rect, frame.label, "#555", "2,2"))
    for source, target in geometry.edges:
        (sx0, _, sx1, sy1), (tx0, ty0, tx1, _) = geometry.boxes[source], geometry.boxes[target]
        parts.append(
            f'<line x1="{(sx0 + sx1) / 2}" y1="{sy1}" x2="{(tx0 + tx1) / 2}" y2="{ty0}" stroke="#777" '
            f'marker-end="url(#arrow)"/>'
        )
    for node, (title, aval, where, *record) in geometry.labels.items():
        x, y, _, _ = geometry.boxes[node]
        fill = "#eef5fb" if node[0] == "rec" else "#f4f4f4"
        parts.append(
            f'<g><title>{html.escape(_tip(title, record))}</title><rect x="{x}" y="{y}" width="{NODE_W}" '
            f'height="{NODE_H}" rx="4" fill="{fill}" stroke="#34495e"/>'
            f'<text x="{x + 6}" y="{y + 14}" font-weight="bold">{html.escape(title[:28])}</text>'
            f'<text x="{x + 6}" y="{y + 27}">{html.escape(aval[:30])}</text>'
            f'<text x="{x + 6}" y="{y + 40}" fill="#666">{html.escape(where[:30])}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _tip(title: str, record: list) -> str:
    if not record:
        return title
    location, rec = record
    attrs = {k: v for k, v in rec.attrs.items() if not is_regions(v)}
    return f"{location} {attrs!r} inputs {list(rec.inputs)} -> %{rec.outputs[0]}"


def _frame(rect, label: str, color: str, dashes: str) -> str:
    x0, y0, x1, y1 = rect
    return (
        f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" stroke="{color}" '
        f'stroke-dasharray="{dashes}" rx="6"/><text x="{x0 + 4}" y="{y0 + 12}" fill="{color}">{html.escape(label)}</text>'
    )


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(trace, groups: dict[int, str]) -> str:
    """The graph in Graphviz's DOT language: a ``subgraph cluster_<k>`` per frame (Graphviz
    draws a cluster around exactly its nodes), the same boxes, edges and frames as the SVG."""
    geometry = layout(trace, groups)
    ids = {node: f"n{k}" for k, node in enumerate(geometry.labels)}
    lines = [
        f"digraph {_dot_string(trace.name)} {{",
        '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
        "  edge [color=gray40];",
    ]
    for node, (title, aval, where, *record) in geometry.labels.items():
        if not any(node in frame.members for frame in geometry.all_frames()):
            lines.append(_dot_node(ids[node], node, title, aval, where, record, "  "))
    counter = iter(range(1 << 30))

    def cluster(frame, indent: str) -> None:
        style = 'style=dashed, color="#2471a3"' if frame.kind == "group" else 'style=dotted, color="#555555"'
        lines.append(f"{indent}subgraph cluster_{next(counter)} {{")
        lines.append(f"{indent}  label={_dot_string(frame.label)}; {style};")
        for node in frame.members:
            title, aval, where, *record = geometry.labels[node]
            lines.append(_dot_node(ids[node], node, title, aval, where, record, indent + "  "))
        for child in frame.children:
            cluster(child, indent + "  ")
        lines.append(f"{indent}}}")

    for frame in geometry.frames:
        cluster(frame, "  ")
    lines.extend(f"  {ids[source]} -> {ids[target]};" for source, target in geometry.edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_node(name: str, node, title, aval, where, record, indent: str) -> str:
    fill = "#eef5fb" if node[0] == "rec" else "#f4f4f4"
    label = "\n".join(part for part in (title, aval, where) if part)
    return (
        f'{indent}{name} [label={_dot_string(label)}, tooltip={_dot_string(_tip(title, record))}, fillcolor="{fill}"];'
    )


def write_png(dot_text: str, out: str) -> None:
    """Render DOT text to ``out`` with Graphviz's ``dot`` program; a CliError when it is
    missing or fails."""
    import shutil
    import subprocess

    program = shutil.which("dot")
    if program is None:
        raise CliError(
            f"-o {out}: a PNG needs Graphviz's 'dot' program, which is not on PATH (install graphviz, e.g. "
            "'apt install graphviz' or 'brew install graphviz'), or write .svg, .html or .dot instead"
        )
    try:
        done = subprocess.run(
            [program, "-Tpng", "-o", out], input=dot_text, text=True, capture_output=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CliError(f"-o {out}: running {program} failed: {exc}") from None
    if done.returncode != 0:
        message = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise CliError(f"-o {out}: {program} failed: {message}")


def render_html(trace, groups: dict[int, str], title: str) -> str:
    svg = render_svg(trace, groups)
    nested, regions = nested_counts(trace.records)
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

    from hlotrace.lowering import lower_trace  # lazy: loads jax

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

    suffix = os.path.splitext(args.out)[1].lower()
    if not args.open and suffix not in FORMATS:
        raise CliError(f"-o {args.out}: expected a name ending in {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if not args.open:
        check_writable(args.out, "-o")
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
    if suffix == ".png":
        write_png(render_dot(trace, groups), args.out)
    else:
        if suffix in (".dot", ".gv"):
            text = render_dot(trace, groups)
        elif suffix == ".svg":
            text = render_svg(trace, groups)
        else:
            text = render_html(trace, groups, trace.name)
        try:
            with open(args.out, "w") as f:
                f.write(text)
        except OSError as exc:
            raise CliError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    nested, regions = nested_counts(trace.records)
    inside = f" (and {nested} in {regions} regions)" if regions else ""
    print(f"{args.out}: {len(trace.records)} ops{inside}, {len(set(groups.values()))} groups", file=sys.stderr)
    return 0
