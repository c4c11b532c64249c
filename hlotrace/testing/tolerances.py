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
    # Activations built on erfc/logistic/exp/log1p/expm1 and normalizations scaled by rsqrt:
    # the float32 tolerance of the functions they are made of (measured: XLA:CPU's float32
    # erfc is within 4e-6 relative of libm's, 3.7e-7 absolute on gelu).
    **{
        (op, dt.float32): Tolerance(1e-5, 1e-6, _TRANSCENDENTAL)
        for op in ("gelu", "normal_cdf", "silu", "elu", "softplus")
    },
    **{
        (op, dt.float32): Tolerance(1e-5, 1e-6, "scaled by XLA's rsqrt, which may use a refined hardware estimate")
        for op in ("layer_norm", "batch_norm_inference")
    },
    ("power", dt.float32): Tolerance(1e-5, 1e-6, "pow is exp(y*log(x)) in XLA"),
    ("power", dt.float16): Tolerance(4e-3, 1e-3, "pow is computed in float32 then rounded; libm rounds differently"),
    ("power", dt.bfloat16): Tolerance(2e-2, 1e-2, "pow is computed in float32 then rounded"),
    # log1p/expm1 exist for their relative accuracy near 0: atol is the smallest normal, or
    # log(1 + x) (wrong by up to half an ulp of 1 absolute) would pass. XLA:CPU's float64
    # log1p is 2.7e-14 off (relative) for x in [-0.5, -0.25), 2.2e-16 elsewhere (2e6 values).
    **{
        (op, d): Tolerance(r, a, "relative accuracy near 0 is the point of log1p/expm1")
        for op in ("log1p", "expm1")
        for d, r, a in (
            (dt.float32, 1e-6, 1.2e-38),
            (dt.float64, 1e-13 if op == "log1p" else 1e-14, 2.3e-308),
            (dt.float16, 1e-3, 6.2e-5),
            (dt.bfloat16, 1e-2, 1.2e-38),
        )
    },
    # Box-Muller's log/cos: 4.8e-7 worst over 10**6 float32 draws (float64 4.4e-16); a
    # z = -0.0 times std = 0 plus mean 0 keeps its sign only where XLA folds the + 0.
    **{
        ("random_normal", d): Tolerance(tol, tol, "XLA's log/cos are not libm's; z near 0 may flip sign", False)
        for d, tol in ((dt.float32, 1e-5), (dt.float64, 1e-14), (dt.float16, 1e-3), (dt.bfloat16, 1e-2))
    },
    # XLA:CPU scans a long axis in blocks (its reduce_window rewrite), NumPy sequentially:
    # the rounding error follows the prefix sums' magnitude, not the result's. Random
    # N(0, 1) cotangents over 4200 elements (the VJPs' reverse cumsums): 2.4e-4 apart in
    # float32, 4.8e-13 in float64. The forward samples sum exact values (any order).
    **{
        (op, d): Tolerance(r, a, "blocked vs sequential prefix sums round differently")
        for op in ("cumsum", "cumprod")
        for d, r, a in ((dt.float32, 1e-5, 1e-4), (dt.float64, 1e-13, 1e-12))
    },
}


# (matmul precision, platform) -> the tolerance of a float32 matmul or convolution compiled at
# that precision (``xla_trace(precision=...)``; platform None: any other), its ``rtol`` relative
# to the sum of |products| that make each element, not to the element (a precision rounds the
# operands, and a sum that cancels keeps the products' error): see matmul_precision_tolerance.
_TF32 = (
    "TF32 (NVIDIA's tensor cores, Ampere and later; jax's DEFAULT and HIGH there) keeps 10 of float32's "
    "23 explicit mantissa bits of each operand: a product is off by up to 2 * 2**-10 of its magnitude "
    "(truncated operands), the float32 sum adds little"
)
_CPU_FLOAT32 = "XLA:CPU computes float32 dots and convolutions in float32 at every precision (bitwise equal here)"
MATMUL_PRECISION_TOLERANCES: dict[tuple[str, str | None], Tolerance] = {
    ("highest", None): Tolerance(1e-6, 1e-6, "float32 products summed in float32 (two ulp of the sum of |products|)"),
    ("high", "cpu"): Tolerance(1e-6, 1e-6, _CPU_FLOAT32),
    ("default", "cpu"): Tolerance(1e-6, 1e-6, _CPU_FLOAT32),
    ("high", None): Tolerance(2e-3, 1e-6, _TF32),
    ("default", None): Tolerance(2e-3, 1e-6, _TF32),
}


def matmul_precision_tolerance(precision: str, platform: str, magnitudes: np.ndarray) -> Tolerance:
    """The tolerance of each element of a float32 matmul or convolution compiled at
    ``precision`` for ``platform`` (MATMUL_PRECISION_TOLERANCES), as an absolute one:
    ``atol + rtol * magnitudes``, ``magnitudes`` the sum of |products| of each element (the
    op's reference on the operands' absolute values). Either zero may come out (UNSIGNED_ZEROS).

    >>> tol = matmul_precision_tolerance("default", "cuda", np.abs(a) @ np.abs(b))
    >>> assert_close(compiled, a @ b, tol)
    """
    row = MATMUL_PRECISION_TOLERANCES.get((precision, platform)) or MATMUL_PRECISION_TOLERANCES[(precision, None)]
    return row._replace(rtol=0.0, atol=row.atol + row.rtol * np.asarray(magnitudes, np.float64), signed_zeros=False)


