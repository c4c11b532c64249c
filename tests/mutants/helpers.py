"""Mutants of the shared lowering helpers: hlotrace/lowering/hlo.py, the constant encoding in
hlotrace/runtime/jaxlib_compat.py (dense_elements) and hlotrace/lowering/builder.py."""

from hlotrace.testing.mutation import Mutant

HLO = "hlotrace/lowering/hlo.py"
COMPAT = "hlotrace/runtime/jaxlib_compat.py"
BUILDER = "hlotrace/lowering/builder.py"

MUTANTS = [
    # -- hlo.convert ----------------------------------------------------------------------
    Mutant(
        id="convert-to-bool-via-convertop",
        file=HLO,
        find=(
            "    if dtype == dt.bool_:\n"
            "        zero = constant(0, aval.dtype, aval.shape)\n"
            '        return compare(value, zero, "NE", aval.dtype)\n'
        ),
        replace="",
        why="conversion to bool is a plain stablehlo.convert instead of x != 0",
        ops=("astype", "logical_and", "where"),
        equivalent=(
            "StableHLO defines convert to i1 as x != 0 and XLA:CPU emits exactly that (NaN -> True, "
            "-0.0 -> False, checked by hand for every dtype); the explicit compare only spells it out"
        ),
    ),
    Mutant(
        id="bool-to-float-via-convertop",
        file=HLO,
        find="return select(value, constant(1, dtype, aval.shape), constant(0, dtype, aval.shape))",
        replace="return stablehlo.ConvertOp(tensor_type(aval.shape, dtype), value).result",
        why="bool -> float is a stablehlo.convert: XLA folds convert(pred) / 0 to select(pred, inf, 0)",
        ops=("divide",),
    ),
    Mutant(
        id="constant-through-float32",
        file=HLO,
        find="array = np.asarray(value, dtype=dtype)",
        replace="array = np.asarray(value, dtype=np.float32).astype(dtype)",
        why="constants are built through float32, so int32 values above 2**24 are rounded",
        ops=("min", "add"),
    ),
    Mutant(
        id="bfloat16-typed-as-float16",
        file=HLO,
        find="return ir.BF16Type.get()",
        replace="return ir.F16Type.get()",
        why="bfloat16 tensors are given the MLIR type f16",
        ops=("add", "astype"),
    ),
    # -- hlo.compare ----------------------------------------------------------------------
    Mutant(
        id="compare-bool-signed",
        file=HLO,
        find='kind = "UNSIGNED"',
        replace='kind = "SIGNED"',
        why="bool comparisons use compare type SIGNED, where True (1-bit -1) is less than False",
        ops=("less", "greater"),
    ),
    Mutant(
        id="compare-int32-unsigned",
        file=HLO,
        find='kind = "SIGNED"',
        replace='kind = "UNSIGNED"',
        why="int32 comparisons use compare type UNSIGNED: negative numbers compare above positive ones",
        ops=("less", "greater_equal"),
    ),
    Mutant(
        id="compare-float-totalorder",
        file=HLO,
        find='kind = "FLOAT"',
        replace='kind = "TOTALORDER"',
        why="float comparisons use TOTALORDER: NaN equals NaN and -0.0 is less than 0.0",
        ops=("equal", "not_equal", "less"),
    ),
    # -- hlo.broadcast_to ---------------------------------------------------------------
    Mutant(
        id="broadcast-to-leading-dims",
        file=HLO,
        find="return broadcast_in_dim(value, target_shape, list(range(offset, len(target_shape))))",
        replace="return broadcast_in_dim(value, target_shape, list(range(len(aval.shape))))",
        why="NumPy broadcasting maps the operand's dims onto the leading result dims instead of the trailing",
        ops=("add", "where"),
    ),
    # -- jaxlib_compat.dense_elements (constants) ---------------------------------------------
    Mutant(
        id="splat-by-value-equality",
        file=COMPAT,
        find='bits = flat.view(f"u{flat.dtype.itemsize}") if flat.dtype != np.bool_ else flat',
        replace="bits = flat",
        why="splat detection compares values, not bits: an array mixing 0.0 and -0.0 becomes a splat of 0.0",
        ops=("multiply",),
    ),
    Mutant(
        id="splat-checks-ends-only",
        file=COMPAT,
        find="if bool(np.all(bits == bits[0])):",
        replace="if bits[0] == bits[-1]:",
        why="an array is stored as a splat when its first and last elements agree (an O(1) shortcut)",
        ops=("add",),
    ),
    Mutant(
        id="bfloat16-constant-as-float32",
        file=COMPAT,
        find="return ir.DenseElementsAttr.get(flat.view(np.uint16), type=element_type, shape=list(array.shape))",
        replace=(
            "return ir.DenseElementsAttr.get(flat.astype(np.float32), type=element_type, shape=list(array.shape))"
        ),
        why="non-splat bfloat16 constants are handed over as float32 values instead of their 16-bit patterns",
        ops=("add",),
    ),
    # -- builder ------------------------------------------------------------------------
    Mutant(
        id="builder-location-one-based",
        file=BUILDER,
        find='name = f"rec{index}:{op_name}:bwd" if backward else f"rec{index}:{op_name}"',
        replace='name = f"rec{index + 1}:{op_name}:bwd" if backward else f"rec{index + 1}:{op_name}"',
        why="op locations number the records from 1, so rec<i> names the wrong record",
    ),
    Mutant(
        id="builder-in-avals-from-outputs",
        file=BUILDER,
        find="in_avals = tuple(trace.aval(v) for v in record.inputs)",
        replace="in_avals = tuple(trace.aval(v) for v in record.outputs)",
        why="the rule context's in_avals are read from the record's outputs (copy-paste)",
        ops=("add", "sum"),
    ),
    Mutant(
        id="builder-result-type-unchecked",
        file=BUILDER,
        find="if value.type != expected:",
        replace="if False:",
        why="the builder's check of each rule's result type against the recorded aval is removed",
    ),
    Mutant(
        id="positive-zero-ignores-sign",
        file="hlotrace/lowering/hlo.py",
        find="return element is not None and element == 0 and math.copysign(1.0, element) == sign",
        replace="return element is not None and element == 0",
        why="a -0.0 constant counts as +0, so x + (-0.0) turns -0.0 into +0.0 (IEEE keeps -0.0)",
        ops=("add",),
    ),
    Mutant(
        id="plus-zero-selects-operand",
        file="hlotrace/lowering/hlo.py",
        find='return select(compare(value, zero, "EQ", aval.dtype), zero, value)',
        replace='return select(compare(value, zero, "NE", aval.dtype), zero, value)',
        why="the +0 fix-up's select compares the wrong way and zeroes every nonzero element",
        ops=("add", "sum", "mean"),
    ),
    Mutant(
        id="verifier-failure-unreported",
        file="hlotrace/lowering/builder.py",
        find="""        module.operation.verify()
        return""",
        replace="""        return""",
        why="the builder skips MLIR's verifier, so an invalid op reaches XLA instead of a LoweringError",
    ),
    Mutant(
        id="captured-data-plain-constant",
        file=BUILDER,
        find="env[var_id] = hlo.data_constant(constants[var_id])",
        replace="env[var_id] = hlo.constant(constants[var_id], constants[var_id].dtype, constants[var_id].shape)",
        why="captured data is a plain constant: XLA rewrites a captured [-0.0, 1.0] (or what it folds "
        "into one) as an iota, +0.0 where NumPy keeps -0.0 (seed 219497072)",
        ops=("take_along_axis",),
    ),
    Mutant(
        id="data-constant-bits-foldable",
        file=HLO,
        find="        hidden = hidden_from_folding(constant(bits, bits.dtype, bits.shape))\n",
        replace="        hidden = constant(bits, bits.dtype, bits.shape)\n",
        why="the bit pattern of 32- and 64-bit data is not behind a barrier: XLA folds the bitcast back "
        "into a float constant and rewrites it as an iota",
        ops=("take_along_axis",),
    ),
]
