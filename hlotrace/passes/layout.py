"""``layout``: NCHW/OIHW convolutions run as NHWC/HWIO, with the transposes moved to the
program's edges and cancelled.

XLA:CPU runs a convolution in one layout only (batch, spatial..., feature; kernel spatial...,
input, output): a convolution written NCHW/OIHW, as PyTorch-style code and hlotrace's conv
rules write it, gets copies to and from that layout around every convolution, and everything
between two convolutions (batch norm, ReLU, the residual add) runs on NCHW data. This pass
makes the layout change explicit and moves it out of the way:

1. Every 2-D ``stablehlo.convolution`` of @main (4-D operands) whose dimension numbers are
   not already ``[b, 0, 1, f] x [0, 1, i, o] -> [b, 0, 1, f]`` becomes that convolution on
   ``stablehlo.transpose``\\ d operands, followed by a transpose of its result back to the
   original dimension order (conv2d, its input gradient ``conv_transpose2d`` and its
   weight gradient ``conv2d_weight_grad`` alike: the permutations are read from each op's
   dimension numbers); every 1-D one (3-D operands: conv1d) the same way, as
   ``[b, 0, f] x [0, i, o] -> [b, 0, f]`` (NWC/WIO).
2. Transposes NHWC -> NCHW (``SINK``; NWC -> NCW for rank 3, :func:`sink`) move down
   through layout-agnostic ops, which are rebuilt in NHWC: elementwise ops (operands of
   rank 0 stay), ``reduce`` (dimensions remapped; a transpose after it only where the kept
   dimensions change order), ``reduce_window`` (window, strides, dilations and padding
   permuted), ``pad``, ``slice``, ``reverse`` and ``concatenate`` (their per-dimension
   attributes permuted). An op moves when at least as many of its operands lose a
   transpose as gain one (splat constants, ``broadcast_in_dim`` and ``iota`` are rebuilt in
   NHWC for free); transposes NCHW -> NHWC (``HOIST``) move up through those ops the same
   way when every user of the op is one.
3. Transposes of transposes compose, identities vanish, dead ops are removed.

So conv -> batch norm -> ReLU -> (max pool) -> conv keeps NHWC inside, forward and backward;
@main's arguments and results keep their types (parameters, checkpoints and ``.numpy()`` stay
in the user's layout: the transposes left are at the edges, e.g. on each weight and its
gradient). Not covered: 3-D convolutions, ops inside control-flow regions, and reshape,
gather, scatter, dot_general and broadcast_in_dim of a transposed operand, and a ``pad``
with interior padding (the transpose stops there; the last one because XLA:CPU would fold
it into the convolution it feeds as a base dilation, which its simplifier aborts on). XLA:CPU runs every convolution in NHWC/HWIO anyway: conv2d and its
two gradients gave bitwise-equal results with and without the pass (three shapes, strides
and groups included); but a moved reduce (batch norm's statistics) may sum in another order
(a ResNet-18 step's loss moved by 2e-4 relative after three steps), so the pass is
registered ``exact=False`` and checked within the tolerance table (the op's own entry
sufficed in tests/passes/test_layout.py).
"""

from __future__ import annotations

import numpy as np

from hlotrace.passes.ir_helpers import main_function
from hlotrace.passes.options import boolean, checks_values
from hlotrace.passes.registry import register_pass
from hlotrace.passes.rewrite import remove_dead_ops
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

RANKS = (3, 4)  # of the convolutions rewritten: 1-D (NCW/OIW) and 2-D (NCHW/OIHW)
MAX_SWEEPS = 64


def sink(rank: int) -> tuple[int, ...]:
    """transpose(x, sink(rank)) reads channels-last x as channels-first: user dimension i
    lives at internal dimension sink(rank)[i] ((0, 3, 1, 2) for NHWC -> NCHW)."""
    return (0, rank - 1, *range(1, rank - 1))


SINK = sink(4)
HOIST = (0, 2, 3, 1)  # its inverse: NCHW -> NHWC

