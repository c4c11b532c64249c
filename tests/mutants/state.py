"""Mutants of how a compiled step collects, reads, writes and restores state (issue 18).

hlotrace/state.py (distinct inputs, snapshots), hlotrace/compiled.py (write-back, donation),
hlotrace/traced.py (the cache key, the restore on failure), hlotrace/build.py (the restore after a shape-only recording) and the optimizer's state created
inside a recording; hlotrace/captures.py and hlotrace/trace.py for the state a step closes
over (issue 36: the closure-* rows and the rebound-closure test of
tests/test_calling_conventions.py, the walk's limit in tests/test_silent_failures.py).
Killed by tests/test_calling_conventions.py, tests/test_fault_paths.py
and tests/test_train_step.py; run with ``make mutation ARGS="--only state --columns suite"``.
"""

from hlotrace.testing.mutation import Mutant

STATE = "hlotrace/state.py"
COMPILED = "hlotrace/compiled.py"
JIT = "hlotrace/traced.py"
BUILD = "hlotrace/build.py"
OPTIMIZER = "hlotrace/optim/optimizer.py"
TENSOR = "hlotrace/tensor.py"
MODULE = "hlotrace/nn/module.py"
VERSIONS = "hlotrace/versions.py"
CAPTURES = "hlotrace/captures.py"
TRACE = "hlotrace/trace.py"

