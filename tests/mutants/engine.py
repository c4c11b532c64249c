"""Mutants of the device eager engine (issue 35): the application key (dispatch's inference
memo, which is also the engine's executable key), the placement
check, in-place updates under it, the host-held value checks and the fallback of an op
without a rule. Killed by tests/test_device_engine.py, tests/test_device_engine_semantics.py,
tests/distributed/test_device_engine_placement.py, tests/test_engine_column.py (each checked
by hand). The engine does not donate buffers yet, so there is no donation mutant. Not a
mutant: the Python-scalar buffer key without its dtype (only the bytes) -- equal bytes are equal
bits, which each executable reads in its own dtype, so the shared buffer computes the same
(checked: x_f32 * 0.0 then x_i32 * 0 agree); the dtype stays in the key in case a PJRT backend
checks buffer dtypes."""

from hlotrace.testing.mutation import Mutant

DEVICE = "hlotrace/engines/device.py"
DISPATCH = "hlotrace/dispatch.py"
TENSOR = "hlotrace/tensor.py"
WRITES = "hlotrace/ops/gather/writes.py"
CHECK = "hlotrace/testing/check.py"

MUTANTS = [
    Mutant(
        id="key-forgets-attributes",
        file=DISPATCH,
        find="        key = (op, avals, tuple([(name, _attr_key(value)) for name, value in sorted(attrs.items())]))\n",
        replace="        key = (op, avals)\n",
        why="sum(x, axis=1) reuses the inference and the executable of sum(x, axis=0)",
    ),
    Mutant(
        id="key-forgets-dtypes",
        file=DISPATCH,
        find="        return (op, avals)\n",
        replace="        return (op, tuple(a.shape for a in avals))\n",
        why="an int32 operand reuses what was inferred and compiled for float32 (a weak scalar's dtype alike)",
    ),
    Mutant(
        id="placed-input-not-refused",
        file=DEVICE,
        find='                if t.sharding is not None:\n                    COUNTS["eager_host_fallbacks"] += 1\n',
        replace='                if False:\n                    COUNTS["eager_host_fallbacks"] += 1\n',
        why="a tensor placed on a mesh is fed to a one-device executable",
    ),
    Mutant(
        id="in-place-update-keeps-device-buffer",
        file=TENSOR,
        find="        self._host, self._device = value._host, value._device\n        VERSIONS.values += 1\n",
        replace="        self._host = value._host\n        VERSIONS.values += 1\n",
        why="x += 1 on the device engine leaves x holding its old device buffer",
    ),
]
MUTANTS.append(
    Mutant(
        id="attribute-key-by-equality",
        file=DISPATCH,
        find="    kind = type(value)\n    if kind is float or isinstance(value, np.floating):\n",
        replace="    return value\n    kind = type(value)\n    if kind is float or isinstance(value, np.floating):\n",
        why="full(shape, 1) reuses what full(shape, 1.0) inferred (float32), linspace(-0.0, ...) gives +0.0",
    )
)
MUTANTS += [
    Mutant(
        id="detach-shares-the-device-buffer",
        file=TENSOR,
        find="        buffer = HOOKS.device_copy(t)\n",
        replace="        buffer = t._device\n",
        why="a detached tensor (a fresh .grad) dies with the original's buffer when a compiled step donates it",
    ),
    Mutant(
        id="slices-not-keyed",
        file=DISPATCH,
        find="    if kind is slice:\n",
        replace="    if False:\n",
        why="x[1:3] has no key on Python 3.11: lowered and looked up by module text on every call",
    ),
    Mutant(
        id="bool-mask-copied-to-the-host",
        file=WRITES,
        find="    if entry._host is None and ENGINE[0] is not None:",
        replace="    if False:",
        why="x[mask] under the device engine copies the whole mask to the host",
    ),
    Mutant(
        id="oracle-on-the-process-engine",
        file=CHECK,
        find="@on_numpy_engine\ndef run_eager(",
        replace="def run_eager(",
        why="under HLOTRACE_EAGER=device the property tests would compare XLA with XLA",
    ),
    Mutant(
        id="fast-path-ignores-tapes",
        file=DISPATCH,
        find="    if engine is not None and not attrs and not TAPES and RECORDER.get() is None:\n",
        replace="    if engine is not None and not attrs and RECORDER.get() is None:\n",
        why="under autodiff the device engine's fast path skips the tape: gradients lose those ops",
    ),
    Mutant(
        id="fast-path-ignores-the-recorder",
        file=DISPATCH,
        find="    if engine is not None and not attrs and not TAPES and RECORDER.get() is None:\n",
        replace="    if engine is not None and not attrs and not TAPES:\n",
        why="an xla_trace first call on the device engine records nothing for ops it has seen before",
    ),
]
MUTANTS += [
    Mutant(
        id="host-check-skipped",
        file=DEVICE,
        find="        if op.host_check is not None:\n            _check_on_host(op, attrs, tensors)\n",
        replace="",
        why="an out-of-range index held on the host is silently clamped on the device engine",
    ),
    Mutant(
        id="host-checked-op-on-the-fast-path",
        file=DEVICE,
        find="single, single and op.host_check is None]",
        replace="single, single]",
        why="the second x ** host_exponent takes dispatch's fast path, which runs no check",
    ),
    Mutant(
        id="unlowered-op-not-sent-to-its-reference",
        file=DEVICE,
        find="        if lowering.rule_for(op.name, self.platform) is None:\n",
        replace="        if False:\n",
        why="a user's op without a lowering rule fails eagerly on the device engine",
    ),
]
MUTANTS.append(
    Mutant(
        id="mesh-key-forgets-the-placement",
        file="hlotrace/engines/placed.py",
        find="    cache_key = None if key is None else (_ON_MESH, key, mesh, dims)\n",
        replace="    cache_key = None if key is None else (_ON_MESH, key)\n",
        why="a split input reuses the executable compiled for a replicated one of its aval (or another mesh's)",
    )
)
# Tiering of the engine's one-op executables (eleventh session): opt-in, on a fixed schedule.
MUTANTS += [
    Mutant(
        id="quick-executables-by-default",
        file=DEVICE,
        find="        quick_first = tiered.enabled() if self.quick_first is None else self.quick_first\n",
        replace="        quick_first = True if self.quick_first is None else self.quick_first\n",
        why="every op's first applications run the -O0 executable (tanh, matmul round differently) until the optimized one is ready",
    ),
    Mutant(
        id="tiered-swap-races-the-compile",
        file=DEVICE,
        find="    upgrade = entry[2]\n    optimized",
        replace=(
            "    upgrade = entry[2]\n    if (upgrade.future is None or not upgrade.future.done()) and not upgrade.on_disk:\n"
            "        return\n    optimized"
        ),
        why="the quick executable keeps running until its optimized compile happens to finish: results depend on the machine's speed",
    ),
]
