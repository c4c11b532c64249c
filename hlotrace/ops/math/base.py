"""The math family's dtypes and the helpers its modules and lowering rules share."""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import ShapeDtypeError

FAMILY = "math"

NUMERIC_DTYPES = (*dt.INTEGER, *dt.FLOATING)
# |x| above which sinh and cosh are computed as exp(|x|/2)**2 / 2 (exp(-|x|) is below half
# an ulp of the result from here on, in float32 and float64).
SINH_COSH_SPLIT = 20.0


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype float results are computed in: float32 for float16/bfloat16."""
    return dt.promote_strong(dtype, dt.float32) if dtype in dt.FLOATING else dtype


def _no_attrs(avals, attrs):
    if attrs:
        raise ShapeDtypeError(f"takes no attributes, got {sorted(attrs)}")
    return {}


def _zero_vjp(ct, out, *inputs):
    return (None,) * len(inputs)
