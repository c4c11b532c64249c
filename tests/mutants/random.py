"""Mutants of hlotrace/lowering/rules/random.py (see TESTING.md).

The random primitives are not differentiable, so there are no VJP mutants; dropout is a
composite of registered ops (tests/test_random.py checks it)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/lowering/rules/random.py"
ALL = ("random_split", "random_uniform", "random_normal", "random_randint", "random_permutation")

MUTANTS = [
    Mutant(
        id="threefry-rotation-schedule-swapped",
        file=FILE,
        find="        for r in ROTATIONS[i % 2]:\n",
        replace="        for r in ROTATIONS[(i + 1) % 2]:\n",
        why="the even groups of rounds use the odd groups' rotation constants (17, 29, 16, 24) and vice versa",
        ops=ALL,
    ),
    Mutant(
        id="threefry-rotate-wrong-complement",
        file=FILE,
        find="right = stablehlo.ShiftRightLogicalOp(x, _uconst(32 - r, shape)).result",
        replace="right = stablehlo.ShiftRightLogicalOp(x, _uconst(31 - r, shape)).result",
        why="rotl(x, r) as (x << r) | (x >> (31 - r)): an off-by-one in the rotation's right shift",
        ops=ALL,
    ),
    Mutant(
        id="threefry-injection-counter-from-zero",
        file=FILE,
        find="x1 = _add(_add(x1, ks[(i + 2) % 3]), _uconst(i + 1, shape))",
        replace="x1 = _add(_add(x1, ks[(i + 2) % 3]), _uconst(i, shape))",
        why="the key injection adds the group index from 0 instead of 1",
        ops=ALL,
    ),
    Mutant(
        id="threefry-no-key-parity",
        file=FILE,
        find="stablehlo.XorOp(stablehlo.XorOp(k0, k1).result, _uconst(KEY_PARITY, shape)).result",
        replace="stablehlo.XorOp(k0, k1).result",
        why="the third key-schedule word is k0 ^ k1 without the 0x1BD11BDA parity constant",
        ops=ALL,
    ),
    Mutant(
        id="bits-words-interleaved-backwards",
        file=FILE,
        find="for x in (x0, x1)]",
        replace="for x in (x1, x0)]",
        why="block i's two output words land in the opposite order (2i gets x1)",
        ops=("random_uniform", "random_permutation"),
    ),
    Mutant(
        id="split-counter-swapped",
        file=FILE,
        find="threefry2x32(_key_u32(key), _uconst(0, (1,)), _uconst(1, (1,)))",
        replace="threefry2x32(_key_u32(key), _uconst(1, (1,)), _uconst(0, (1,)))",
        why="the next key comes from counter (1, 0), a block the draws use, instead of (0, 1)",
        ops=("random_split",),
    ),
    Mutant(
        id="uniform-keeps-the-one",
        file=FILE,
        find="    return stablehlo.SubtractOp(value.result, hlo.constant(1, wide, (n,))).result\n",
        replace="    return value.result\n",
        why="the mantissa trick's [1, 2) value is used without subtracting 1",
        ops=("random_uniform", "random_normal"),
    ),
    Mutant(
        id="uniform-bit-window-off-by-one",
        file=FILE,
        find="m = stablehlo.ShiftRightLogicalOp(words[0], _uconst(32 - p, (n,))).result",
        replace="m = stablehlo.ShiftRightLogicalOp(words[0], _uconst(31 - p, (n,))).result",
        why="the uniform's bits are taken one position too low, so one of them spills into the exponent",
        ops=("random_uniform", "random_normal"),
    ),
    Mutant(
        id="float64-words-swapped",
        file=FILE,
        find="w = _join64(words[0], words[1], n)",
        replace="w = _join64(words[1], words[0], n)",
        why="a float64 uniform's 64 bits are joined low word first",
        ops=("random_uniform", "random_normal"),
    ),
    Mutant(
        id="float64-low-half-mask",
        file=FILE,
        find="lo = stablehlo.AndOp(m, _uconst(2**SPLIT_BITS - 1, (n,), 64)).result",
        replace="lo = stablehlo.AndOp(m, _uconst(2**SPLIT_BITS, (n,), 64)).result",
        why="the low half of a float64 uniform is masked with 2**26 instead of 2**26 - 1",
        ops=("random_uniform", "random_normal"),
    ),
    Mutant(
        id="normal-sine",
        file=FILE,
        find="z = stablehlo.MulOp(radius, stablehlo.CosineOp(angle).result).result",
        replace="z = stablehlo.MulOp(radius, stablehlo.SineOp(angle).result).result",
        why="Box-Muller with sin(2 pi u2): also normal, but not the reference's numbers",
        ops=("random_normal",),
    ),
    Mutant(
        id="randint-words-swapped",
        file=FILE,
        find="hi, lo = _rows(key, 2, n)",
        replace="lo, hi = _rows(key, 2, n)",
        why="randint's 64-bit word takes its high half from the second row",
        ops=("random_randint",),
    ),
    Mutant(
        id="permutation-signed-compare",
        file=FILE,
        find='compare_type=stablehlo.ComparisonTypeAttr.get("UNSIGNED"),',
        replace='compare_type=stablehlo.ComparisonTypeAttr.get("SIGNED"),',
        why="the permutation sorts its random words as signed int32 (top bit first)",
        ops=("random_permutation",),
    ),
]
