"""Mutants of hlotrace/passes/layout.py (see TESTING.md)."""

from hlotrace.testing.mutation import Mutant

FILE = "hlotrace/passes/layout.py"

MUTANTS = [
    Mutant(
        id="conv-result-permutation-not-inverted",
        file=FILE,
        find="        replacement = transpose(new.results[0], inverse(out))",
        replace="        replacement = transpose(new.results[0], out)",
        why="the NHWC convolution's result is transposed back with the forward permutation, not its inverse",
        ops=("conv2d", "conv_transpose2d", "conv2d_weight_grad"),
    ),
    Mutant(
        id="kernel-features-swapped",
        file=FILE,
        find="    kernel = (*n.kernel_spatial_dimensions, n.kernel_input_feature_dimension, n.kernel_output_feature_dimension)",
        replace="    kernel = (*n.kernel_spatial_dimensions, n.kernel_output_feature_dimension, n.kernel_input_feature_dimension)",
        why="the kernel is transposed to HWOI but read as HWIO (a wrong transpose permutation)",
        ops=("conv2d", "conv_transpose2d", "conv2d_weight_grad"),
    ),
    Mutant(
        id="reduce-dimensions-not-remapped",
        file=FILE,
        find='        attributes["dimensions"] = _array(sorted(perm[d] for d in ir.DenseI64ArrayAttr(attributes["dimensions"])))',
        replace='        attributes["dimensions"] = _array(sorted(d for d in ir.DenseI64ArrayAttr(attributes["dimensions"])))',
        why="a reduce (or reverse) moved to NHWC keeps the NCHW axis numbers",
        ops=("batch_norm_inference", "layer_norm", "avg_pool2d"),
    ),
    Mutant(
        id="reduce-result-order-ignored",
        file=FILE,
        find="    return [source[d] for d in moved], tuple(moved.index(perm[d]) for d in kept)",
        replace="    return [source[d] for d in moved], tuple(range(len(kept)))",
        why="a moved reduce whose kept dimensions change order is read back without a transpose",
        ops=("layer_norm",),
    ),
    Mutant(
        id="window-attributes-not-permuted",
        file=FILE,
        find="            attributes[name] = _array(internal(list(ir.DenseI64ArrayAttr(attributes[name])), perm))",
        replace="            attributes[name] = _array(list(ir.DenseI64ArrayAttr(attributes[name])))",
        why="reduce_window, pad and slice keep their NCHW per-dimension attributes on NHWC data",
        ops=("max_pool2d", "avg_pool2d", "max_pool2d_backward"),
    ),
    Mutant(
        id="iota-dimension-not-remapped",
        file=FILE,
        find='        dimension = perm[ir.IntegerAttr(op.attributes["iota_dimension"]).value]',
        replace='        dimension = ir.IntegerAttr(op.attributes["iota_dimension"]).value',
        why="an iota rebuilt in NHWC counts along the NCHW dimension number (max pooling's window indices)",
        ops=("max_pool2d", "max_pool2d_backward"),
    ),
    Mutant(
        id="broadcast-dimensions-not-remapped",
        file=FILE,
        find='        dims = [perm[d] for d in ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])]',
        replace='        dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))',
        why="a broadcast rebuilt in NHWC maps its operand to the NCHW dimension numbers (per-channel scale)",
        ops=("batch_norm_inference",),
    ),
    Mutant(
        id="moved-transposes-composed-backwards",
        file=FILE,
        find="        composed = transpose(inner.operands[0], [first[p] for p in second])",
        replace="        composed = transpose(inner.operands[0], [second[p] for p in first])",
        why="transpose(transpose(x, p), q) is composed as q after p",
        ops=("conv2d", "conv2d_weight_grad"),
    ),
]
