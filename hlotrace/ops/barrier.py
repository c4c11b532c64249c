"""The optimization barrier: values pass through unchanged, and XLA may not move computation
across it or merge what is computed on either side (``stablehlo.optimization_barrier``).

``F.optimization_barrier(*tensors)`` returns the tensors, each the same value. Ops are
single-output, so it records one ``optimization_barrier`` op per tensor, each taking all of
the tensors and an ``index`` attribute naming the one it returns; every application lowers
to the same ``stablehlo.optimization_barrier`` over all operands, which the CSE the default
pipeline runs merges into one barrier (the one jax would build). Its VJP is the barrier of
the cotangent. The ``remat`` pass (hlotrace/passes/remat.py) places barriers itself.
"""

from __future__ import annotations

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import Aval, OpDef, register_op

__all__ = ["optimization_barrier"]

FAMILY = "barrier"


def _canonicalize(avals, attrs):
    index = attrs.get("index", 0)
    if not isinstance(index, int) or not -len(avals) <= index < len(avals):
        raise ShapeDtypeError(f"index {index!r} is out of range for {len(avals)} operands")
    return {"index": index % len(avals)}


def _infer(*avals: Aval, index) -> Aval:
    if not avals:
        raise ShapeDtypeError("needs at least one tensor")
    return avals[index]


def _reference(*arrays, index):
    return arrays[index].copy()


def _vjp(ct, out, *inputs, index):
    return tuple(optimization_barrier(ct) if i == index else None for i in range(len(inputs)))


def _sample(s):
    @s.st.composite
    def sample(draw):
        first = draw(s.dtypes(s.ALL))
        args = []
        for _ in range(draw(s.st.integers(1, 3))):
            dtype = draw(s.other_dtypes(first))
            args.append(draw(s.arrays(dtype, draw(s.shapes(max_dims=3)))))
        index = draw(s.st.integers(-len(args), len(args) - 1))
        return s.OpSample(tuple(args), {"index": index})

    return sample()


OPTIMIZATION_BARRIER = register_op(
    OpDef(
        name="optimization_barrier",
        family=FAMILY,
        reference=_reference,
        infer=_infer,
        canonicalize=_canonicalize,
        sample=_sample,
        variadic=True,
        vjp=_vjp,
        doc="returns operand `index` unchanged; XLA may not move or merge computation across the barrier",
    )
)


def optimization_barrier(*tensors):
    """The tensors, unchanged, behind one ``stablehlo.optimization_barrier``: XLA may not
    move computation across it, nor merge computation on one side with the other's.

    >>> a, b = F.optimization_barrier(a, b)
    """
    if not tensors:
        raise TypeError("optimization_barrier needs at least one tensor")
    outs = tuple(apply(OPTIMIZATION_BARRIER, *tensors, index=i) for i in range(len(tensors)))
    return outs[0] if len(outs) == 1 else outs
