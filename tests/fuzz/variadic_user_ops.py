"""User ops for tests/fuzz/test_user_ops.py, loaded the way a user loads theirs: ``hlotrace
fuzz --import tests/fuzz/variadic_user_ops.py`` (a path) or ``--import variadic_user_ops``
(a module name, with tests/fuzz on sys.path).

None has a sample strategy, and each inference is written ``def infer(*avals)``, so the
fuzzer takes the number of operands from the NumPy reference ``def ref(a, b, c)``:

- ``issue18_fma``: a * b + c with a correct rule;
- ``issue18_fma_wrong``: the same op, its rule planted wrong (a * b - c);
- ``issue18_refuses``: an inference that refuses every operand set.

The names are unique to these tests (the registry refuses a second op of one name); the
test fixture removes them again.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError
from hlotrace.lowering import hlo
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval, OpDef, register_op
from hlotrace.runtime.jaxlib_compat import stablehlo

NAMES = ("issue18_fma", "issue18_fma_wrong", "issue18_refuses")


def infer(*avals):
    """Three floats of one dtype, of shapes that broadcast together."""
    a, b, c = avals  # a ValueError for another count: the fuzzer must not offer one
    if a.dtype not in dt.FLOATING or b.dtype != a.dtype or c.dtype != a.dtype:
        raise ShapeDtypeError(f"fma takes floats of one dtype, not {a.dtype}, {b.dtype}, {c.dtype}")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    except ValueError:
        raise ShapeDtypeError(f"fma's shapes {a.shape}, {b.shape}, {c.shape} do not broadcast") from None
    return Aval(tuple(shape), a.dtype)


def ref(a, b, c):
    return a * b + c


def refuse(*avals):
    raise ShapeDtypeError("this op accepts nothing")


def _operands(ctx, operands):
    return [hlo.broadcast_to(v, aval, ctx.out_aval.shape) for v, aval in zip(operands, ctx.in_avals, strict=True)]


register_op(OpDef(name="issue18_fma", family="user", reference=ref, infer=infer))
register_op(OpDef(name="issue18_fma_wrong", family="user", reference=ref, infer=infer))
register_op(OpDef(name="issue18_refuses", family="user", reference=lambda a, b, c: a, infer=refuse))


@rule("issue18_fma")
def _fma(ctx, a, b, c):
    a, b, c = _operands(ctx, (a, b, c))
    return stablehlo.AddOp(stablehlo.MulOp(a, b).result, c).result


@rule("issue18_fma_wrong")
def _fma_wrong(ctx, a, b, c):
    a, b, c = _operands(ctx, (a, b, c))
    return stablehlo.SubtractOp(stablehlo.MulOp(a, b).result, c).result  # planted: a * b - c


@rule("issue18_refuses")
def _refuses(ctx, a, b, c):
    return a
