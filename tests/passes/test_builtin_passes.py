"""hlotrace's own passes register through one import (hlotrace.passes.builtin), which must
name every module of hlotrace/passes/ that registers a pass: a new pass file it misses fails
here rather than going unregistered."""

import ast
from pathlib import Path

import hlotrace.passes as passes

PASSES_DIR = Path(passes.__file__).parent


def _registers_a_pass(tree: ast.Module) -> bool:
    """A module-level ``@register_pass(...)`` decorator or ``register_pass(...)(fn)`` call."""
    for node in tree.body:
        calls = [d for d in getattr(node, "decorator_list", ())]
        if isinstance(node, ast.Expr):
            calls.append(node.value)
        for call in calls:
            while isinstance(call, ast.Call):
                func = call.func
                if isinstance(func, ast.Name) and func.id == "register_pass":
                    return True
                call = func
    return False


def test_builtin_imports_every_module_that_registers_a_pass():
    builtin = ast.parse((PASSES_DIR / "builtin.py").read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in builtin.body
        if isinstance(node, ast.ImportFrom) and node.module == "hlotrace.passes"
        for alias in node.names
    }
    registering = {
        path.stem
        for path in PASSES_DIR.glob("*.py")
        if path.stem != "builtin" and _registers_a_pass(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert registering, "no pass module found: the scan is broken"
    assert registering == imported


def test_the_first_pipeline_registers_the_builtin_passes():
    from hlotrace.passes import PASSES, parse_pipeline

    parse_pipeline("simplify")
    for name in ("simplify", "elide-guards", "fuse-reductions", "fuse-elementwise", "remat"):
        assert name in PASSES, name
