"""``sharding_constraint``: the value unchanged, with a layout request for XLA's SPMD
partitioner (``dist.constraint(x, dist.P("data", None))`` inside a compiled function).

Eagerly (and in a one-device compile) it is the identity. Lowered for a mesh it becomes
``sdy.sharding_constraint`` (hlotrace/lowering/rules/distributed.py). ``spec`` holds, per
dimension, the tuple of mesh axes that split it (dimensions past its end are replicated);
the mesh is the compiled call's. Its VJP constrains the cotangent the same way.
"""

from __future__ import annotations

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import Aval, OpDef, register_op

# No user function in hlotrace.functional: users constrain shardings through hlotrace.distributed
# (a mesh spec), which calls sharding_constraint below.
__all__: list[str] = []

FAMILY = "distributed"


def _canonicalize(avals, attrs):
    spec = attrs.get("spec", ())
    if not isinstance(spec, tuple | list):
        raise ShapeDtypeError(f"spec must be a tuple (one entry per dimension), got {spec!r}")
    dims, used = [], set()
    for entry in spec:
        axes = () if entry is None else ((entry,) if isinstance(entry, str) else tuple(entry))
        for axis in axes:
            if not isinstance(axis, str) or not axis:
                raise ShapeDtypeError(f"mesh axis names are non-empty strings, got {axis!r} in {spec!r}")
            if axis in used:
                raise ShapeDtypeError(f"mesh axis {axis!r} is used twice in {spec!r}")
            used.add(axis)
        dims.append(axes)
    while dims and not dims[-1]:
        dims.pop()
    return {"spec": tuple(dims)}


def _infer(x: Aval, *, spec) -> Aval:
    if len(spec) > len(x.shape):
        raise ShapeDtypeError(f"spec {spec} has {len(spec)} entries but the tensor has rank {len(x.shape)}")
    return x


def _reference(x, *, spec):
    return x


def _vjp(ct, out, x, *, spec):
    return (sharding_constraint(ct, spec),)


def _sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        shape = draw(s.shapes(max_dims=3))
        axes = ["data", "model"]
        spec = []
        for _ in range(draw(s.st.integers(0, len(shape)))):
            choice = draw(s.st.sampled_from(["none", "one", "both"]))
            if choice == "one" and axes:
                spec.append((axes.pop(0),))
            elif choice == "both" and len(axes) == 2:
                spec.append(tuple(axes))
                axes = []
            else:
                spec.append(())
        return s.OpSample((draw(s.arrays(dtype, shape)),), {"spec": tuple(spec)})

    return sample()


SHARDING_CONSTRAINT = register_op(
    OpDef(
        name="sharding_constraint",
        family=FAMILY,
        reference=_reference,
        infer=_infer,
        canonicalize=_canonicalize,
        sample=_sample,
        vjp=_vjp,
        doc="the operand unchanged; on a mesh, asks the SPMD partitioner to lay it out as `spec`",
    )
)


def sharding_constraint(x, spec):
    """``x`` unchanged, laid out as ``spec`` (per dimension, a tuple of mesh axes) when the
    compiled call runs on a mesh."""
    return apply(SHARDING_CONSTRAINT, x, spec=spec)
