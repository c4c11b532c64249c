"""Bitwise ops on integers and bools, the shifts, and logical_xor.

Semantics are NumPy's (2.x) with hlotrace's dtype rules (:mod:`hlotrace.dtypes`): operands
are promoted and broadcast, Python ints and bools are weak scalars (``x & 1`` keeps an
int64 ``x`` int64; ``bool_tensor & 1`` is int32). Differences from NumPy and PyTorch:

- ``bitwise_and``/``bitwise_or``/``bitwise_xor``/``bitwise_not`` take bool, int32 and int64
  tensors; on bools they are logical (``bitwise_not(True)`` is False, as NumPy's
  ``invert``). Float operands are refused (as NumPy and PyTorch). ``invert`` is another
  name for ``bitwise_not``.
- ``left_shift(x, n)``/``right_shift(x, n)`` take integers (a bool operand is promoted with
  the other; two bools are refused: NumPy gives int8, which hlotrace lacks). The right shift
  is arithmetic (the sign bit is copied in, ``right_shift(-8, 1) == -4``). A count outside
  ``[0, bits)`` (negative, or the width of the dtype or more) gives what NumPy 2 defines:
  0 for ``left_shift``, and for ``right_shift`` 0 or -1 by the sign of ``x`` (C leaves
  these undefined). ``left_shift`` wraps:
  ``left_shift(1, 31)`` in int32 is ``INT32_MIN``.
- ``logical_xor(x, y)``: truth of exactly one of ``x``, ``y`` (nonzero is true, NaN too);
  any dtypes, bool result.

None of these ops is differentiable.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import broadcast_shapes
from hlotrace.ops.math.samples import sometimes_other_dtypes
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, OPS, Aval, OpDef, register_op

FAMILY = "bitwise"

__all__ = [
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "invert",
    "left_shift",
    "logical_xor",
    "right_shift",
]

BITWISE_DTYPES = (dt.bool_, *dt.INTEGER)


def _no_attrs(avals, attrs):
    if attrs:
        raise ShapeDtypeError(f"takes no attributes, got {sorted(attrs)}")
    return {}


def _register(name, reference, infer, sample, doc):
    register_op(
        OpDef(
            name=name,
            family=FAMILY,
            reference=reference,
            infer=infer,
            canonicalize=_no_attrs,
            sample=sample,
            vjp=NOT_DIFFERENTIABLE,
            doc=doc,
        )
    )


def _promoted(*avals: Aval) -> Aval:
    return Aval(broadcast_shapes(*(a.shape for a in avals)), dt.promote(*(a.dtype for a in avals)))


def _bitwise_infer(*avals: Aval) -> Aval:
    out = _promoted(*avals)
    if out.dtype not in BITWISE_DTYPES:
        raise ShapeDtypeError(f"is defined for bool and integer tensors only, got {out.dtype}")
    return out


def _in_promoted(ufunc):
    def reference(*arrays):
        common = dt.promote(*(a.dtype for a in arrays))
        return ufunc(*(a.astype(common, copy=False) for a in arrays))

    return reference


def _bitwise_sample(n):
    return lambda s: s.elementwise(n, BITWISE_DTYPES)


_register(
    "logical_xor",
    np.logical_xor,
    lambda a, b: Aval(broadcast_shapes(a.shape, b.shape), dt.bool_),
    sometimes_other_dtypes(
        lambda s: s.elementwise(2, (dt.bool_, dt.int32, dt.float32)), (dt.int64, dt.float16, dt.bfloat16, dt.float64)
    ),
    "truth of exactly one of x and y (nonzero is true)",
)
for _name, _ufunc, _doc in [
    ("bitwise_and", np.bitwise_and, "x & y on bools and integers"),
    ("bitwise_or", np.bitwise_or, "x | y on bools and integers"),
    ("bitwise_xor", np.bitwise_xor, "x ^ y on bools and integers"),
]:
    _register(_name, _in_promoted(_ufunc), _bitwise_infer, _bitwise_sample(2), _doc)
_register(
    "bitwise_not",
    np.invert,
    _bitwise_infer,
    _bitwise_sample(1),
    "~x: bitwise not of integers (-x - 1), logical not of bools",
)


# -- shifts -----------------------------------------------------------------------------------


def _shift_infer(x: Aval, count: Aval) -> Aval:
    out = _promoted(x, count)
    if out.dtype not in dt.INTEGER:
        raise ShapeDtypeError(f"is defined for integer tensors only, got {out.dtype}")
    return out


def _shift_reference(left: bool):
    def reference(x, count):
        common = dt.promote(x.dtype, count.dtype)
        x, count = x.astype(common), count.astype(common)
        bits = np.iinfo(common).bits
        in_range = (count >= 0) & (count < bits)
        safe = np.where(in_range, count, 0)
        if left:
            return np.where(in_range, np.left_shift(x, safe), 0).astype(common)
        return np.where(in_range, np.right_shift(x, safe), np.where(x < 0, -1, 0)).astype(common)

    return reference


def _shift_sample(s):
    """Integer values shifted by counts mostly in [0, bits) (every count a few times), and
    sometimes by negative counts or counts of the width of the dtype and beyond."""

    @s.st.composite
    def sample(draw):
        x, count = draw(s.elementwise(2, dt.INTEGER)).args
        rng = s.generator(draw)
        kinds = [a.dtype if isinstance(a, np.ndarray) else dt.Weak(type(a)) for a in (x, count)]
        bits = np.iinfo(dt.promote(*kinds)).bits
        if isinstance(count, np.ndarray) and count.dtype in dt.INTEGER:
            folded = count.astype(np.int64) % (bits + 2) - 1  # -1 .. bits
            count = np.where(rng.random(count.shape) < 5 / 6, folded, count).astype(count.dtype)
        elif type(count) is int:
            count = int(rng.integers(-1, bits + 1)) if rng.random() < 5 / 6 else count
        return s.OpSample((x, count))

    return sample()


_register(
    "left_shift",
    _shift_reference(left=True),
    _shift_infer,
    _shift_sample,
    "x << n, wrapping; a count outside [0, bits) gives 0",
)
_register(
    "right_shift",
    _shift_reference(left=False),
    _shift_infer,
    _shift_sample,
    "x >> n, arithmetic (sign-filling); a count outside [0, bits) gives 0 or -1 by x's sign",
)


# -- public functions ---------------------------------------------------------------------------


def logical_xor(x, y):
    """Truth of exactly one of x and y (nonzero is true); bool result."""
    return apply(OPS["logical_xor"], x, y)


def bitwise_and(x, y):
    """``x & y`` on bool and integer tensors (NumPy promotion; Python ints are weak)."""
    return apply(OPS["bitwise_and"], x, y)


def bitwise_or(x, y):
    """``x | y`` on bool and integer tensors."""
    return apply(OPS["bitwise_or"], x, y)


def bitwise_xor(x, y):
    """``x ^ y`` on bool and integer tensors."""
    return apply(OPS["bitwise_xor"], x, y)


def bitwise_not(x):
    """``~x``: bitwise not of integers (``-x - 1``), logical not of bools."""
    return apply(OPS["bitwise_not"], x)


invert = bitwise_not


def left_shift(x, n):
    """``x << n`` for integers, wrapping; a count ``n`` outside [0, bits) gives 0 (NumPy)."""
    return apply(OPS["left_shift"], x, n)


def right_shift(x, n):
    """``x >> n``, arithmetic; a count outside [0, bits) gives 0, or -1 for negative x (NumPy)."""
    return apply(OPS["right_shift"], x, n)