ELEMENTWISE = frozenset(
    "stablehlo." + name
    for name in (
        "abs add and atan2 cbrt ceil clamp compare convert cosine divide exponential "
        "exponential_minus_one floor is_finite log log_plus_one logistic maximum minimum multiply "
        "negate not or popcnt power remainder round_nearest_afz round_nearest_even rsqrt select "
        "shift_left shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan tanh xor"
    ).split()
)
# Per-dimension integer-array attributes of the other movable ops, permuted with the data.
PER_DIMENSION = {
    "stablehlo.pad": ("edge_padding_low", "edge_padding_high", "interior_padding"),
    "stablehlo.slice": ("start_indices", "limit_indices", "strides"),
    "stablehlo.reduce_window": ("window_dimensions", "window_strides", "base_dilations", "window_dilations"),
    "stablehlo.reverse": (),
    "stablehlo.concatenate": (),
    "stablehlo.reduce": (),
}
MOVABLE = ELEMENTWISE | frozenset(PER_DIMENSION)


def inverse(perm) -> tuple[int, ...]:
    result = [0] * len(perm)
    for i, p in enumerate(perm):
        result[p] = i
    return tuple(result)


def internal(values, perm) -> list:
    """Per-dimension ``values`` of the user's layout, in the order of the layout that
    ``transpose(., perm)`` reads back into the user's (``out[perm[i]] = values[i]``)."""
    out = list(values)
    for i, p in enumerate(perm):
        out[p] = values[i]
    return out


def producer(value):
    owner = value.owner
    return owner.operation if isinstance(owner, ir.Operation | ir.OpView) else None


def _shape(value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _tensor(shape, like) -> ir.Type:
    return ir.RankedTensorType.get(list(shape), ir.RankedTensorType(like).element_type)


def _perm(op) -> tuple[int, ...]:
    return tuple(ir.DenseI64ArrayAttr(op.attributes["permutation"]))


def _attributes(op) -> dict:
    return {name: op.attributes[name] for name in op.attributes}


def _is_transpose(value, perm) -> bool:
    op = producer(value)
    return op is not None and op.name == "stablehlo.transpose" and _perm(op) == tuple(perm)


def transpose(value, perm) -> ir.Value:
    """``value`` transposed by ``perm`` (built at the current insertion point); the value
    itself for the identity."""
    if tuple(perm) == tuple(range(len(perm))):
        return value
    return stablehlo.TransposeOp(value, list(perm)).result


# -- 1. convolutions --------------------------------------------------------------------


def _rewrite_convolution(op) -> bool:
    """``op`` (a 1-D or 2-D convolution) as a channels-last one (NWC/WIO, NHWC/HWIO) between
    transposes; False when it already is one or has another rank."""
    rank = len(_shape(op.operands[0]))
    if rank not in RANKS:
        return False
    n = stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    lhs = (n.input_batch_dimension, *n.input_spatial_dimensions, n.input_feature_dimension)
    kernel = (*n.kernel_spatial_dimensions, n.kernel_input_feature_dimension, n.kernel_output_feature_dimension)
    out = (n.output_batch_dimension, *n.output_spatial_dimensions, n.output_feature_dimension)
    if lhs == kernel == out == tuple(range(rank)):
        return False
    attributes = _attributes(op)
    attributes["dimension_numbers"] = stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=0,
        input_feature_dimension=rank - 1,
        input_spatial_dimensions=list(range(1, rank - 1)),
        kernel_output_feature_dimension=rank - 1,
        kernel_input_feature_dimension=rank - 2,
        kernel_spatial_dimensions=list(range(rank - 2)),
        output_batch_dimension=0,
        output_feature_dimension=rank - 1,
        output_spatial_dimensions=list(range(1, rank - 1)),
    )
    result = op.results[0]
    shape = _shape(result)
    with ir.InsertionPoint(op), op.location:
        operands = [transpose(op.operands[0], lhs), transpose(op.operands[1], kernel)]
        new = ir.Operation.create(
            "stablehlo.convolution", [_tensor([shape[d] for d in out], result.type)], operands, attributes
        )
        replacement = transpose(new.results[0], inverse(out))
    result.replace_all_uses_with(replacement)
    op.erase()
    return True


