"""Run a LoweredModule on host arrays, and compare results exactly: the pass tests' tools."""

from __future__ import annotations

import numpy as np


def run_lowered(lowered, arrays, platform: str | None = None) -> list[np.ndarray]:
    """Compile ``lowered`` (a LoweredModule, e.g. after ``passes.run``) and run it on
    ``arrays`` (host arrays in @main's argument order); return the outputs on the host."""
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    exe = runtime.compile(lowered.text(), lowered.in_avals, lowered.out_avals, platform=platform)
    buffers = [
        exe.to_device(i, np.asarray(a, dtype=aval.dtype))
        for i, (a, aval) in enumerate(zip(arrays, lowered.in_avals, strict=True))
    ]
    return [np.asarray(b) for b in exe.run(buffers)]


def _nan_mask(a: np.ndarray):
    return np.isnan(a.astype(np.float64)) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else None


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits, the sign of zero included; NaN equals NaN whatever its
    payload (no hlotrace op distinguishes NaN payloads, and XLA does not preserve them)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == np.bool_:
        return bool(np.array_equal(a, b))
    nan_a, nan_b = _nan_mask(a), _nan_mask(b)
    if nan_a is not None:
        if not np.array_equal(nan_a, nan_b):
            return False
        a, b = a[~nan_a], b[~nan_b]
    return a.tobytes() == b.tobytes()


def assert_bitwise_equal(actual, expected, what: str = "") -> None:
    """Raise AssertionError naming the first output (and element) whose bits differ."""
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} outputs, expected {len(expected)}")
    for i, (a, b) in enumerate(zip(actual, expected, strict=True)):
        if bitwise_equal(a, b):
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"{what}: output {i} is {a.dtype}{list(a.shape)}, expected {b.dtype}{list(b.shape)}")
        width = f"u{a.dtype.itemsize}" if a.dtype != np.bool_ else a.dtype
        mismatch = a.reshape(-1).view(width) != b.reshape(-1).view(width)
        nan_a = _nan_mask(a)
        if nan_a is not None:
            nan_a, nan_b = nan_a.reshape(-1), _nan_mask(b).reshape(-1)
            mismatch = (mismatch & ~(nan_a & nan_b)) | (nan_a != nan_b)
        differ = np.flatnonzero(mismatch)
        k = int(differ[0])
        raise AssertionError(
            f"{what}: output {i} differs bitwise at {len(differ)} of {a.size} elements; first at flat index {k}: "
            f"{a.reshape(-1)[k]!r} vs {b.reshape(-1)[k]!r}"
        )


def assert_equal_up_to_zero_sign(actual, expected, what: str = "") -> None:
    """Like :func:`assert_bitwise_equal`, except that -0.0 equals +0.0 and any NaN equals any
    NaN: the contract of passes that may change which zero a max/min of signed zeros returns."""
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} outputs, expected {len(expected)}")
    for i, (a, b) in enumerate(zip(actual, expected, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise AssertionError(f"{what}: output {i} is {a.dtype}{list(a.shape)}, expected {b.dtype}{list(b.shape)}")
        if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
            assert_bitwise_equal([a], [b], f"{what} (output {i})")
            continue
        wa, wb = a.astype(np.float64), b.astype(np.float64)
        same = (wa == wb) | (np.isnan(wa) & np.isnan(wb))
        if not same.all():
            k = int(np.flatnonzero(~same.reshape(-1))[0])
            raise AssertionError(
                f"{what}: output {i} differs at {int((~same).sum())} of {a.size} elements (zero signs and NaN "
                f"payloads aside); first at flat index {k}: {a.reshape(-1)[k]!r} vs {b.reshape(-1)[k]!r}"
            )
