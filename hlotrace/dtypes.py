"""The dtypes hlotrace supports and its type promotion rules.

hlotrace follows NumPy's promotion rules, restricted to five dtypes: ``bool``, ``int32``,
``float16``, ``bfloat16`` and ``float32``. Where NumPy would produce a 64-bit type
(``int32 + float32``, ``int32 / int32``, ``sum`` of ``int32``) the result is the 32-bit
type of the same kind, as in JAX without x64. ``bfloat16`` promotes like ``float16``:
mixed with ``float16`` or with ``int32`` it gives ``float32``.

Python scalars are *weak* (NEP 50): ``x + 2.0`` keeps ``x.dtype`` when ``x`` is a float
tensor; an ``int`` scalar keeps any non-bool dtype; a float scalar with an integer or bool
tensor gives ``float32``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlotrace.errors import ShapeDtypeError

bool_ = np.dtype(np.bool_)
int32 = np.dtype(np.int32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)

SUPPORTED = (bool_, int32, float16, bfloat16, float32)
FLOATING = (float16, bfloat16, float32)

# Short names as written on the command line (``f32[64,1000]``) and in MLIR types.
SHORT_NAMES = {bool_: "i1", int32: "i32", float16: "f16", bfloat16: "bf16", float32: "f32"}
_BY_NAME = {
    "bool": bool_,
    "pred": bool_,
    "i1": bool_,
    "int32": int32,
    "i32": int32,
    "float16": float16,
    "f16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "bf16": bfloat16,
    "float32": float32,
    "f32": float32,
    "float": float32,
}

# 64-bit and narrower NumPy types map onto the supported set (like JAX without x64).
_CANONICAL = {
    np.dtype(np.float64): float32,
    np.dtype(np.int64): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.int8): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
}


def canonicalize(dtype) -> np.dtype:
    """Map a dtype-like (``"f32"``, ``np.float64``, ``ml_dtypes.bfloat16``) onto a supported dtype.

    >>> canonicalize("float64")
    dtype('float32')
    """
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ShapeDtypeError(f"unknown dtype {dtype!r}") from exc
    if dt in SUPPORTED:
        return dt
    if dt in _CANONICAL:
        return _CANONICAL[dt]
    raise ShapeDtypeError(f"dtype {dt} is not supported (supported: {', '.join(str(d) for d in SUPPORTED)})")


def from_name(name: str) -> np.dtype | None:
    """The supported dtype called ``name`` (``"f32"``, ``"bfloat16"``, ``"bool"``...), else None."""
    return _BY_NAME.get(name.lower())


def is_floating(dtype: np.dtype) -> bool:
    return dtype in FLOATING


def promote_strong(a: np.dtype, b: np.dtype) -> np.dtype:
    """Promotion of two tensor dtypes."""
    if a == b:
        return a
    if a == bool_:
        return b
    if b == bool_:
        return a
    # Remaining mixes: int32 with a float, or two different floats.
    if a == float32 or b == float32:
        return float32
    return float32  # int32+f16, int32+bf16, f16+bf16 all widen to float32


class Weak:
    """Marker for a Python scalar operand; holds the Python type (bool, int or float)."""

    __slots__ = ("kind",)

    def __init__(self, kind: type):
        self.kind = kind

    def __repr__(self) -> str:
        return f"weak {self.kind.__name__}"


def _promote_weak(dtype: np.dtype, kind: type) -> np.dtype:
    if kind is bool:
        return dtype
    if kind is int:
        return int32 if dtype == bool_ else dtype
    # float scalar
    return dtype if dtype in FLOATING else float32


def _weak_alone(kind: type) -> np.dtype:
    return {bool: bool_, int: int32, float: float32}[kind]


def promote(*dtypes) -> np.dtype:
    """Result dtype of mixing tensor dtypes and :class:`Weak` Python scalars.

    >>> promote(float16, Weak(float))
    dtype('float16')
    """
    strong = [d for d in dtypes if not isinstance(d, Weak)]
    weak = [d.kind for d in dtypes if isinstance(d, Weak)]
    if strong:
        result = strong[0]
        for d in strong[1:]:
            result = promote_strong(result, d)
    else:
        # Only Python scalars: the widest kind decides, with NumPy's default 32-bit types.
        kind = float if float in weak else int if int in weak else bool
        return _weak_alone(kind)
    for kind in weak:
        result = _promote_weak(result, kind)
    return result


def python_scalar_kind(value) -> type | None:
    """bool, int or float for a Python/NumPy scalar usable as a weak operand, else None."""
    if isinstance(value, bool | np.bool_):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    return None


def short_name(dtype: np.dtype) -> str:
    return SHORT_NAMES[dtype]
