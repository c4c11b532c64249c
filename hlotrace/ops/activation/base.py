"""The activation family's constants and the helpers its modules and lowering rules share."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval

FAMILY = "activation"

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_CUBIC = 0.044715
APPROXIMATIONS = ("none", "tanh")

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _float_infer(x: Aval, **attrs) -> Aval:
    if x.dtype not in dt.FLOATING:
        raise ShapeDtypeError(f"defined for float tensors only, got {x.dtype}")
    return x


def _number(value, name: str, *, allow_inf: bool = False) -> float:
    if not dt.is_number(value):
        raise ShapeDtypeError(f"{name}= must be a Python number, got {value!r}")
    value = float(value)
    if math.isnan(value) or (not allow_inf and math.isinf(value)):
        raise ShapeDtypeError(f"{name}= must be {'a non-NaN number' if allow_inf else 'finite'}, got {value}")
    return value


def _canonicalizer(defaults: dict, checks: dict | None = None):
    """Canonicalize keyword attributes ``defaults`` (name -> default), each checked by
    ``checks[name](value) -> value`` (default: a finite Python float)."""
    checks = checks or {}

    def canonicalize(avals, attrs):
        unknown = set(attrs) - set(defaults)
        if unknown:
            takes = ", ".join(f"{k}=" for k in defaults) or "no attributes"
            raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (takes {takes})")
        out = {}
        for name, default in defaults.items():
            value = attrs.get(name, default)
            out[name] = checks[name](value) if name in checks else _number(value, name)
        return out

    return canonicalize


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def _up(x):
    """``x`` in its compute dtype (float32 for float16/bfloat16)."""
    target = compute_dtype(x.dtype)
    return x if target == x.dtype else F.astype(x, target)
