"""hlotrace's layers, and its import graph checked against them (tests/test_layers.py).

Every module of ``hlotrace/`` belongs to one layer (:data:`LAYERS`, lowest first, the longest
matching prefix wins); a module may import from its own layer and the layers below. A lower
layer that must call up exposes a slot the higher layer fills (``hlotrace.namespace.F``,
``hlotrace.tensor.HOOKS``, ``hlotrace.spmd_hooks``, ``hlotrace.lowering.registry.SPMD_PLAN``).
Both module-level and in-function imports count. ``python -m hlotrace.testing.layers`` prints
the upward imports, the private names imported across packages and the largest import cycle.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# (layer, module prefixes): the README's "Architecture" section draws the same list.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "values",
        (
            "hlotrace.dtypes",
            "hlotrace.errors",
            "hlotrace.source",
            "hlotrace.versions",
            "hlotrace.metrics",
            "hlotrace.avals",
            "hlotrace.namespace",
            "hlotrace.overrides",
            "hlotrace.spmd_hooks",
            "hlotrace.config",
        ),
    ),
    ("recording", ("hlotrace.recording", "hlotrace.records", "hlotrace.trace")),
    ("tensor", ("hlotrace.tensor", "hlotrace.tensor_methods")),
    ("ops", ("hlotrace.ops.registry",)),
    ("dispatch", ("hlotrace.dispatch", "hlotrace.autodiff")),
    # The op families: OpDefs (reference, inference, samples, VJP) and their user functions.
    ("families", ("hlotrace.ops", "hlotrace.regions")),
    (
        "functional",
        (
            "hlotrace.functional",
            "hlotrace.losses",
            "hlotrace.nn_functional",
            "hlotrace.megengine_names",
            "hlotrace.random",
            "hlotrace.serialization",
        ),
    ),
    # The jaxlib MLIR bindings (version-sensitive calls live in runtime/ only: DESIGN.md).
    ("bindings", ("hlotrace.runtime.jaxlib_compat", "hlotrace.runtime.jaxlib_spmd", "hlotrace.runtime.jaxlib_execute")),
    ("lowering", ("hlotrace.lowering",)),
    ("passes", ("hlotrace.passes",)),
    ("runtime", ("hlotrace.runtime",)),
    (
        "compiled",
        ("hlotrace.compiled", "hlotrace.build", "hlotrace.arguments", "hlotrace.state", "hlotrace.recompiles"),
    ),
    ("jit", ("hlotrace.traced", "hlotrace.partial", "hlotrace.jit", "hlotrace.captures", "hlotrace.aot")),
    # Eager engines behind dispatch.apply's ENGINE slot (the device one builds on lowering and runtime).
    ("engines", ("hlotrace.engines",)),
    (
        "plug-ins",
        (
            "hlotrace.distributed",
            "hlotrace.nn",
            "hlotrace.optim",
            "hlotrace.data",
            "hlotrace.datasets",
            "hlotrace.interop",
        ),
    ),
    ("outside", ("hlotrace.tools", "hlotrace.testing", "hlotrace.debug", "hlotrace.__main__", "hlotrace")),
)

# Imports allowed to go up a layer, each with its reason. The list may only shrink: an entry
# that no longer occurs fails the test too.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("hlotrace.passes.remat", "hlotrace.runtime"): (
        "remat{policy=budget} measures XLA's temp bytes of candidate modules by compiling them: "
        "the compiler is its measuring instrument"
    ),
}

MAX_CYCLE = 5  # the largest strongly connected component the graph may hold


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    names: tuple[str, ...]
    line: int


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file, for every .py under ``root/hlotrace``."""
    found = {}
    for path in sorted((root / "hlotrace").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> list[Import]:
    """Every import of an hlotrace module by another (module-level and in-function; not
    those under ``if TYPE_CHECKING:``).

    ``from pkg import sub`` imports the module ``pkg.sub`` (not ``pkg``) when ``sub`` is a
    submodule; ``import hlotrace`` alone (for ``__version__``) is not counted."""
    known = modules(root)
    found = []
    for importer, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
            for stmt in node.body
            for inner in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:  # annotations only: never imported at run time
                continue
            if isinstance(node, ast.Import):
                targets = [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = []
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.append((sub, ()) if sub in known else (node.module, (alias.name,)))
            else:
                continue
            for name, names in targets:
                if name == "hlotrace" or not name.startswith("hlotrace."):
                    continue
                target = _resolve(name, known)
                if target and target != importer:
                    found.append(Import(importer, target, names, node.lineno))
    return found


def layer_of(module: str) -> int:
    best, length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = index, len(prefix)
    if best is None:
        raise KeyError(f"{module} is in no layer: add it to hlotrace.testing.layers.LAYERS")
    return best


def upward(found: list[Import]) -> list[Import]:
    return [i for i in found if layer_of(i.imported) > layer_of(i.importer)]


def _package(module: str) -> str:
    """The package a module belongs to (``hlotrace.ops.gather`` -> ``hlotrace.ops``; a
    top-level module is its own)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def private_across(found: list[Import]) -> list[Import]:
    """Imports of a ``_private`` name from another package."""
    return [
        i
        for i in found
        if any(n.startswith("_") and not n.startswith("__") for n in i.names)
        and _package(i.importer) != _package(i.imported)
    ]


def largest_cycle(found: list[Import]) -> list[str]:
    """The largest strongly connected component of the import graph (Tarjan)."""
    edges: dict[str, set[str]] = {}
    for i in found:
        edges.setdefault(i.importer, set()).add(i.imported)
        edges.setdefault(i.imported, set())
    index, low, stack, on, best, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        nonlocal best
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > len(best):
                best = sorted(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return best


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    found = imports(root)
    for i in upward(found):
        print(
            f"up   {i.importer}:{i.line} -> {i.imported} ({LAYERS[layer_of(i.importer)][0]} -> {LAYERS[layer_of(i.imported)][0]})"
        )
    for i in private_across(found):
        print(f"priv {i.importer}:{i.line} -> {i.imported}.{','.join(i.names)}")
    cycle = largest_cycle(found)
    print(f"largest import cycle: {len(cycle)} modules: {', '.join(cycle)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
