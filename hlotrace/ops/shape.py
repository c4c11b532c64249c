"""Shape ops: reshape, transpose, broadcast_to, expand_dims, squeeze, concat (NumPy semantics).

Every op has a ``canonicalize`` hook, so recorded attributes are explicit and final: shapes
without -1, non-negative sorted axes, an explicit permutation. Canonical attributes are
accepted again unchanged, so replaying a trace eagerly gives the same record. Operands of
the sample strategies are distinct values (``s.distinct_arrays``), so a misplaced element shows.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes, normalize_axis
from hlotrace.ops.registry import Aval, OpDef, register_op

FAMILY = "shape"


def _as_int(value, what: str) -> int:
    if isinstance(value, bool | np.bool_):
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeDtypeError(f"{what} must be an int, got {value!r}") from None


def _int_tuple(value, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints as a tuple of Python ints (np.int64 entries included)."""
    if isinstance(value, int | np.integer):
        return (_as_int(value, what),)
    try:
        return tuple(_as_int(v, what) for v in value)
    except TypeError:
        raise ShapeDtypeError(f"{what} must be an int or a sequence of ints, got {value!r}") from None


def _attr(attrs: dict, name: str, op: str):
    if name not in attrs:
        raise ShapeDtypeError(f"{op} needs {name}=")
    return attrs[name]


def _maybe_negative(s, draw, axis, rank):
    """``axis`` or its negative alias, so canonicalization of both forms is exercised."""
    return axis - rank if draw(s.st.booleans()) else axis


def _axis_attr(s, draw, axes):
    """A tuple of axes, or a bare int when there is one."""
    return axes[0] if len(axes) == 1 and draw(s.st.booleans()) else tuple(axes)


# -- reshape ----------------------------------------------------------------------------


def _reshape_canonicalize(avals, attrs):
    (x,) = avals
    shape = _int_tuple(_attr(attrs, "shape", "reshape"), "shape entry")
    size = math.prod(x.shape)
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ShapeDtypeError(f"shape {shape} has more than one -1")
    if any(d < -1 for d in shape):
        raise ShapeDtypeError(f"shape {shape} has a negative dimension other than -1")
    known = math.prod(d for d in shape if d != -1)
    if unknown:
        # NumPy: with a zero-size known part, -1 could be anything, so it is refused.
        if known == 0 or size % known:
            raise ShapeDtypeError(f"cannot reshape {size} elements into {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    elif known != size:
        raise ShapeDtypeError(f"cannot reshape {size} elements into {shape}")
    return {"shape": shape}


def _reshape_sample(s):
    """A target shape with the same size; sometimes one -1 (also for zero-size inputs)."""

    @s.st.composite
    def sample(draw):
        dtype, shape = draw(s.dtypes(s.ALL)), draw(s.shapes())
        size = int(np.prod(shape))
        rank = draw(s.st.integers(0 if size == 1 else 1, 4))
        if size == 0:
            target = draw(s.st.lists(s.st.integers(0, 4), min_size=rank, max_size=rank))
            if 0 not in target:
                target[draw(s.st.integers(0, rank - 1))] = draw(s.st.sampled_from([0, -1]))
        else:
            target = [1] * rank
            n, p = size, 2
            while n > 1:  # spread the prime factors of size over the target dims
                while n % p == 0:
                    target[draw(s.st.integers(0, rank - 1))] *= p
                    n //= p
                p += 1
            if rank and draw(s.st.booleans()):
                target[draw(s.st.integers(0, rank - 1))] = -1
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"shape": tuple(target)})

    return sample()


register_op(
    OpDef(
        name="reshape",
        family=FAMILY,
        reference=lambda x, *, shape: np.reshape(x, shape),
        infer=lambda x, *, shape: Aval(shape, x.dtype),
        canonicalize=_reshape_canonicalize,
        sample=_reshape_sample,
        vjp=lambda ct, out, x, *, shape: (F.reshape(ct, x.shape),),
        doc="reshape (row-major); one dim may be -1; stored shape has it resolved",
    )
)


# -- transpose --------------------------------------------------------------------------


def _transpose_canonicalize(avals, attrs):
    (x,) = avals
    rank = len(x.shape)
    perm = attrs.get("perm")
    if perm is None:
        return {"perm": tuple(reversed(range(rank)))}
    perm = _int_tuple(perm, "perm entry")
    if len(perm) != rank:
        raise ShapeDtypeError(f"perm {perm} has {len(perm)} entries, the tensor has rank {rank}")
    normalized = tuple(normalize_axis(p, rank, "perm entry") for p in perm)
    if sorted(normalized) != list(range(rank)):
        raise ShapeDtypeError(f"perm {perm} is not a permutation of the {rank} dims")
    return {"perm": normalized}


