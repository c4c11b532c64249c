"""tril and triu: references, inference, VJPs and user functions (semantics in
:mod:`hlotrace.ops.layout`)."""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.layout.base import FAMILY, _check_attrs, _same_aval
from hlotrace.ops.layout.samples import triangle_sample
from hlotrace.ops.registry import OpDef, get_op, register_op
from hlotrace.ops.shape import _as_int as _int

__all__ = ["tril", "triu"]


# -- tril, triu -----------------------------------------------------------------------------


def _triangle_canonicalize(name):
    def canonicalize(avals, attrs):
        _check_attrs(name, attrs, ("k",))
        shape = avals[0].shape
        if len(shape) < 2:
            raise ShapeDtypeError(f"needs a tensor of rank >= 2 (a batch of matrices), got rank {len(shape)}")
        rows, cols = shape[-2:]
        return {"k": min(max(_int(attrs.get("k", 0), "k"), -rows), cols)}

    return canonicalize


for _name, _numpy, _doc in [
    ("tril", np.tril, "lower triangle: x[..., i, j] where j - i <= k, else 0"),
    ("triu", np.triu, "upper triangle: x[..., i, j] where j - i >= k, else 0"),
]:
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=lambda x, *, k, _f=_numpy: _f(x, k),
            infer=_same_aval,
            canonicalize=_triangle_canonicalize(_name),
            sample=triangle_sample,
            vjp=lambda ct, out, x, *, k, _n=_name: (apply(get_op(_n), ct, k=k),),
            doc=_doc,
        )
    )


def tril(x, k=0):
    """Lower triangle of the last two dims: ``x[..., i, j]`` where ``j - i <= k``, else 0."""
    return apply(get_op("tril"), x, k=k)


def triu(x, k=0):
    """Upper triangle of the last two dims: ``x[..., i, j]`` where ``j - i >= k``, else 0."""
    return apply(get_op("triu"), x, k=k)