# op -> why its float results may carry either sign where the expected value is ±0.
_ZERO_TIES = (
    "NumPy returns either operand when +0.0 meets -0.0 (its SIMD and scalar loops differ); XLA orders -0.0 below +0.0"
)
UNSIGNED_ZEROS: dict[str, str] = {
    "maximum": _ZERO_TIES,
    "minimum": _ZERO_TIES,
    "max": _ZERO_TIES,
    "min": _ZERO_TIES,
    "max_pool2d": _ZERO_TIES + " (a window holding both zeros)",
    "adaptive_max_pool2d": _ZERO_TIES + " (a window holding both zeros)",
    "matmul": "a dot product of signed zeros is +0 or -0 depending on where the accumulator starts "
    "(BLAS at +0, XLA at the first product)",
    # A convolution is a sum of products like a dot (seed sweep, 2026-11-26: conv1d-float16 of
    # [2.75, 0.25] with weights of -0.0 gave -0.0 compiled, +0.0 from NumPy's einsum).
    **{
        op: "a convolution sums products of signed zeros: +0 or -0 depending on where the accumulator starts"
        for op in ("conv1d", "conv2d", "conv_transpose2d", "conv2d_weight_grad")
    },
    # Seed 479480147 (ci): avg_pool2d_backward-float16 of a window summing to 0 gave -0.0 from
    # NumPy (a float32 residue of -1e-8 of its ct / 9 terms, rounded to float16) and +0.0 compiled.
    **{
        op: "it sums ct / window-size terms of both signs in float32: where they cancel, one order leaves a "
        "residue below the dtype's smallest subnormal, rounded to -0 or +0, and another an exact +0"
        for op in ("avg_pool2d_backward", "adaptive_avg_pool2d_backward")
    },
}


_FOLDED_SUBNORMALS = (
    "XLA:CPU flushes subnormal inputs to zero at run time, but its constant folder evaluates this "
    "function of a subnormal constant inaccurately (log(1.1754942e-38) folds to -103.97, not -87.34 or -inf)"
)
# op -> why elements computed from subnormal inputs are not compared (elementwise ops only).
SUBNORMAL_INPUTS_UNCHECKED: dict[str, str] = {
    name: _FOLDED_SUBNORMALS for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "power")
}
# atan2 of subnormals is NaN or the wrong pi on XLA:CPU (its flush to zero reaches some of its
# steps only); floor_divide and mod turn a flushed subnormal into another integer (-1e-45 // 3
# is -1, -0.0 // 3 is -0.0), and a float16 subnormal widened to float32 is not flushed at all,
# so no reference with all or no subnormals flushed fits a mixed operation.
SUBNORMAL_INPUTS_UNCHECKED.update(
    {name: "XLA:CPU flushes some subnormal operands and not others" for name in ("atan2", "floor_divide", "mod")}
)


# op -> why its compiled x / y may be x * (1 / y) with a subnormal 1 / y flushed to ±0 (or,
# in float16, an overflowing 1 / y rounded to ±inf). The check accepts that only where y is
# a broadcast, scalar or captured (constant) divisor and 1 / y is subnormal or overflows in
# the result's dtype (|y| > 2**126 in float32, |y| < 2**-16 in float16); README, "Where XLA
# and NumPy disagree", says why the lowering does not avoid it.
RECIPROCAL_FLUSHED: dict[str, str] = {
    "divide": "XLA rewrites x / broadcast(y) and x / constant into x * (1 / y), and XLA:CPU flushes a "
    "subnormal 1 / y to 0: -FLT_MAX / -FLT_MAX is 0 (jax.jit too)",
}
# Ops built on that division whose result at such elements is then floored or subtracted
# (1.7e38 // 1.7e38 is 0): those elements are not compared.
RECIPROCAL_FLUSHED_UNCHECKED: dict[str, str] = {
    name: "computed from x / y, which XLA computes as x * (1 / y) with 1 / y flushed (see RECIPROCAL_FLUSHED)"
    for name in ("floor_divide", "mod")
}


# op -> why its gradient's compiled and eager values may differ by a few roundings of its
# input's magnitude, not of the gradient's: the gradient checks add eps * max|x| (along the
# reduced axes) * max|cotangent| * 16 to the absolute tolerance of these ops' gradients.
CANCELLING_GRADIENTS: dict[str, str] = {
    name: "its gradient is a multiple of x - mean(x): where |mean| >> std the difference cancels, and means "
    "summed in another order differ by eps * |x| (seed 2720010352: var of values near -1000, gradients near "
    "0.07 apart by 4e-5)"
    for name in ("var",)
}


