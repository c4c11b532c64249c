"""Small IR helpers the pass manager and the passes share: @main, a module's text and copy,
and the top-level op holding a nested one."""

from __future__ import annotations

from hlotrace.errors import PassError
from hlotrace.lowering.builder import main_function as lowering_main_function
from hlotrace.runtime.jaxlib_compat import ir


def main_function(module: ir.Module):
    """``func.func @main`` of ``module`` (a PassError if it has none)."""
    return lowering_main_function(module, PassError)


def module_asm(module: ir.Module, generic: bool = False) -> str:
    """``module``'s text with its locations (in the generic op form when ``generic``)."""
    return module.operation.get_asm(enable_debug_info=True, print_generic_op_form=generic)


def clone_module(module: ir.Module) -> ir.Module:
    """A deep copy of ``module`` (locations kept), in the same context."""
    with module.context:
        return ir.Module.parse(module_asm(module))


def top_level(op, position: dict):
    """The op of a block (``position``: its ops -> index) that is or contains ``op``, or None."""
    op = op.operation if hasattr(op, "operation") else op
    while op is not None and op not in position:
        parent = op.parent
        op = parent.operation if parent is not None else None
    return op
