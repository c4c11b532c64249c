"""Mutants of bisect's search and comparison (hlotrace/debug.py), killed by
tests/tools/test_bisect.py; run with ``make mutation ARGS="--only debug --columns suite"``."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/debug.py"

MUTANTS = [
    Mutant(
        id="windows-last-first",
        file=FILE,
        find="    for start in range(0, len(trace.records), window):\n",
        replace="    for start in reversed(range(0, len(trace.records), window)):\n",
        why="the windows are searched from the end: a later divergence (or none) is reported first",
    ),
    Mutant(
        id="compares-reference-with-itself",
        file=FILE,
        find="    return mismatches(actual, expected, _tolerance(trace, var))\n",
        replace="    return mismatches(expected, expected, _tolerance(trace, var))\n",
        why="the compiled value is never looked at: nothing ever diverges",
    ),
    Mutant(
        id="intermediates-off-by-one",
        file=FILE,
        find="zip(indices, extra, outputs[len(trace.outputs) :], strict=True)",
        replace="zip(indices, extra, outputs[len(trace.outputs) - 1 :], strict=False)",
        why="each record is compared with the previous output's value",
    ),
    Mutant(
        id="flush-excuses-everything",
        file=FILE,
        find="        return False  # no subnormal operand\n",
        replace="        return True  # no subnormal operand\n",
        why="every divergence is labelled a known subnormal flush",
    ),
    Mutant(
        id="search-goes-on",
        file=FILE,
        find="                report.divergence = _divergence(trace, i, var, actual, want, bad, reference)\n                return report\n",
        replace="                report.divergence = report.divergence or _divergence(trace, i, var, actual, want, bad, reference)\n",
        why="the search does not stop at the first divergence (a window's later records are compared too)",
    ),
]
