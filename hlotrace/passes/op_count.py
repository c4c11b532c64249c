"""The one rule by which hlotrace counts a module's ops: the pass manager's timings and
every ``hlotrace`` command that prints a count (``lower``, ``stages``, ``show``, ``diff``)
call :func:`op_counts`, so the same module is the same number everywhere.

Counted: every operation inside the module's functions, the ops nested in regions
included (a reduce's combiner, a loop's body, a branch). Not counted: terminators
(``func.return``, ``stablehlo.return``), the ``func.func`` ops themselves and module-level
declarations (``sdy.mesh``)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the rule itself needs no MLIR bindings: `hlotrace --help` imports it
    from hlotrace.runtime.jaxlib_compat import ir

TERMINATORS = frozenset({"func.return", "stablehlo.return", "sdy.return"})

RULE = (
    "ops are counted in every function of the module, nested regions included (a reduce's "
    "combiner, a loop's body); terminators (func.return, stablehlo.return) are not counted"
)


def op_counts(module: ir.Module) -> Counter:
    """Op name -> how many of it the module holds, by the rule above.

    >>> op_counts(lowered.module)["stablehlo.reduce"]
    3
    """
    counts: Counter = Counter()

    def walk(block) -> None:
        for op in block.operations:
            name = op.operation.name
            if name not in TERMINATORS:
                counts[name] += 1
            for region in op.operation.regions:
                for inner in region.blocks:
                    walk(inner)

    for op in module.body.operations:
        if op.operation.name == "func.func":
            for region in op.operation.regions:
                for block in region.blocks:
                    walk(block)
    return counts


def count_ops(module: ir.Module) -> int:
    """The module's op count (see :func:`op_counts`)."""
    return sum(op_counts(module).values())