# -- 2. moving transposes -----------------------------------------------------------------


def _free(value) -> bool:
    """Whether ``value`` is rebuilt in another layout at no cost (see _in_layout)."""
    op = producer(value)
    return op is not None and op.name in ("stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.iota")


def _in_layout(value, perm) -> ir.Value:
    """``value`` (user layout) in the layout ``transpose(., perm)`` reads back: its transpose's
    operand, a rebuilt splat, broadcast or iota, else a new transpose."""
    op = producer(value)
    shape = internal(_shape(value), perm)
    if _is_transpose(value, perm):
        return op.operands[0]
    if op is not None and op.name == "stablehlo.constant":
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if attr.is_splat:
            kind = _tensor(shape, value.type)
            return stablehlo.ConstantOp(ir.DenseElementsAttr.get_splat(kind, attr.get_splat_value())).result
    if op is not None and op.name == "stablehlo.iota":
        dimension = perm[ir.IntegerAttr(op.attributes["iota_dimension"]).value]
        return stablehlo.IotaOp(_tensor(shape, value.type), dimension).result
    if op is not None and op.name == "stablehlo.broadcast_in_dim":
        dims = [perm[d] for d in ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])]
        order = sorted(range(len(dims)), key=dims.__getitem__)  # broadcast dimensions kept increasing
        operand = transpose(op.operands[0], order)
        return stablehlo.BroadcastInDimOp(_tensor(shape, value.type), operand, sorted(dims)).result
    return transpose(value, inverse(perm))


def _cost(op, perm) -> tuple[int, int]:
    """(operands that lose a transpose, operands that gain one) when ``op`` moves to the
    layout ``perm`` reads back."""
    saved = added = 0
    for value in op.operands:
        if not _shape(value):
            continue
        if _is_transpose(value, perm):
            saved += 1
        elif not _free(value):
            added += 1
    return saved, added


def _movable(op, rank: int) -> bool:
    if op.name not in MOVABLE or (op.regions and op.name not in ("stablehlo.reduce", "stablehlo.reduce_window")):
        return False
    if op.name == "stablehlo.pad" and any(ir.DenseI64ArrayAttr(op.attributes["interior_padding"])):
        # conv_transpose2d's dilated input (see its rule): moved next to the NHWC convolution,
        # XLA folds it into a base dilation, and its simplifier aborts the process on some of those.
        return False
    shapes = [_shape(v) for v in op.operands if _shape(v)]
    if not shapes or any(len(s) != rank for s in shapes):
        return False
    return op.name not in ELEMENTWISE or all(s == shapes[0] for s in shapes + [_shape(r) for r in op.results])


def _array(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def _moved_attributes(op, perm) -> dict:
    attributes = _attributes(op)
    for name in PER_DIMENSION.get(op.name, ()):
        if name in attributes:
            attributes[name] = _array(internal(list(ir.DenseI64ArrayAttr(attributes[name])), perm))
    if "padding" in attributes and op.name == "stablehlo.reduce_window":
        rows = ir.DenseIntElementsAttr(attributes["padding"])
        pairs = [[rows[2 * i], rows[2 * i + 1]] for i in range(len(perm))]
        array = np.asarray(internal(pairs, perm), np.int64).reshape(len(perm), 2)
        attributes["padding"] = ir.DenseIntElementsAttr.get(array, shape=list(array.shape))
    if op.name in ("stablehlo.reverse", "stablehlo.reduce"):
        attributes["dimensions"] = _array(sorted(perm[d] for d in ir.DenseI64ArrayAttr(attributes["dimensions"])))
    if op.name == "stablehlo.concatenate":
        dimension = ir.IntegerAttr(attributes["dimension"]).value
        attributes["dimension"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), perm[dimension])
    return attributes


