"""Mutants of hlotrace/lowering/rules/layout.py, and of the layout VJPs in
hlotrace/ops/layout/ (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/layout.py"
BASE = "hlotrace/ops/layout/base.py"
SHIFTS = "hlotrace/ops/layout/shifts.py"
PADDING = "hlotrace/ops/layout/padding.py"
REPEATS = "hlotrace/ops/layout/repeats.py"
TRIANGLES = "hlotrace/ops/layout/triangles.py"

MUTANTS = [
    Mutant(
        id="flip-mirrored-axes",
        file=FILE,
        find="return stablehlo.ReverseOp(x, list(axis)).result if axis else x",
        replace="return stablehlo.ReverseOp(x, [len(ctx.in_avals[0].shape) - 1 - a for a in axis]).result if axis else x",
        why="flip counts its axes from the end (right for axis -1 of a matrix, wrong elsewhere)",
        ops=("flip",),
    ),
    Mutant(
        id="roll-wrong-direction",
        file=FILE,
        find="return _concat([_slice(x, shape, axis, n - shift, n), _slice(x, shape, axis, 0, n - shift)], axis)",
        replace="return _concat([_slice(x, shape, axis, shift, n), _slice(x, shape, axis, 0, shift)], axis)",
        why="roll moves the first `shift` elements to the end: a roll by -shift",
        ops=("roll",),
    ),
    Mutant(
        id="roll-none-first-axis",
        file=FILE,
        find="        rolled = _roll_axis(hlo.reshape(x, flat, aval.dtype), flat, 0, shift)\n"
        "        return hlo.reshape(rolled, aval.shape, aval.dtype)\n",
        replace="        return _roll_axis(x, aval.shape, 0, shift % aval.shape[0])\n",
        why="roll with axis=None rolls along the first axis instead of the flattened tensor",
        ops=("roll",),
    ),
    Mutant(
        id="pad-constant-value-ignored",
        file=FILE,
        find="fill = hlo.constant(value, aval.dtype)",
        replace="fill = hlo.constant(0, aval.dtype)",
        why="constant padding always fills with 0, whatever value= says",
        ops=("pad",),
    ),
    Mutant(
        id="pad-reflect-as-symmetric",
        file=BASE,
        find="    period = 2 * size - 2\n    j = np.mod(i, period)\n    return np.where(j >= size, period - j, j)\n",
        replace="    period = 2 * size\n    j = np.mod(i, period)\n    return np.where(j >= size, period - 1 - j, j)\n",
        why="reflect repeats the edge element (NumPy's 'symmetric' mode) in the rule's index map",
        ops=("pad",),
    ),
    Mutant(
        id="pad-reflect-not-reversed",
        file=FILE,
        find="            piece = stablehlo.ReverseOp(piece, [axis]).result\n",
        replace="            pass\n",
        why="the mirrored slices of reflect padding are copied in their original order",
        ops=("pad",),
    ),
    Mutant(
        id="pad-edge-not-broadcast",
        file=FILE,
        find="        count = 1 if step == 0 else length\n",
        replace="        count = length\n",
        why="an edge run copies the elements after the edge instead of repeating the edge one",
        ops=("pad",),
    ),
    Mutant(
        id="tile-as-repeat",
        file=FILE,
        find="    pairs = [d for pair in zip(reps, padded, strict=True) for d in pair]\n"
        "    dims = [2 * (lead + k) + 1 for k in range(len(aval.shape))]\n",
        replace="    pairs = [d for pair in zip(padded, reps, strict=True) for d in pair]\n"
        "    dims = [2 * (lead + k) for k in range(len(aval.shape))]\n",
        why="tile repeats each element in place (np.repeat's order) instead of the whole tensor",
        ops=("tile",),
    ),
    Mutant(
        id="repeat-as-tile",
        file=FILE,
        find="        spread_shape = (*shape[:axis], n, count, *shape[axis + 1 :])\n"
        "        dims = [d if d <= axis else d + 1 for d in range(len(shape))]\n",
        replace="        spread_shape = (*shape[:axis], count, n, *shape[axis + 1 :])\n"
        "        dims = [d if d < axis else d + 1 for d in range(len(shape))]\n",
        why="repeat repeats the whole run of elements (np.tile's order) instead of each element",
        ops=("repeat",),
    ),
    Mutant(
        id="repeat-groups-from-start",
        file=FILE,
        find="piece = x if (start, stop) == (0, shape[axis]) else _slice(x, shape, axis, start, stop)",
        replace="piece = x if (start, stop) == (0, shape[axis]) else _slice(x, shape, axis, 0, stop - start)",
        why="per-element repeat counts slice every run of equal counts from the start of the axis",
        ops=("repeat",),
    ),
    Mutant(
        id="tril-strict",
        file=FILE,
        find='rule("tril")(_triangle("LE"))',
        replace='rule("tril")(_triangle("LT"))',
        why="tril keeps j - i < k, dropping the k-th diagonal itself",
        ops=("tril",),
    ),
    Mutant(
        id="triangle-rows-cols-swapped",
        file=FILE,
        find="        diagonal = stablehlo.SubtractOp(cols, rows).result\n        keep = hlo.compare(diagonal, hlo.constant(k, dt.int32, matrix), direction, dt.int32)",
        replace="        diagonal = stablehlo.SubtractOp(rows, cols).result\n        keep = hlo.compare(diagonal, hlo.constant(k, dt.int32, matrix), direction, dt.int32)",
        why="the diagonal offset is measured as row - column: k means -k",
        ops=("tril", "triu"),
    ),
    # -- VJPs (killed by tests/test_gradients.py) --
    Mutant(
        id="roll-vjp-same-direction",
        file=SHIFTS,
        find="back = -shift if axis is None else tuple(-s for s in shift)",
        replace="back = shift",
        why="roll's cotangent is rolled forward again instead of back",
        ops=("roll",),
    ),
    Mutant(
        id="pad-constant-vjp-from-origin",
        file=PADDING,
        find="F.getitem(ct, tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pad_width, strict=True)))",
        replace="F.getitem(ct, tuple(slice(0, d) for d, (b, _) in zip(x.shape, pad_width, strict=True)))",
        why="the cotangent of constant padding is sliced from the corner, not past the leading pad",
        ops=("pad",),
    ),
    Mutant(
        id="pad-reflect-vjp-not-flipped",
        file=PADDING,
        find="piece, source = F.flip(piece, axis), source - length + 1",
        replace="piece, source = piece, source - length + 1",
        why="the cotangent of a mirrored run is added back in the wrong order",
        ops=("pad",),
    ),
    Mutant(
        id="pad-edge-vjp-first-only",
        file=PADDING,
        find="            piece = F.sum(piece, axis=axis, keepdims=True)\n",
        replace="            piece = F.getitem(piece, (*lead, slice(0, 1)))\n",
        why="the edge element gets the cotangent of one of its copies instead of their sum",
        ops=("pad",),
    ),
    Mutant(
        id="tile-vjp-sums-the-tensor-dims",
        file=REPEATS,
        find="axis=tuple(range(0, len(pairs), 2))",
        replace="axis=tuple(range(1, len(pairs), 2))",
        why="tile's cotangent is summed over the tensor's own dims instead of the reps",
        ops=("tile",),
    ),
    Mutant(
        id="repeat-vjp-tile-order",
        file=REPEATS,
        find="pieces.append(F.sum(F.reshape(piece, (*lead, n, count, *rest)), axis=a + 1))",
        replace="pieces.append(F.sum(F.reshape(piece, (*lead, count, n, *rest)), axis=a))",
        why="repeat's cotangent is summed as if the whole run repeated (tile's order)",
        ops=("repeat",),
    ),
    Mutant(
        id="tril-vjp-passes-everything",
        file=TRIANGLES,
        find="vjp=lambda ct, out, x, *, k, _n=_name: (apply(get_op(_n), ct, k=k),),",
        replace="vjp=lambda ct, out, x, *, k, _n=_name: (ct,),",
        why="tril/triu pass the cotangent of the zeroed elements through",
        ops=("tril", "triu"),
    ),
]
