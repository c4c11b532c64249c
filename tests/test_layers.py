"""The import graph of hlotrace/ keeps its layers (issue 34): every import goes to the
importer's own layer or one below (hlotrace.testing.layers.LAYERS), no module imports another
package's private name, no import cycle holds more than MAX_CYCLE modules, and the README's
architecture diagram lists the layers the code has; every in-function import of an hlotrace
module says why (a "# cycle: ..." or "# lazy: ..." comment), except in layers.EXEMPT."""

from __future__ import annotations

import re
from pathlib import Path

from hlotrace.testing import layers

ROOT = Path(__file__).resolve().parent.parent
FOUND = layers.imports(ROOT)


def _show(imports) -> str:
    return "\n".join(
        f"  {i.importer}:{i.line} -> {i.imported}{'.' + ','.join(i.names) if i.names else ''} "
        f"({layers.LAYERS[layers.layer_of(i.importer)][0]} -> {layers.LAYERS[layers.layer_of(i.imported)][0]})"
        for i in imports
    )


def test_every_module_has_a_layer():
    for module in layers.modules(ROOT):
        layers.layer_of(module)  # KeyError names the module


def test_imports_go_down_the_layers_only():
    up = [i for i in layers.upward(FOUND) if (i.importer, i.imported) not in layers.ALLOWED_UPWARD]
    assert not up, (
        "imports that go up a layer (a lower layer that must call up exposes a slot the higher layer "
        "fills; see hlotrace/testing/layers.py):\n" + _show(up)
    )


def test_the_allowed_upward_imports_still_exist():
    present = {(i.importer, i.imported) for i in layers.upward(FOUND)}
    stale = sorted(set(layers.ALLOWED_UPWARD) - present)
    assert not stale, f"remove these from ALLOWED_UPWARD (the list only shrinks): {stale}"


def test_no_private_name_is_imported_from_another_package():
    crossing = layers.private_across(FOUND)
    assert not crossing, "private names imported across packages:\n" + _show(crossing)


def test_no_large_import_cycle():
    cycle = layers.largest_cycle(FOUND)
    assert len(cycle) <= layers.MAX_CYCLE, f"an import cycle of {len(cycle)} modules: {cycle}"


def test_the_readme_draws_the_layers_of_the_code():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- layers -->\n```\n(.*?)```", text, re.S)
    assert block, "README.md: the architecture diagram (a ``` block after <!-- layers -->) is missing"
    drawn = [line.split(":")[0].strip() for line in block.group(1).splitlines() if ":" in line]
    assert drawn == [name for name, _ in reversed(layers.LAYERS)], (
        "README.md's layer diagram (top layer first) differs from hlotrace.testing.layers.LAYERS"
    )


def test_every_in_function_import_says_why():
    bare = layers.unexplained_in_function_imports(ROOT)
    assert not bare, (
        "in-function imports of hlotrace modules without a reason: move each to module level, or keep it "
        f"with a trailing comment tagged {' or '.join(map(repr, layers.IN_FUNCTION_REASONS))} "
        "(e.g. '# cycle: runtime.spmd imports this module', '# lazy: loads jax'):\n"
        + "\n".join(f"  {i.path}:{i.line}: {i.source}" for i in bare)
    )


def test_the_check_sees_bare_and_explained_imports(tmp_path):
    package = tmp_path / "hlotrace"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "import hlotrace.b\n\n\n"
        "def f():\n"
        "    import hlotrace.b\n"
        "    from hlotrace import b  # lazy: loads b\n"
        "    from . import b as c  # noqa: F401  (cycle: b imports a)\n\n"
        "    def g():\n"
        "        from hlotrace.b import x\n"
        "        import numpy\n"
    )
    (package / "b.py").write_text("x = 1\n")
    found = layers.in_function_imports(tmp_path)
    assert [(i.path, i.line, i.reason) for i in found] == [
        ("hlotrace/a.py", 5, None),
        ("hlotrace/a.py", 6, "lazy: loads b"),
        ("hlotrace/a.py", 7, "cycle: b imports a)"),
        ("hlotrace/a.py", 10, None),
    ]
    assert [i.line for i in layers.unexplained_in_function_imports(tmp_path, exempt=())] == [5, 10]
    assert layers.unexplained_in_function_imports(tmp_path, exempt=("hlotrace/a.py",)) == []
