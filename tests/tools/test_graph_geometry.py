"""``hlotrace graph``: every frame holds exactly its members (fusion groups, named scopes,
control-flow regions, nested ones), checked on generated programs; DOT and PNG output."""

from __future__ import annotations

import os
import re
import stat

import pytest

from hlotrace.testing.fuzz.generate import GeneratorError, generate
from hlotrace.tools import graph_cmd
from hlotrace.tools.cli import main
from hlotrace.tools.graph_layout import contains, intersects, layout

SEEDS = range(40)


def _programs():
    for seed in SEEDS:
        try:
            yield seed, generate(seed).trace
        except GeneratorError:
            continue


def check_geometry(geometry) -> int:
    """Assert the frame invariants; return how many frames there were."""
    frames = geometry.all_frames()
    boxes = geometry.boxes
    for frame in frames:
        members = set(frame.all_members())
        assert members, frame.label
        inside = {node for node, box in boxes.items() if intersects(frame.rect, box)}
        assert inside == members, (frame.label, sorted(map(str, inside ^ members)))
        assert all(contains(frame.rect, boxes[n]) for n in members), frame.label
        for child in frame.children:
            assert contains(frame.rect, child.rect), (frame.label, child.label)
    for a in frames:  # two frames are nested or apart, never crossing
        for b in frames:
            if a is not b and intersects(a.rect, b.rect):
                assert contains(a.rect, b.rect) or contains(b.rect, a.rect), (a.label, b.label)
    rects = list(boxes.values())
    for k, a in enumerate(rects):  # no two boxes overlap
        assert not any(intersects(a, b) for b in rects[k + 1 :])
    return len(frames)


def test_frames_hold_exactly_their_members_on_generated_programs():
    framed = 0
    for _seed, trace in _programs():
        groups = graph_cmd.fusion_groups(trace)
        framed += check_geometry(layout(trace, groups))
        scopes = {i: f"scope {i % 3}" for i in range(len(trace.records))}  # interleaved groups
        framed += check_geometry(layout(trace, scopes))
    assert framed > 40  # the generated programs did have fusion groups and regions


def test_nested_regions_are_framed_inside_each_other(tmp_path):
    source = tmp_path / "nest.py"
    source.write_text(
        "from hlotrace import functional as F\n"
        "def f(h, xs):\n"
        "    def step(h, x):\n"
        "        inner, _ = F.scan(lambda c, y: (F.tanh(c + y), None), h, xs)\n"
        "        return F.exp(inner) * x, F.sin(h)\n"
        "    h, ys = F.scan(step, h, xs)\n"
        "    return F.softmax(h + 1.0, axis=-1), ys\n"
    )
    trace_path = tmp_path / "nest.trace.json"
    assert main(["lower", f"{source}:f", "-i", "f32[3]", "-i", "f32[2,3]", "--trace-out", str(trace_path)]) == 0
    from hlotrace.tools.common import load_trace

    trace = load_trace(str(trace_path))
    geometry = layout(trace, graph_cmd.fusion_groups(trace))
    labels = [f.label for f in geometry.all_frames()]
    assert any(label.count("/") == 3 for label in labels), labels  # the inner scan's body
    check_geometry(geometry)


def test_dot_output_has_a_cluster_per_frame(tmp_path, capsys):
    source = tmp_path / "g.py"
    source.write_text(
        "from hlotrace import functional as F\n"
        "def f(x):\n"
        "    a = F.softmax(x, axis=-1)\n"
        "    return F.sum(a * F.gelu(x), axis=0)\n"
    )
    out = tmp_path / "g.dot"
    assert main(["graph", f"{source}:f", "-i", "f32[4,8]", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith('digraph "f" {') and text.rstrip().endswith("}")
    clusters = re.findall(r"subgraph cluster_\d+ \{\n\s+label=\"([^\"]+)\"", text)
    assert any(c.startswith("hlotrace.softmax") for c in clusters) and any(
        c.startswith("hlotrace.gelu") for c in clusters
    )
    assert text.count("->") >= 6 and "g.py:3" in text
    assert text.count("{") == text.count("}")


@pytest.fixture
def fake_dot(tmp_path, monkeypatch):
    """A 'dot' on PATH that records its arguments and standard input, and writes a PNG header."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "dot"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/dot.args\n'
        f"cat > {tmp_path}/dot.stdin\n"
        'case "$*" in *-Tpng*) ;; *) echo "bad format" >&2; exit 1;; esac\n'
        'out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        "printf '\\211PNG\\r\\n' > \"$out\"\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_png_goes_through_graphviz_dot(fake_dot, capsys):
    source = fake_dot / "p.py"
    source.write_text("from hlotrace import functional as F\ndef f(x):\n    return F.exp(x) + 1.0\n")
    out = fake_dot / "p.png"
    assert main(["graph", f"{source}:f", "-i", "f32[2]", "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    assert (fake_dot / "dot.stdin").read_text().startswith('digraph "f"')


def test_png_without_graphviz_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot there
    source = tmp_path / "p.py"
    source.write_text("from hlotrace import functional as F\ndef f(x):\n    return F.exp(x)\n")
    assert main(["graph", f"{source}:f", "-i", "f32[2]", "-o", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hlotrace: error:") and "'dot'" in err[0] and "graphviz" in err[0]
    assert not (tmp_path / "p.png").exists()