def _transpose_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, shape = draw(s.dtypes(s.ALL)), draw(s.shapes())
        rank = len(shape)
        if draw(s.st.integers(0, 4)) == 0:
            perm = None
        else:
            perm = tuple(_maybe_negative(s, draw, p, rank) for p in draw(s.st.permutations(range(rank))))
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"perm": perm})

    return sample()


register_op(
    OpDef(
        name="transpose",
        family=FAMILY,
        reference=lambda x, *, perm: np.transpose(x, perm),
        infer=lambda x, *, perm: Aval(tuple(x.shape[p] for p in perm), x.dtype),
        canonicalize=_transpose_canonicalize,
        sample=_transpose_sample,
        vjp=lambda ct, out, x, *, perm: (F.transpose(ct, tuple(sorted(range(len(perm)), key=perm.__getitem__))),),
        doc="permute dims; perm None reverses them; stored perm is explicit and non-negative",
    )
)


# -- broadcast_to -----------------------------------------------------------------------


def _broadcast_to_canonicalize(avals, attrs):
    (x,) = avals
    shape = _int_tuple(_attr(attrs, "shape", "broadcast_to"), "shape entry")
    if any(d < 0 for d in shape):
        raise ShapeDtypeError(f"shape {shape} has a negative dimension")
    if len(shape) < len(x.shape):
        raise ShapeDtypeError(f"cannot broadcast shape {x.shape} to {shape}: the target has fewer dims")
    for axis in range(-len(x.shape), 0):
        if x.shape[axis] not in (1, shape[axis]):
            raise ShapeDtypeError(
                f"cannot broadcast shape {x.shape} to {shape} (axis {axis}: {x.shape[axis]} vs {shape[axis]})"
            )
    return {"shape": shape}


def _broadcast_to_sample(s):
    """A target shape and an input that is a suffix of it with some dims set to 1."""

    @s.st.composite
    def sample(draw):
        dtype, target = draw(s.dtypes(s.ALL)), draw(s.shapes())
        rank = draw(s.st.integers(0, len(target)))
        suffix = target[len(target) - rank :]
        shape = tuple(1 if draw(s.st.booleans()) else d for d in suffix)
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"shape": tuple(target)})

    return sample()


register_op(
    OpDef(
        name="broadcast_to",
        family=FAMILY,
        reference=lambda x, *, shape: np.broadcast_to(x, shape),
        infer=lambda x, *, shape: Aval(shape, x.dtype),
        canonicalize=_broadcast_to_canonicalize,
        sample=_broadcast_to_sample,
        vjp=lambda ct, out, x, *, shape: (ct,),  # the engine sums ct over the broadcast dims
        doc="NumPy broadcast_to: trailing dims match or are 1",
    )
)


# -- expand_dims, squeeze ---------------------------------------------------------------


def _expand_dims_canonicalize(avals, attrs):
    (x,) = avals
    axis = _int_tuple(_attr(attrs, "axis", "expand_dims"), "axis")
    # NumPy: the axes index the result, whose rank counts the new dims.
    rank = len(x.shape) + len(axis)
    for a in axis:
        if not -rank <= a < rank:
            raise ShapeDtypeError(f"axis {a} is out of bounds for the result of rank {rank}")
    return {"axis": normalize_axes(axis, rank)}


def _expand_dims_infer(x: Aval, *, axis) -> Aval:
    dims = iter(x.shape)
    rank = len(x.shape) + len(axis)
    return Aval(tuple(1 if i in axis else next(dims) for i in range(rank)), x.dtype)


def _expand_dims_sample(s):
    @s.st.composite
    def sample(draw):
        dtype, shape = draw(s.dtypes(s.ALL)), draw(s.shapes(max_dims=3))
        out_rank = len(shape) + draw(s.st.integers(0, 3))
        axes = draw(s.st.permutations(range(out_rank)))[: out_rank - len(shape)]
        axes = [_maybe_negative(s, draw, a, out_rank) for a in axes]
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"axis": _axis_attr(s, draw, axes)})

    return sample()


register_op(
    OpDef(
        name="expand_dims",
        family=FAMILY,
        reference=lambda x, *, axis: np.expand_dims(x, axis),
        infer=_expand_dims_infer,
        canonicalize=_expand_dims_canonicalize,
        sample=_expand_dims_sample,
        vjp=lambda ct, out, x, *, axis: (F.reshape(ct, x.shape),),
        doc="insert size-1 dims at axis (int or tuple, positions in the result)",
    )
)


