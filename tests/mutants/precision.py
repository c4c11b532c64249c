"""Mutants of the matmul precision policy (issue 38 item 3): a setting that does not reach
the rules, or a cache key without it.

hlotrace/lowering/hlo.py (the precision_config every float32 dot_general and convolution
gets), hlotrace/lowering/registry.py (lower_trace's setting), hlotrace/traced.py (the cache
keys and ``.lower()``), hlotrace/partial.py. Killed by tests/test_precision.py (each was
checked by hand against that file alone); run with
``make mutation ARGS="--only precision --columns suite"``.
"""

from hlotrace.testing.mutation import Mutant

HLO = "hlotrace/lowering/hlo.py"
REGISTRY = "hlotrace/lowering/registry.py"
TRACED = "hlotrace/traced.py"
PARTIAL = "hlotrace/partial.py"

MUTANTS = [
    Mutant(
        id="rules-always-highest",
        file=HLO,
        find="level = stablehlo.PrecisionAttr.get(MATMUL_PRECISION.get().upper())",
        replace='level = stablehlo.PrecisionAttr.get("HIGHEST")',
        why="the rules ignore the precision setting: every float32 dot and convolution stays HIGHEST",
        ops=("matmul", "conv2d"),
    ),
    Mutant(
        id="lowering-drops-the-setting",
        file=REGISTRY,
        find="precision_token = MATMUL_PRECISION.set(precision)",
        replace='precision_token = MATMUL_PRECISION.set("highest")',
        why="lower_trace takes precision= but lowers at HIGHEST whatever it is given",
    ),
    Mutant(
        id="cache-key-without-the-variable",
        file=TRACED,
        find="key = [pipeline, self.precision or read_precision()]",
        replace="key = [pipeline, self.precision]",
        why="a changed $HLOTRACE_MATMUL_PRECISION finds the entry compiled at the old precision",
    ),
    Mutant(
        id="hot-path-key-without-precision",
        file=TRACED,
        find="run = self._fast.get((raw, precision, *map(id, map(_aval_of, buffers))))",
        replace="run = self._fast.get((raw, None, *map(id, map(_aval_of, buffers))))",
        why="the aval-identity hot path runs the executable of another precision",
    ),
    Mutant(
        id="lower-ahead-of-time-ignores-the-function",
        file=TRACED,
        find="with choosing_precision(self.precision or read_precision()):",
        replace="with choosing_precision(None):",
        why="step.lower(...) lowers at the variable's precision, not the function's precision=",
    ),
    Mutant(
        id="partial-trace-drops-precision",
        file=PARTIAL,
        find='            "precision": check_precision("partial_trace", precision),\n',
        replace='            "precision": None,\n',
        why="partial_trace(precision=...) compiles both executables at the default precision",
    ),
]