def _result_layout(op, perm, result) -> tuple[list[int], tuple[int, ...]]:
    """(shape of the moved op's ``result``, the transpose that reads it back in the user's layout)."""
    if op.name != "stablehlo.reduce":
        return internal(_shape(result), perm), perm
    reduced = set(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
    source = internal(_shape(op.operands[0]), perm)
    kept = [d for d in range(len(perm)) if d not in reduced]  # the result's dimensions, in order
    moved = sorted(perm[d] for d in kept)
    return [source[d] for d in moved], tuple(moved.index(perm[d]) for d in kept)


def move(op, perm) -> None:
    """Rebuild ``op`` in the layout ``transpose(., perm)`` reads back: its operands converted
    by _in_layout, its users reading its results through transposes (which then cancel)."""
    with ir.InsertionPoint(op), op.location:
        attributes = _moved_attributes(op, perm)
        operands = [v if not _shape(v) else _in_layout(v, perm) for v in op.operands]
        layouts = [_result_layout(op, perm, r) for r in op.results]
        new = ir.Operation.create(
            op.name,
            [_tensor(shape, r.type) for (shape, _), r in zip(layouts, op.results, strict=True)],
            operands,
            attributes,
            regions=len(op.regions),
        )
        for old, region in zip(op.regions, new.regions, strict=True):
            for block in list(old.blocks):
                block.append_to(region)
        outs = [transpose(v, back) for v, (_, back) in zip(new.results, layouts, strict=True)]
    for old, out in zip(op.results, outs, strict=True):
        old.replace_all_uses_with(out)
    op.erase()


def _compose(op) -> bool:
    """transpose(transpose(x, p), q) -> transpose(x, p o q), or x for the identity."""
    inner = producer(op.operands[0])
    if inner is None or inner.name != "stablehlo.transpose":
        return False
    first, second = _perm(inner), _perm(op)
    with ir.InsertionPoint(op), op.location:
        composed = transpose(inner.operands[0], [first[p] for p in second])
    op.results[0].replace_all_uses_with(composed)
    op.erase()
    return True


def _sweep(block) -> int:
    changed = 0
    for op in [o.operation for o in block.operations]:
        if op.name == "stablehlo.transpose":
            changed += _compose(op)
            continue
        rank = next((len(s) for s in map(_shape, op.operands) if s), 0)
        if rank not in RANKS or not _movable(op, rank):
            continue
        down = sink(rank)
        saved, added = _cost(op, down)
        if saved and added <= saved:
            move(op, down)  # down: its operands' NHWC -> NCHW transposes end up after it
            changed += 1
            continue
        users = [use.owner for r in op.results for use in r.uses]
        hoisted = [u for u in users if u.name == "stablehlo.transpose" and _perm(u) == inverse(down)]
        if op.name != "stablehlo.reduce" and hoisted and len(hoisted) == len(users) and added <= len(hoisted):
            move(op, down)  # up: its users' NCHW -> NHWC transposes now cancel with its new ones
            changed += 1
    return changed


def _check_options(options: dict) -> None:
    checks_values("layout", {"move": boolean})(options)


@register_pass(
    "layout",
    exact=False,
    options={
        "move": "true (default): move transposes through layout-agnostic ops and cancel them; false: only "
        "rewrite the convolutions"
    },
    validate=_check_options,
)
def layout(module, options) -> None:
    """NCHW/OIHW (and NCW/OIW) convolutions run channels-last; transposes moved to the program's edges and cancelled."""
    block = main_function(module).regions[0].blocks[0]
    convolutions = [o.operation for o in block.operations if o.operation.name == "stablehlo.convolution"]
    if not sum(_rewrite_convolution(op) for op in convolutions):
        return
    if options.get("move", "true") in ("true", "1", "True", "TRUE"):
        for _ in range(MAX_SWEEPS):
            if not _sweep(block):
                break
            remove_dead_ops(block)
    remove_dead_ops(block)
