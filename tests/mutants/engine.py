"""Mutants of the device eager engine (issue 35): the application key (dispatch's inference
memo, which is also the engine's executable key), the placement
check, in-place updates under it. Killed by tests/test_device_engine.py and
tests/distributed/test_device_engine_placement.py (each checked by hand). The engine does not
donate buffers yet, so there is no donation mutant."""

from hlotrace.testing.mutation import Mutant

DEVICE = "hlotrace/engines/device.py"
DISPATCH = "hlotrace/dispatch.py"
TENSOR = "hlotrace/tensor.py"

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
        find="            elif spmd_hooks.active and t.sharding is not None:\n",
        replace="            elif False:\n",
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
