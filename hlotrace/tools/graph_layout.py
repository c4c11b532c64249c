"""Where ``hlotrace graph`` puts each box: layers by longest path from the inputs, and a
vertical band of columns per frame (a fusion group, a named scope, a control-flow region),
so that a frame's rectangle holds exactly its members and the frames nested in it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hlotrace.trace import Region

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 190, 46, 30, 46, 30
FRAME_PAD, LABEL_H = 8, 12  # around a frame's contents; its name above them


@dataclass
class Frame:
    """A labelled rectangle around ``members`` (its own nodes, not those of nested frames)."""

    label: str
    kind: str  # "group" (fusion group or scope) or "region" (a control-flow region)
    members: list = field(default_factory=list)
    children: list = field(default_factory=list)  # nested Frames, in drawing order
    rect: tuple = (0, 0, 0, 0)  # x0, y0, x1, y1

    def all_members(self) -> list:
        return self.members + [n for child in self.children for n in child.all_members()]


@dataclass
class Geometry:
    """Boxes (node -> x0, y0, x1, y1), edges, labels and frames (outermost first) of a graph."""

    boxes: dict
    edges: list
    labels: dict
    frames: list  # top-level Frames; nested ones in their .children
    width: int = 0
    height: int = 0

    def all_frames(self) -> list:
        out, stack = [], list(self.frames)
        while stack:
            frame = stack.pop(0)
            out.append(frame)
            stack[:0] = frame.children
        return out


def is_regions(value) -> bool:
    return isinstance(value, Region) or (
        isinstance(value, tuple | list) and bool(value) and all(isinstance(v, Region) for v in value)
    )


def regions(record) -> list[tuple[str, object]]:
    """``(name, Region)`` of a control-flow record, named as the lowering's locations name
    them (``body``, ``cond``, ``branch0`` ...)."""
    out = []
    for key, value in record.attrs.items():
        if not is_regions(value):
            continue
        if isinstance(value, tuple | list):
            stem = "branch" if key == "branches" else key
            out.extend((f"{stem}{k}", region) for k, region in enumerate(value))
        else:
            out.append((key, value))
    return out


def nested_counts(records) -> tuple[int, int]:
    """(records inside regions, regions), nested ones included."""
    ops = count = 0
    for record in records:
        for _, region in regions(record):
            inner_ops, inner_regions = nested_counts(region.records)
            ops, count = ops + len(region.records) + inner_ops, count + 1 + inner_regions
    return ops, count


def graph(trace) -> tuple[dict, list, dict, dict]:
    """(node id -> layer, edges, node id -> label, region name -> the chain of region names
    enclosing each of its nodes, as node -> [outermost, ..., innermost]).

    A record's node id is ``("rec", path)``: ``(12,)`` for the trace's record 12,
    ``(12, "body", 3)`` for record 3 of its body. A control-flow record's regions are drawn
    as their own records, reading from the record's inputs, before the record, which their
    results feed; their frames are named like their locations (``rec12:scan/body``)."""
    layer: dict = {}
    labels: dict = {}
    chains: dict = {}
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
            for region_name, region in regions(record):
                fed = record.inputs[len(record.inputs) - len(region.params) :]
                reads = {v for r in region.records for v in r.inputs} | set(region.results)
                for param, v in zip(region.params, fed, strict=True):
                    if v in producer:
                        producer[param] = producer[v]
                    if param in reads:
                        through_regions.add(v)
                inner = f"{location}/{region_name}"
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
            chains[node] = list(enclosing)

    place(trace.records, (), "", [])
    return layer, edges, labels, chains


def layout(trace, groups: dict[int, str]) -> Geometry:
    """The Geometry of ``trace``'s graph with a frame per label of ``groups`` (top-level record
    index -> group label) and one per control-flow region.

    Rows are layers. Columns are handed out per frame: a frame owns a band of columns, across
    all rows, that no box outside it uses, so its rectangle (its boxes and nested frames,
    padded) holds its members and nothing else."""
    layer, edges, labels, chains = graph(trace)
    root = Frame("", "root")
    frames: dict[tuple, Frame] = {}

    def frame_of(chain: tuple) -> Frame:
        if not chain:
            return root
        if chain not in frames:
            kind = "group" if chain[0].startswith("group:") else "region"
            frames[chain] = Frame(chain[-1].removeprefix("group:"), kind)
            frame_of(chain[:-1]).children.append(frames[chain])
        return frames[chain]

    order = sorted(layer, key=lambda n: (layer[n], n[0] != "var", str(n[1])))
    for node in order:
        chain = list(chains.get(node, ()))
        if node[0] == "rec" and len(node[1]) == 1 and node[1][0] in groups:
            chain.insert(0, f"group:{groups[node[1][0]]}")
        frame_of(tuple(chain)).members.append(node)

    boxes: dict = {}

    def place(frame: Frame, x: int) -> int:
        """Put ``frame``'s boxes and nested frames from ``x`` on; return its content width."""
        per_row: dict[int, int] = {}
        for node in frame.members:
            column = per_row.get(layer[node], 0)
            per_row[layer[node]] = column + 1
            x0, y0 = x + column * (NODE_W + GAP_X), MARGIN + layer[node] * (NODE_H + GAP_Y)
            boxes[node] = (x0, y0, x0 + NODE_W, y0 + NODE_H)
        columns = max(per_row.values(), default=0)
        width = columns * NODE_W + max(columns - 1, 0) * GAP_X
        for child in frame.children:
            start = x + width + (GAP_X if width else 0)
            inner = place(child, start + FRAME_PAD)
            width = start + inner + 2 * FRAME_PAD - x
        return width

    def enclose(frame: Frame) -> tuple:
        rects = [boxes[n] for n in frame.members] + [enclose(child) for child in frame.children]
        frame.rect = (
            min(r[0] for r in rects) - FRAME_PAD,
            min(r[1] for r in rects) - FRAME_PAD - LABEL_H,
            max(r[2] for r in rects) + FRAME_PAD,
            max(r[3] for r in rects) + FRAME_PAD,
        )
        return frame.rect

    # Frames without members (an empty region) are not drawn.
    def prune(frame: Frame) -> None:
        for child in frame.children:
            prune(child)
        frame.children = [c for c in frame.children if c.all_members()]

    prune(root)
    place(root, MARGIN)
    for frame in root.children:
        enclose(frame)
    top = min((f.rect[1] for f in root.children), default=MARGIN)
    shift = max(0, MARGIN - top)  # nested frames' names above the first row
    if shift:
        boxes = {n: (x0, y0 + shift, x1, y1 + shift) for n, (x0, y0, x1, y1) in boxes.items()}
        for frame in root.children:
            enclose(frame)
    geometry = Geometry(boxes, edges, labels, root.children)
    rects = list(boxes.values()) + [f.rect for f in geometry.all_frames()]
    geometry.width = max((r[2] for r in rects), default=0) + MARGIN
    geometry.height = max((r[3] for r in rects), default=0) + MARGIN
    return geometry


def intersects(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def contains(outer: tuple, inner: tuple) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2] and inner[3] <= outer[3]
