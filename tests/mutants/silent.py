"""Mutants of issue 33's guarantees: gradients that alias or rebind, a seed that misses
initialization, captured values or module flags whose change goes unseen.

Killed by tests/test_silent_failures.py (run with ``make mutation ARGS="--only silent
--columns suite"``; each was also checked by hand against that file alone).
"""

from hlotrace.testing.mutation import Mutant

AUTODIFF = "hlotrace/autodiff.py"
COMPILED = "hlotrace/compiled.py"
RANDOM = "hlotrace/random.py"
CAPTURES = "hlotrace/captures.py"
JIT = "hlotrace/traced.py"
TENSOR = "hlotrace/tensor.py"

MUTANTS = [
    Mutant(
        id="gradients-alias",
        file=AUTODIFF,
        find="            grads = distinct(grads, taken)\n",
        replace="",
        why="one cotangent object becomes two parameters' .grad (or the caller's dy): an in-place callback runs twice on it",
    ),
    Mutant(
        id="backward-rebinds-grad",
        file=AUTODIFF,
        find="                    p._grad._assign(p._grad + g)\n",
        replace="                    p.grad = p._grad + g\n",
        why="a second backward makes a new .grad object: a reference the user kept goes stale",
    ),
    Mutant(
        id="compiled-write-back-rebinds-grad",
        file=COMPILED,
        find="            kept = io.grad_kept\n",
        replace="            kept = ()\n",
        why="a compiled step writes an accumulated gradient into a new object instead of the one it accumulated into",
    ),
    Mutant(
        id="seed-misses-initialization",
        file=RANDOM,
        find="    _host_rng = np.random.default_rng(operator.index(n) % 2**64)\n",
        replace="",
        why="ht.random.seed(n) seeds the random key only: a model built twice after the same seed differs",
    ),
    Mutant(
        id="captured-values-unchecked",
        file=CAPTURES,
        find="        changes = [label for t, host, device, label in self.tensors if not _same_value(t, host, device)]\n",
        replace="        changes = []\n",
        why="a capture_as_const function keeps computing with a trained model's old weights, silently",
    ),
    Mutant(
        id="module-flags-unchecked",
        file=CAPTURES,
        find="            if m.training != flag\n",
        replace="            if False\n",
        why="a closed-over module switched to eval() keeps its recorded training behaviour, silently",
    ),
    Mutant(
        id="refresh-keeps-entries",
        file=JIT,
        find="            self._forget_entries()\n",
        replace="            pass\n",
        why="capture_as_const='refresh' notices the change but runs the old program",
    ),
    Mutant(
        id="in-place-update-not-counted",
        file=TENSOR,
        find="        VERSIONS.values += 1\n        return self\n",
        replace="        return self\n",
        why="an eager in-place update (an optimizer step) does not count as a value change: the stale check never runs",
    ),
]