def _squeeze_canonicalize(avals, attrs):
    (x,) = avals
    axis = attrs.get("axis")
    if axis is None:
        return {"axis": tuple(i for i, d in enumerate(x.shape) if d == 1)}
    axes = normalize_axes(_int_tuple(axis, "axis"), len(x.shape))
    for a in axes:
        if x.shape[a] != 1:
            raise ShapeDtypeError(f"cannot squeeze axis {a}: it has size {x.shape[a]}, not 1")
    return {"axis": axes}


def _squeeze_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))
        shape = tuple(draw(s.st.lists(s.st.sampled_from([0, 1, 1, 2, 3]), max_size=4)))
        ones = [i for i, d in enumerate(shape) if d == 1]
        if draw(s.st.booleans()):
            axis = None
        else:
            chosen = draw(s.st.lists(s.st.sampled_from(ones), unique=True)) if ones else []
            axis = _axis_attr(s, draw, [_maybe_negative(s, draw, a, len(shape)) for a in chosen])
        return s.OpSample((draw(s.distinct_arrays(dtype, shape)),), {"axis": axis})

    return sample()


register_op(
    OpDef(
        name="squeeze",
        family=FAMILY,
        reference=lambda x, *, axis: np.squeeze(x, axis),
        infer=lambda x, *, axis: Aval(tuple(d for i, d in enumerate(x.shape) if i not in axis), x.dtype),
        canonicalize=_squeeze_canonicalize,
        sample=_squeeze_sample,
        vjp=lambda ct, out, x, *, axis: (F.reshape(ct, x.shape),),
        doc="remove size-1 dims (all of them when axis is None); stored axis is explicit",
    )
)


# -- concat -----------------------------------------------------------------------------


def _concat_canonicalize(avals, attrs):
    if not avals:
        raise ShapeDtypeError("needs at least one tensor")
    rank = len(avals[0].shape)
    if rank == 0:
        raise ShapeDtypeError("0-d tensors cannot be concatenated")
    return {"axis": normalize_axis(attrs.get("axis", 0), rank, "axis")}


def _concat_infer(*avals: Aval, axis) -> Aval:
    first = avals[0].shape
    for i, a in enumerate(avals[1:], start=1):
        if len(a.shape) != len(first):
            raise ShapeDtypeError(f"input {i} has rank {len(a.shape)}, input 0 has rank {len(first)}")
        for d, (m, n) in enumerate(zip(first, a.shape, strict=True)):
            if d != axis and m != n:
                raise ShapeDtypeError(
                    f"inputs must match except on axis {axis}: dim {d} is {m} in input 0 and {n} in input {i}"
                )
    size = sum(a.shape[axis] for a in avals)
    return Aval((*first[:axis], size, *first[axis + 1 :]), dt.promote(*(a.dtype for a in avals)))


def _concat_reference(*arrays, axis):
    common = dt.promote(*(a.dtype for a in arrays))
    return np.concatenate([a.astype(common, copy=False) for a in arrays], axis=axis)


def _concat_vjp(ct, out, *inputs, axis):
    grads, start = [], 0
    for x in inputs:
        index = (slice(None),) * axis + (slice(start, start + x.shape[axis]),)
        grads.append(F.getitem(ct, index))
        start += x.shape[axis]
    return tuple(grads)


def _concat_sample(s):
    """1–4 operands of mixed dtypes that agree on every dim but the (random) axis."""

    @s.st.composite
    def sample(draw):
        base = list(draw(s.shapes(min_dims=1)))
        axis = draw(s.st.integers(0, len(base) - 1))
        first = draw(s.dtypes(s.ALL))
        args = []
        for _ in range(draw(s.st.integers(1, 4))):
            base[axis] = draw(s.st.integers(0, 4))
            dtype = draw(s.other_dtypes(first))
            args.append(draw(s.distinct_arrays(dtype, tuple(base))))
        return s.OpSample(tuple(args), {"axis": _maybe_negative(s, draw, axis, len(base))})

    return sample()


register_op(
    OpDef(
        name="concat",
        family=FAMILY,
        reference=_concat_reference,
        infer=_concat_infer,
        canonicalize=_concat_canonicalize,
        sample=_concat_sample,
        variadic=True,
        vjp=_concat_vjp,
        doc="concatenate along axis; dtypes promote across all inputs",
    )
)
