"""Mutants of tiered compilation (issue 20): the quick executable a ``first_call="compiled"``
function's first call runs and the switch to the optimized one (hlotrace/runtime/tiered.py,
the switch in hlotrace/compiled.py and hlotrace/build.py, the options' fingerprint in
hlotrace/runtime/jaxlib_compat.py).

Killed by tests/test_tiered_compile.py and tests/test_first_call.py (the second call must
equal the optimized executable's result bitwise); run with ``make mutation ARGS="--only
tiered --columns suite"``, or one mutant by hand against ``pytest -x
tests/test_tiered_compile.py tests/test_first_call.py`` in a scratch copy (TESTING.md).
"""

from hlotrace.testing.mutation import Mutant

TIERED = "hlotrace/runtime/tiered.py"
COMPILED = "hlotrace/compiled.py"
BUILD = "hlotrace/build.py"
COMPAT = "hlotrace/runtime/jaxlib_compat.py"

MUTANTS = [
    Mutant(
        id="upgrade-never-attached",
        file=BUILD,
        find="            entry.upgrade = upgrade\n",
        replace="            pass\n",
        why="the entry is never told of the optimized executable: every call runs the quick one",
    ),
    Mutant(
        id="switch-keeps-the-hot-path",
        file=COMPILED,
        find="                self.executable = optimized\n                self._bind()\n",
        replace="                self.executable = optimized\n",
        why="the switch replaces the executable but not the stateless hot path's closure over the quick one",
    ),
    Mutant(
        id="second-call-races-the-compile",
        file=COMPILED,
        find="        if self.upgrade is not None:\n            self.settle()\n",
        replace="        if self.upgrade is not None and self.upgrade.future is not None and self.upgrade.future.done():\n            self.settle()\n",
        why="a call switches only if the compile happens to be done: which calls run quick depends on timing",
    ),
    Mutant(
        id="quick-cached-as-optimized",
        file=TIERED,
        find='    quick_key = (*key, "quick")\n',
        replace="    quick_key = key\n",
        why="the quick executable is kept under the optimized one's key: later lookups take it for optimized",
    ),
    Mutant(
        id="options-fingerprint-ignores-fast",
        file=COMPAT,
        find="    options = compile_options(disabled_xla_passes, fast)\n    try:\n",
        replace="    options = compile_options(disabled_xla_passes)\n    try:\n",
        why="the disk cache keys both executables alike: a warm cache hands out the quick one as optimized",
    ),
]
