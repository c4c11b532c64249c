"""eye and linspace: references, inference, canonical attributes and user functions
(semantics in :mod:`hlotrace.ops.creation`)."""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.creation.base import FAMILY, _check_attrs, _int_attr, _no_inputs, _scalar_kind, canonical_shape
from hlotrace.ops.creation.samples import eye_sample, linspace_sample
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, get_op, register_op

__all__ = ["eye", "linspace"]


# -- eye ------------------------------------------------------------------------------------


def _eye_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("eye", attrs, ("n", "m", "k", "dtype"), ("n",))
    (n,) = canonical_shape((attrs["n"],))
    m = n if attrs.get("m") is None else canonical_shape((attrs["m"],))[0]
    (k,) = _int_attr(attrs.get("k", 0), "k")
    dtype = attrs.get("dtype")
    # k beyond the matrix gives the same all-zero result as k just past its corner.
    return {"n": n, "m": m, "k": min(max(k, -n), m), "dtype": dt.float32 if dtype is None else dt.canonicalize(dtype)}


def _eye_reference(*, n, m, k, dtype):
    return (np.arange(m)[None, :] - np.arange(n)[:, None] == k).astype(dtype)


register_op(
    OpDef(
        name="eye",
        family=FAMILY,
        reference=_eye_reference,
        infer=lambda *avals, n, m, k, dtype: Aval((n, m), dtype),
        canonicalize=_eye_canonicalize,
        sample=eye_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="n x m matrix with ones where column - row == k (default float32)",
    )
)


# -- linspace -------------------------------------------------------------------------------

LINSPACE_MAX = 2**26  # the rule's exact split of i * step needs i < 2**26
LINSPACE_MIN_STEP = 2.0**-960  # its parts stay normal numbers (XLA flushes subnormals)


def linspace_step_parts(step: float) -> tuple[float, float]:
    """``step`` as ``hi + lo``, hi with 27 significant bits and lo with 26: ``i * hi`` and
    ``i * lo`` are exact in float64 for ``0 <= i < 2**26``."""
    mantissa, exponent = math.frexp(step)
    hi = math.ldexp(math.trunc(math.ldexp(mantissa, 27)), exponent - 27)
    return hi, step - hi


def linspace_float64(start, stop, num, endpoint) -> np.ndarray:
    """NumPy's float64 linspace (``i * step + start``, the last value ``stop``)."""
    return np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)


def _linspace_canonicalize(avals, attrs):
    _no_inputs(avals)
    _check_attrs("linspace", attrs, ("start", "stop", "num", "endpoint", "dtype"), ("start", "stop", "num"))
    if bool in (_scalar_kind(attrs["start"], "start"), _scalar_kind(attrs["stop"], "stop")):
        raise ShapeDtypeError("start and stop must be numbers, not bools")
    start, stop = float(attrs["start"]), float(attrs["stop"])
    if not (np.isfinite(start) and np.isfinite(stop) and np.isfinite(stop - start)):
        raise ShapeDtypeError(f"needs finite start, stop and stop - start, got {start!r}, {stop!r}")
    (num,) = _int_attr(attrs["num"], "num")
    if not 0 <= num <= LINSPACE_MAX:
        raise ShapeDtypeError(f"num must lie in [0, 2**26], got {num}")
    endpoint = attrs.get("endpoint", True)
    if not isinstance(endpoint, bool | np.bool_):
        raise ShapeDtypeError(f"endpoint must be a bool, got {endpoint!r}")
    div = num - 1 if endpoint else num
    if start != stop and div > 0 and abs((stop - start) / div) < LINSPACE_MIN_STEP:
        raise ShapeDtypeError(f"the step from {start!r} to {stop!r} in {div} steps is too small (below 2**-960)")
    dtype = attrs.get("dtype")
    dtype = dt.float32 if dtype is None else dt.canonicalize(dtype)
    if dtype in dt.INTEGER:
        info = np.iinfo(dtype)
        low, high = math.floor(min(start, stop)), math.floor(max(start, stop))
        if not info.min <= low <= high <= min(info.max, 2**53):
            raise ShapeDtypeError(f"values from {start!r} to {stop!r} do not fit in {dtype}")
    return {"start": start, "stop": stop, "num": num, "endpoint": bool(endpoint), "dtype": dtype}


def _linspace_reference(*, start, stop, num, endpoint, dtype):
    y = linspace_float64(start, stop, num, endpoint)
    return (np.floor(y) if dtype in dt.INTEGER else y).astype(dtype)


register_op(
    OpDef(
        name="linspace",
        family=FAMILY,
        reference=_linspace_reference,
        infer=lambda *avals, start, stop, num, endpoint, dtype: Aval((num,), dtype),
        canonicalize=_linspace_canonicalize,
        sample=linspace_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="NumPy linspace(start, stop, num, endpoint) computed in float64, then dtype (default float32)",
    )
)


def eye(n, m=None, k=0, dtype="float32"):
    """An ``n x m`` matrix (``m`` defaults to ``n``) with ones where ``column - row == k``
    and zeros elsewhere; float32 unless ``dtype`` is given (NumPy's default is float64)."""
    return apply(get_op("eye"), n=n, m=m, k=k, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    """NumPy's ``linspace``: ``num`` evenly spaced values from ``start`` to ``stop``
    (included unless ``endpoint=False``), computed in float64 as NumPy does and rounded once
    to ``dtype`` (default float32; integer dtypes floor, as NumPy)."""
    return apply(get_op("linspace"), start=start, stop=stop, num=num, endpoint=endpoint, dtype=dtype)