def cancellation_atol(x: np.ndarray, axis, cotangent: np.ndarray) -> np.ndarray:
    """Per element of ``x``: 16 * eps * max|x| along ``axis`` (the reduced axes; None: all)
    * max|cotangent|, non-finite values left out (see CANCELLING_GRADIENTS)."""
    import ml_dtypes

    values = np.abs(np.where(np.isfinite(x), x, 0).astype(np.float64))
    axis = tuple(axis) if isinstance(axis, list | tuple) else axis
    scale = np.broadcast_to(np.max(values, axis=axis, keepdims=True) if values.size else values, values.shape)
    weights = np.abs(np.where(np.isfinite(cotangent), cotangent, 0).astype(np.float64))
    largest = float(weights.max()) if weights.size else 0.0
    return 16 * float(ml_dtypes.finfo(x.dtype).eps) * scale * largest


# op -> why its compiled gradient may differ from the eager one by the rounding of the
# products its VJP sums: the compiled-gradient check adds eps * (sum of |cotangent * partial
# product| over the outputs each element reaches) / |x| to the absolute tolerance
# (product_sum_atol).
ROUNDED_PRODUCT_GRADIENTS: dict[str, str] = {
    "cumprod": "its VJP is a reverse cumsum of ct * out: XLA:CPU keeps each float16/bfloat16 product in float32 "
    "(it drops the convert round trip before the float32 scan), NumPy rounds it first; over thousands of terms "
    "that cancel, the sums differ by up to eps/2 * sum|ct * out| (seed 1050692632: bfloat16 cumprod of 4,112 "
    "values, gradients near 0.2 apart by 0.14)",
}


def product_sum_atol(x: np.ndarray, axis, reverse: bool, cotangent: np.ndarray) -> np.ndarray:
    """Per element of ``x``: eps(x.dtype) * (reverse-direction cumsum of |cotangent * P|) / |x|
    along ``axis`` (None: flattened), P the running products with zeros taken as 1 (an upper
    bound of every partial product the VJP sums); non-finite values left out
    (see ROUNDED_PRODUCT_GRADIENTS)."""
    import ml_dtypes

    shape = x.shape
    values = np.where(np.isfinite(x), x, 0).astype(np.float64)
    weights = np.where(np.isfinite(cotangent), cotangent, 0).astype(np.float64)
    if axis is None:
        values, weights, axis = values.reshape(-1), weights.reshape(-1), 0
    if values.size == 0:
        return np.zeros(shape)

    def scan(a, forward):
        if forward:
            return np.flip(np.cumsum(np.flip(a, axis), axis), axis) if reverse else np.cumsum(a, axis)
        return np.cumsum(a, axis) if reverse else np.flip(np.cumsum(np.flip(a, axis), axis), axis)

    with np.errstate(over="ignore", invalid="ignore"):
        magnitudes = np.abs(np.where(values == 0, 1.0, values))
        products = np.exp(scan(np.log(magnitudes), forward=True))  # |running product|, zeros as 1
        reach = scan(np.abs(weights) * products, forward=False)  # the outputs each element reaches
        bound = float(ml_dtypes.finfo(x.dtype).eps) * reach / magnitudes
    return np.where(np.isfinite(bound), bound, 0.0).reshape(shape)


# op -> why its float16/bfloat16 results, when its input is cast to that dtype first, may
# differ from the reference by the rounding of every cast input (the check adds
# cast_sum_atol to the absolute tolerance of those results).
UNROUNDED_CASTS: dict[str, str] = {
    "cumsum": "its float16/bfloat16 scan runs in float32, and XLA:GPU drops the cast of the input to the result "
    "dtype before it (convert pairs folded into one: int32 to float32 directly), where the reference rounds every "
    "input first: a prefix sum differs by up to eps/2 * the prefix sum of |x| (H100, gpu profile, seed 0: the "
    "bfloat16 cumsum of int32 [452, 1, -355] is 98 compiled, 452 + 1 - 356 = 97 in the reference)",
}


def cast_sum_atol(x: np.ndarray, axis, reverse: bool, dtype) -> np.ndarray:
    """Per element of a prefix sum of ``x`` along ``axis`` (None: flattened) in ``dtype``:
    eps(dtype) * the prefix sum of |x| up to it, twice what rounding each input to ``dtype``
    can change it by; non-finite values left out (see UNROUNDED_CASTS)."""
    import ml_dtypes

    values = np.abs(np.where(np.isfinite(x), x, 0).astype(np.float64))
    if axis is None:
        values, axis = values.reshape(-1), 0
    if reverse:
        return float(ml_dtypes.finfo(dtype).eps) * np.flip(np.cumsum(np.flip(values, axis), axis), axis)
    return float(ml_dtypes.finfo(dtype).eps) * np.cumsum(values, axis)


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
        # Only a zero has a sign to get wrong: a tiny non-zero result where ±0 is expected is
        # judged by atol (layer_norm's x - mean, -3.6e-08 for 0 in bfloat16, seed 1073022860).
        bad |= finite & (e == 0) & (a == 0) & (np.signbit(a) != np.signbit(e))
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
