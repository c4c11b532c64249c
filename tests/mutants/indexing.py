"""Mutants of hlotrace/lowering/rules/indexing.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/indexing.py"

MUTANTS = [
    Mutant(
        id="limit-count-times-step",
        file=FILE,
        find="limits.append(start + (count - 1) * step + 1 if count else start)",
        replace="limits.append(start + count * step if count else start)",
        why="slice limit start + count*step overshoots the dim for strided slices ending near it",
        ops=("getitem",),
    ),
    Mutant(
        id="limit-off-by-one",
        file=FILE,
        find="limits.append(start + (count - 1) * step + 1 if count else start)",
        replace="limits.append(start + (count - 1) * step if count else start)",
        why="slice limit is the last index taken, not one past it (drops the last element)",
        ops=("getitem",),
    ),
    Mutant(
        id="negative-step-start-unmapped",
        file=FILE,
        find="start, step = dim - 1 - start, -step",
        replace="step = -step",
        why="a negative step reverses the dim but keeps the start index of the unreversed dim",
        ops=("getitem",),
    ),
    Mutant(
        id="negative-step-start-off-by-one",
        file=FILE,
        find="start, step = dim - 1 - start, -step",
        replace="start, step = dim - start, -step",
        why="index i of a reversed dim is mapped to dim - i instead of dim - 1 - i",
        ops=("getitem",),
    ),
    Mutant(
        id="reverse-dim-off-by-one",
        file=FILE,
        find="reversed_dims.append(len(starts))",
        replace="reversed_dims.append(len(starts) - 1)",
        why="the dim to reverse is counted as if its start had already been appended",
        ops=("getitem",),
    ),
    Mutant(
        id="newaxis-consumes-a-dim",
        file=FILE,
        find='for entry in (e for e in index if e[0] != "newaxis"):',
        replace="for entry in index:",
        why="None (newaxis) entries are walked like entries that consume an input dim",
        ops=("getitem",),
    ),
    Mutant(
        id="stride-only-slice-skipped",
        file=FILE,
        find="if starts != [0] * len(shape) or limits != list(shape) or strides != [1] * len(shape):",
        replace="if starts != [0] * len(shape) or limits != list(shape):",
        why="the slice is skipped as a no-op when only its strides differ from 1",
        ops=("getitem",),
    ),
]
