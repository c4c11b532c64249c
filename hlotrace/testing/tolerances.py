"""The one tolerance table: compiled results vs eager NumPy references.

Keyed by dtype; ops that need more carry an entry in ``OP_TOLERANCES`` with the reason.
Integer and bool results must match bitwise. For floats, NaN positions must match exactly,
and so must infinities (with sign) and, where the expected value is ±0, the sign of zero
(ops that cannot promise it are listed in ``UNSIGNED_ZEROS`` with the reason); everything
else must satisfy ``|actual - expected| <= atol + rtol * |expected|``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlotrace import dtypes as dt


class Tolerance(NamedTuple):
    rtol: float
    atol: float
    reason: str = ""
    signed_zeros: bool = True  # an expected ±0 must come out with the same sign


EXACT = Tolerance(0.0, 0.0, "integer and bool results are exact")

TOLERANCES: dict[np.dtype, Tolerance] = {
    dt.bool_: EXACT,
    dt.int32: EXACT,
    dt.int64: EXACT,
    dt.float32: Tolerance(1e-6, 1e-6, "one or two ulp of float32"),
    # XLA:CPU's float64 exp/tanh/rsqrt/pow were measured within 6 ulp of libm (tanh worst,
    # 7.8e-16 relative; log/sin/cos/sqrt exact) on 20,000 values each: 1e-14 (~45 ulp)
    # leaves room for other backends' libraries and still fails a float32 detour (~1e-7).
    dt.float64: Tolerance(1e-14, 1e-14, "a few ulp of float64 (2.2e-16)"),
    dt.float16: Tolerance(1e-3, 1e-3, "one ulp of float16 is ~1e-3"),
    dt.bfloat16: Tolerance(1e-2, 1e-2, "one ulp of bfloat16 is ~8e-3"),
}

_TRANSCENDENTAL = "XLA's polynomial approximations differ from libm by a few ulp"

# (op, dtype) -> Tolerance; dtype None applies to every float dtype not listed.
OP_TOLERANCES: dict[tuple[str, np.dtype | None], Tolerance] = {
    ("exp", dt.float32): Tolerance(1e-5, 1e-6, _TRANSCENDENTAL),
    ("log", dt.float32): Tolerance(1e-5, 1e-6, _TRANSCENDENTAL),
    ("tanh", dt.float32): Tolerance(1e-5, 1e-6, _TRANSCENDENTAL),
    ("sin", dt.float32): Tolerance(1e-5, 1e-5, _TRANSCENDENTAL),
    ("cos", dt.float32): Tolerance(1e-5, 1e-5, _TRANSCENDENTAL),
    ("rsqrt", dt.float32): Tolerance(1e-5, 1e-6, "XLA's rsqrt may use a refined hardware estimate"),
    ("power", dt.float32): Tolerance(1e-5, 1e-6, "pow is exp(y*log(x)) in XLA"),
    ("power", dt.float16): Tolerance(4e-3, 1e-3, "pow is computed in float32 then rounded; libm rounds differently"),
    ("power", dt.bfloat16): Tolerance(2e-2, 1e-2, "pow is computed in float32 then rounded"),
}


# op -> why its float results may carry either sign where the expected value is ±0.
_ZERO_TIES = (
    "NumPy returns either operand when +0.0 meets -0.0 (its SIMD and scalar loops differ); XLA orders -0.0 below +0.0"
)
UNSIGNED_ZEROS: dict[str, str] = {
    "maximum": _ZERO_TIES,
    "minimum": _ZERO_TIES,
    "max": _ZERO_TIES,
    "min": _ZERO_TIES,
    "matmul": "a dot product of signed zeros is +0 or -0 depending on where the accumulator starts "
    "(BLAS at +0, XLA at the first product)",
}


_FOLDED_SUBNORMALS = (
    "XLA:CPU flushes subnormal inputs to zero at run time, but its constant folder evaluates this "
    "function of a subnormal constant inaccurately (log(1.1754942e-38) folds to -103.97, not -87.34 or -inf)"
)
# op -> why elements computed from subnormal inputs are not compared (elementwise ops only).
SUBNORMAL_INPUTS_UNCHECKED: dict[str, str] = {
    name: _FOLDED_SUBNORMALS for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "power")
}


def tolerance_for(op: str, dtype: np.dtype) -> Tolerance:
    dtype = np.dtype(dtype)
    tolerance = OP_TOLERANCES.get((op, dtype)) or OP_TOLERANCES.get((op, None)) or TOLERANCES[dtype]
    if op in UNSIGNED_ZEROS:
        tolerance = tolerance._replace(signed_zeros=False)
    return tolerance


def mismatches(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """Boolean mask of the elements of ``actual`` that do not match ``expected``."""
    if expected.dtype.kind in "biu":  # exact, and int64 would round as float64
        return actual != expected
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    a_inf, e_inf = np.isinf(a), np.isinf(e)
    finite = ~(a_nan | e_nan | a_inf | e_inf)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - e) <= tolerance.atol + tolerance.rtol * np.abs(e)
    bad = (a_nan != e_nan) | (a_inf != e_inf) | (a_inf & e_inf & (np.sign(a) != np.sign(e))) | (finite & ~close)
    if tolerance.signed_zeros:
        bad |= finite & (e == 0) & (np.signbit(a) != np.signbit(e))
    return bad


def assert_close(
    actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance, what: str = "", alternatives=()
) -> None:
    """Raise AssertionError with the first mismatches if ``actual`` is not close to ``expected``.

    ``alternatives``: other acceptable expected arrays; an element passes if it matches
    ``expected`` or any of them (used for XLA:CPU's flush of subnormals, see check_op).
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    prefix = f"{what}: " if what else ""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"{prefix}got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
        )
    bad = mismatches(actual, expected, tolerance)
    for alternative in alternatives:
        bad &= mismatches(actual, np.asarray(alternative), tolerance)
    if np.any(bad):
        positions = np.argwhere(bad)[:5]
        details = ", ".join(
            f"at {tuple(int(i) for i in p)}: got {actual[tuple(p)]!r}, expected {expected[tuple(p)]!r}"
            for p in positions
        )
        raise AssertionError(
            f"{prefix}{int(np.sum(bad))} of {expected.size} elements differ "
            f"(rtol={tolerance.rtol}, atol={tolerance.atol}); {details}"
        )
