"""Mutants of hlotrace/passes/fuse_elementwise.py and hlotrace/tools/export_cmd.py (see TESTING.md)."""

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
    Mutant(
        id="scope-instances-merged",
        file=FILE,
        find="named.setdefault((found.scope, found.instance, found.backward), [])",
        replace="named.setdefault((found.scope, 0, found.backward), [])",
        why="two calls of softmax (two scope instances) are outlined as one composite",
    ),
    Mutant(
        id="named-records-merged",
        file=FILE,
        find="named.setdefault((NAMED_RECORDS[found.op], found.record, found.backward), [])",
        replace="named.setdefault((NAMED_RECORDS[found.op], 0, found.backward), [])",
        why="every gelu (or log_softmax) of the program lands in one composite",
    ),
    Mutant(
        id="attributes-swapped",
        file=FILE,
        find='attributes = {"records": " ".join(records), "lines": " ".join(lines)}',
        replace='attributes = {"records": " ".join(lines), "lines": " ".join(records)}',
        why="the composite's records and source lines attributes are swapped",
    ),
    Mutant(
        id="export-default-target-too-old",
        file="hlotrace/tools/export_cmd.py",
        find='DEFAULT_TARGET = "1.0.0"',
        replace='DEFAULT_TARGET = "0.9.0"',
        why="the default target cannot express composites, so a plain export fails",
    ),
    Mutant(
        id="constant-groups-outlined",
        file=FILE,
        find="        if name is not None or not folded.issuperset(members)\n",
        replace="",
        why="a group computed from constants only is outlined: XLA computes it at run time instead of folding it (other rounding)",
    ),
]
