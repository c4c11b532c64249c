"""Mutants of hlotrace/passes/fuse_elementwise.py and tools/export_cmd.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/passes/fuse_elementwise.py"

MUTANTS = [
    Mutant(
        id="reduction-does-not-end-group",
        file=FILE,
        find='                if ops[p].name == "stablehlo.reduce":\n                    continue  # a reduction ends its group',
        replace="                if False:\n                    continue  # a reduction ends its group",
        why="ops consuming a reduction join its group, so groups grow across reductions",
    ),
    Mutant(
        id="backward-mixed-with-forward",
        file=FILE,
        find="                if p is None or p not in key_of or key_of[p] != backward:",
        replace="                if p is None or p not in key_of:",
        why="forward and backward elementwise ops are outlined into one composite",
    ),
    Mutant(
        id="midway-uses-ignored",
        file=FILE,
        find="            if any(p is None or p <= last for p in outside):",
        replace="            if any(p is None for p in outside):",
        why="a group whose value is read between its first and last op is outlined anyway (use before definition)",
    ),
    Mutant(
        id="single-ops-outlined",
        file=FILE,
        find='        if sum(ops[i].name in ELEMENTWISE or ops[i].name == "stablehlo.reduce" for i in members) >= 2:',
        replace='        if sum(ops[i].name in ELEMENTWISE or ops[i].name == "stablehlo.reduce" for i in members) >= 1:',
        why="every lone elementwise op becomes its own composite",
    ),
    Mutant(
        id="export-without-readback",
        file="hlotrace/tools/export_cmd.py",
        find='    composites = lowered.text(debug_info=False).count("stablehlo.composite")',
        replace="    composites = 0",
        why="the export summary reports no composites (what the user checks the artifact by)",
    ),
]
