"""hlotrace's layers, and its import graph checked against them (tests/test_layers.py).

Every module of ``hlotrace/`` belongs to one layer (:data:`LAYERS`, lowest first, the longest
matching prefix wins); a module may import from its own layer and the layers below. A lower
layer that must call up exposes a slot the higher layer fills (``hlotrace.namespace.F``,
``hlotrace.tensor.HOOKS``, ``hlotrace.spmd_hooks``, ``hlotrace.lowering.registry.SPMD_PLAN``).
Both module-level and in-function imports count; an in-function import of an hlotrace module
says why in a comment (:data:`IN_FUNCTION_REASONS`). ``python -m hlotrace.testing.layers``
prints the upward imports, the private names imported across packages, the in-function imports
without a reason and the largest import cycle.
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
    ("tensor", ("hlotrace.tensor", "hlotrace.tensor_methods", "hlotrace.torch_compat")),
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
        (
            "hlotrace.compiled",
            "hlotrace.build",
            "hlotrace.arguments",
            "hlotrace.state",
            "hlotrace.recompiles",
            "hlotrace.platforms",
        ),
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
            "hlotrace.torch",  # PyTorch's spellings over nn, optim and functional
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

# An import of an hlotrace module inside a function body says why it is not at module level,
# in a trailing comment with one of these tags: "# cycle: runtime.spmd imports this module"
# (module level would close an import cycle), "# lazy: loads jax" (it would load a heavy or
# higher layer early). Anything else goes to module level.
IN_FUNCTION_REASONS = ("cycle:", "lazy:")

# Files whose in-function imports are not held to that (paths from the project root): none.
EXEMPT: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class InFunctionImport:
    path: str  # from the project root
    line: int
    source: str  # the import statement as written
    reason: str | None  # its trailing comment from the first reason tag on, or None


def _is_hlotrace_import(node) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "hlotrace" or a.name.startswith("hlotrace.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level > 0 or module == "hlotrace" or module.startswith("hlotrace.")
    return False


def in_function_imports(root: Path) -> list[InFunctionImport]:
    """Every import of an hlotrace module (``import hlotrace...``, ``from hlotrace... import``,
    relative imports) inside a function body, anywhere under ``root/hlotrace``, with the reason
    its trailing comment gives (a tag of :data:`IN_FUNCTION_REASONS` on one of its lines)."""
    found = []
    for path in modules(root).values():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for function in ast.walk(ast.parse(text)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in function.body:
                for inner in ast.walk(node):
                    if not _is_hlotrace_import(inner):
                        continue
                    statement = lines[inner.lineno - 1 : inner.end_lineno]
                    comments = [line.partition("#")[2] for line in statement if "#" in line]
                    reasons = [c[c.index(tag) :].strip() for c in comments for tag in IN_FUNCTION_REASONS if tag in c]
                    found.append(
                        InFunctionImport(
                            path.relative_to(root).as_posix(),
                            inner.lineno,
                            " ".join(line.strip() for line in statement),
                            reasons[0] if reasons else None,
                        )
                    )
    # A function nested in another is walked twice: once is enough.
    return sorted(set(found), key=lambda i: (i.path, i.line))


def unexplained_in_function_imports(root: Path, exempt=EXEMPT) -> list[InFunctionImport]:
    """The in-function imports of hlotrace modules with no reason comment, outside ``exempt``."""
    return [i for i in in_function_imports(root) if i.reason is None and i.path not in exempt]


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
    for i in unexplained_in_function_imports(root):
        print(f"bare {i.path}:{i.line}: {i.source} (no '# cycle: ...' or '# lazy: ...' comment)")
    cycle = largest_cycle(found)
    print(f"largest import cycle: {len(cycle)} modules: {', '.join(cycle)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