MUTANTS = [
    Mutant(
        id="no-deduplication",
        file=STATE,
        find="    for t in (*leaves, *state_tensors):\n        p = position.get(id(t))\n",
        replace="    for t in (*leaves, *state_tensors):\n        p = None\n",
        why="a tensor reached twice (argument and module parameter) becomes two inputs, donated twice",
    ),
    Mutant(
        id="aliasing-not-in-key",
        file=JIT,
        find="        key.append(slots)\n",
        replace="",
        why="a call with the same tensor twice reuses the program compiled for two distinct tensors, or back",
    ),
    Mutant(
        id="restore-keeps-new-grads",
        file=STATE,
        find="            t._host, t._device, t.grad = host, device, grad\n",
        replace="            t._host, t._device = host, device\n",
        why="a failed call restores values but leaves the .grad objects its eager run set",
    ),
    Mutant(
        id="no-restore-on-failure",
        file=JIT,
        find="            # function, the lowering or the compiler, or Ctrl-C) puts every tensor back.\n            snapshot.restore()\n",
        replace="            # function, the lowering or the compiler, or Ctrl-C) puts every tensor back.\n            pass\n",
        why="a failure while recording leaves the state half-updated by the eager run",
    ),
    Mutant(
        id="new-grads-not-written",
        file=COMPILED,
        find="        elif after is not before or id(after) in recorder.assigned:\n",
        replace="        elif id(after) in recorder.assigned:\n",
        why="a .grad the step sets (accumulated, not cleared) is not written back after a compiled call",
    ),
    Mutant(
        id="argument-writes-dropped",
        file=COMPILED,
        find="        if id(t) in recorder.assigned:\n            writes.append((i, len(outputs)))\n",
        replace="        if i in donatable and id(t) in recorder.assigned:\n            writes.append((i, len(outputs)))\n",
        why="only holders' state is written back; an argument updated in place keeps its old value",
    ),
    Mutant(
        id="donated-host-copy-kept",
        file=COMPILED,
        find="            inputs[i]._host = None\n",
        replace="            pass\n",
        why="a stale host copy (a view of the donated buffer on CPU) survives the call",
    ),
    Mutant(
        id="state-inside-recording-untracked",
        file=OPTIMIZER,
        find="                        state[name] = _recorded_full(p.shape, self._initial_state(group, name), p.dtype)\n",
        replace="                        state[name] = _new_tensor(np.full(p.shape, self._initial_state(group, name), p.dtype))\n",
        why="an optimizer built inside the step makes its state outside the recording",
    ),
    Mutant(
        id="abstract-recording-not-restored",
        file=BUILD,
        find="    # compiled executable when tiered: the next call waits for the optimized one).\n    snapshot.restore()\n",
        replace="    # compiled executable when tiered: the next call waits for the optimized one).\n",
        why="first_call='compiled' leaves shape-only placeholders in the state the recording updated",
    ),
    Mutant(
        id="ownership-not-in-key",
        file=STATE,
        find="        keys.append((type(holder).__name__, static, tuple(slots)))\n",
        replace="        keys.append((type(holder).__name__, static))\n",
        why="an optimizer that now steps another parameter of the same shapes reuses the old program",
    ),
    Mutant(
        id="grad-presence-not-structural",
        file=TENSOR,
        find="            if old is not value:\n                VERSIONS.structure += 1\n",
        replace="            pass\n",
        why="setting or clearing a .grad between calls reuses the cached state signature",
    ),
    Mutant(
        id="module-assignment-not-structural",
        file=MODULE,
        find="        if new_kind is not None or kind is not None:\n            structure_changed()",
        replace="        if False:\n            structure_changed()",
        why="a replaced parameter or submodule keeps being read from the cached (old) tensors",
    ),
    Mutant(
        id="train-eval-not-structural",
        file=MODULE,
        find="        structure_changed()  # the training flags are part of a compiled step's key\n",
        replace="",
        why="train()/eval() between calls keeps running the program compiled for the other mode",
    ),
    Mutant(
        id="hyper-change-ignored",
        file=STATE,
        find="        if cached.hyper == versions.hyper:\n            return cached\n",
        replace="        return cached\n",
        why="a new learning rate in param_groups is never copied into the hyper tensor",
    ),
    Mutant(
        id="group-params-untracked",
        file=VERSIONS,
        find="            value = TrackedList(value)\n",
        replace="",
        why="a group's params list is a plain list: replacing a parameter in it goes unnoticed",
    ),
    Mutant(
        id="donation-pairs-each-input-with-its-own-output",
        file=COMPILED,
        find="    if not pair_by_aval:\n        return donate\n",
        replace="    if True:\n        return donate\n",
        why="each donated buffer aliases its own tensor's new value, not jax.jit's pairing (same results, "
        "XLA:CPU ran bench_train's step 1.2x slower)",
    ),
    Mutant(
        id="donation-pairs-from-the-last-input",
        file=COMPILED,
        find="    for i in sorted(donate):\n",
        replace="    for i in sorted(donate, reverse=True):\n",
        why="outputs take the last donated buffers of their aval first: the loss reuses the last step count's "
        "buffer (same results; with the loss there XLA:CPU ran bench_train's step 1.1x slower)",
    ),
    Mutant(
        id="closed-parameters-dropped",
        file=CAPTURES,
        find="            holders.append(self._loose[1])\n",
        replace="",
        why="loose Parameters a step closes over are found but never become its state: a functional model "
        "(no module, optimizer or GradManager leading to them) is refused instead of training",
    ),
    Mutant(
        id="outside-parameter-baked-in",
        file=TRACE,
        find="        if self.capture_as_const:\n",
        replace='        if self.capture_as_const or type(tensor).__name__ == "Parameter":\n',
        why="a Parameter reached beyond the closure walk is captured as a constant instead of refused: "
        "read on every call, never written back, the step silently does not train it",
    ),
    Mutant(
        id="closure-walked-once",
        file=CAPTURES,
        find="        holders, parameters = closed_over(self.fn)\n",
        replace="        self.__dict__.setdefault('first', closed_over(self.fn))\n        holders, parameters = "
        "list(self.first[0]), self.first[1]\n",
        why="what a function closes over is remembered from its first call: after `w = World()` again the "
        "step keeps training the old model and never touches the new one",
    ),
    Mutant(
        id="closure-identity-not-in-key",
        file=JIT,
        find="                key.append(tuple(map(id, closed)))\n",
        replace="",
        why="the key misses which objects a step closes over: a rebound closure variable of the same "
        "structure runs the old model's entry (on the new tensors: no recompile, which the README promises)",
    ),
    Mutant(
        id="closure-state-memoized-by-identity",
        file=JIT,
        find="            held = state.holder_state(self._holders, holders)\n",
        replace="            held = (self._closure is not None and holders == closed and self._holders.get("
        "tuple(map(id, holders)))) or state.holder_state(self._holders, holders)\n",
        why="a step reaching all its state by closure reuses the state derived on an earlier call by the "
        "holders' identities alone: a new lr in a closed-over optimizer's param_groups never reaches "
        "its hyper tensor",
    ),
]
