"""The dtypes hlotrace supports and its type promotion rules.

hlotrace supports seven dtypes: ``bool``, ``int32``, ``int64``, ``float16``, ``bfloat16``,
``float32`` and ``float64``.

New tensors (PyTorch's convention, see :func:`dtype_of_value`): Python data (scalars,
nested lists) defaults to 32 bits (a list of floats is ``float32``, of ints ``int32``); a
NumPy array or an explicit ``dtype=`` keeps its dtype, 64 bits included. ``int8``,
``int16``, ``uint8`` and ``uint16`` become ``int32``; other dtypes are refused.

Promotion of two tensor dtypes follows NumPy's lattice except where NumPy widens a 32-bit
mix to 64 bits; there hlotrace keeps 32 bits, as JAX without x64 does:

- ``int32`` with ``float16``/``bfloat16``/``float32`` gives ``float32`` (NumPy: float64);
  ``float16`` with ``bfloat16`` gives ``float32``; ``int32`` with ``int64`` gives ``int64``;
- ``float64`` with anything gives ``float64``; ``int64`` with any float gives ``float64``
  (as in NumPy: no float narrower than 64 bits holds every int64);
- true division of ``bool``/``int32`` gives ``float32`` (NumPy: float64), of ``int64``
  gives ``float64``; float-valued unary functions (``exp``...) of ``int32`` give
  ``float32``, of ``int64`` ``float64``, of ``bool`` ``float16`` (as in NumPy);
- ``sum`` of ``bool``/``int32`` gives ``int32`` and wraps (NumPy: int64), of ``int64``
  ``int64``; ``mean`` of ``bool``/``int32`` gives ``float32``, of ``int64`` ``float64``.
  Reductions accumulate ``float64`` in ``float64`` and ``int64`` in ``int64``.

Python scalars are *weak* (NEP 50): ``x + 2.0`` keeps ``x.dtype`` when ``x`` is a float
tensor; an ``int`` scalar keeps any non-bool dtype (``int64`` included); a float scalar
with a ``bool`` or ``int32`` tensor gives ``float32``, with an ``int64`` tensor ``float64``
(NumPy 2 does so for int64). Python scalars alone give ``int32``/``float32``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlotrace.errors import ShapeDtypeError

bool_ = np.dtype(np.bool_)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)

SUPPORTED = (bool_, int32, int64, float16, bfloat16, float32, float64)
FLOATING = (float16, bfloat16, float32, float64)
INTEGER = (int32, int64)

# Short names as written on the command line (``f32[64,1000]``) and in MLIR types.
SHORT_NAMES = {
    bool_: "i1",
    int32: "i32",
    int64: "i64",
    float16: "f16",
    bfloat16: "bf16",
    float32: "f32",
    float64: "f64",
}
_BY_NAME = {
    "bool": bool_,
    "pred": bool_,
    "i1": bool_,
    "int32": int32,
    "i32": int32,
    "int64": int64,
    "i64": int64,
    "float16": float16,
    "f16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "bf16": bfloat16,
    "float32": float32,
    "f32": float32,
    "float": float32,
    "float64": float64,
    "f64": float64,
    "double": float64,
}

# Narrow integer NumPy types map onto int32.
_CANONICAL = {
    np.dtype(np.int16): int32,
    np.dtype(np.int8): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
}


def canonicalize(dtype) -> np.dtype:
    """Map a dtype-like (``"f32"``, ``np.float64``, ``ml_dtypes.bfloat16``) onto a supported dtype.

    64-bit dtypes are kept; int8/int16/uint8/uint16 become int32.

    >>> canonicalize("f64"), canonicalize(np.uint8)
    (dtype('float64'), dtype('int32'))
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


# Python data defaults to 32 bits, as in PyTorch: NumPy infers float64/int64 for it.
_PYTHON_DEFAULT = {float64: float32, int64: int32}


def dtype_of_value(value, dtype=None) -> np.dtype:
    """The dtype of a new tensor holding ``value``: ``dtype`` if given, a NumPy array's or
    scalar's own dtype (64 bits kept), and for Python data (scalars, nested lists) the
    32-bit default of its kind.

    >>> dtype_of_value([1.0, 2.0]), dtype_of_value(np.zeros(2)), dtype_of_value([1], "i64")
    (dtype('float32'), dtype('float64'), dtype('int64'))
    """
    if dtype is not None:
        return canonicalize(dtype)
    if isinstance(value, np.ndarray | np.generic):
        return canonicalize(value.dtype)
    inferred = canonicalize(np.asarray(value).dtype)
    return _PYTHON_DEFAULT.get(inferred, inferred)


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
    if a == float64 or b == float64:
        return float64
    if a == int64 or b == int64:
        # int32 + int64 is int64; no float narrower than float64 holds every int64 (NumPy).
        return float64 if a in FLOATING or b in FLOATING else int64
    # Remaining mixes: int32 with a float, or two different floats narrower than 64 bits;
    # NumPy gives float64 for int32 + float16/float32, hlotrace float32.
    return float32


def compute_dtype(dtype) -> np.dtype:
    """The dtype float arithmetic on ``dtype`` runs in, in the references and the lowering
    rules alike: float32 for float16/bfloat16 (accumulate wide, round once), float64 for
    float64 (``promote_strong(dtype, float32)``).

    >>> compute_dtype(bfloat16)
    dtype('float32')
    """
    return promote_strong(np.dtype(dtype), float32)


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
    if dtype in FLOATING:
        return dtype
    return float64 if dtype == int64 else float32


def true_divide_dtype(dtype: np.dtype) -> np.dtype:
    """Result dtype of true division (and mean) in ``dtype``: floats keep it, int64 gives
    float64, int32 and bool float32.

    >>> true_divide_dtype(int64), true_divide_dtype(int32)
    (dtype('float64'), dtype('float32'))
    """
    if dtype in FLOATING:
        return dtype
    return float64 if dtype == int64 else float32


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


def number_kind(value) -> type | None:
    """bool, int or float for a scalar number: a Python one, a NumPy one, or an ml_dtypes one
    (``bfloat16(2.5)``, what ``x.numpy().max()`` of a bfloat16 tensor gives: a ``np.generic``
    that is not a ``np.floating``); None for anything else (arrays, tensors, strings).

    >>> number_kind(2), number_kind(np.float32(1)), number_kind(ml_dtypes.bfloat16(1)), number_kind("1")
    (<class 'int'>, <class 'float'>, <class 'float'>, None)
    """
    if isinstance(value, bool | np.bool_):
        return bool
    if isinstance(value, int | np.integer):
        return int
    if isinstance(value, float | np.floating):
        return float
    if isinstance(value, np.generic) and value.dtype.kind == "V":  # ml_dtypes' scalar types
        for info, kind in ((ml_dtypes.finfo, float), (ml_dtypes.iinfo, int)):
            try:
                info(value.dtype)
            except (TypeError, ValueError):
                continue
            return kind
    return None


def is_number(value) -> bool:
    """Whether ``value`` is an int or float scalar (Python, NumPy or ml_dtypes; not bool)."""
    return number_kind(value) in (int, float)


def as_python_number(value):
    """``value`` (a scalar :func:`number_kind` knows) as a Python bool, int or float; anything
    else is returned unchanged, for the caller's own error message."""
    kind = number_kind(value)
    return value if kind is None else kind(value)


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
