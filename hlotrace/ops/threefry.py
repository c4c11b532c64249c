"""The NumPy side of hlotrace's counter-based random bits (:mod:`hlotrace.ops.random` has the
contract): Threefry-2x32, uint32 words per key, and uniforms made exactly from their top
bits. The lowering rules (hlotrace/lowering/rules/random.py) build the same in StableHLO
from these constants.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
KEY_PARITY = 0x1BD11BDA
MANTISSA_BITS = {dt.float16: 10, dt.bfloat16: 7, dt.float32: 23, dt.float64: 52}
SPLIT_BITS = 26  # float64 uniforms and spans are split in halves: exact products


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float32, or float64 for float64: what uniform and normal compute in."""
    return dt.float64 if dtype == dt.float64 else dt.float32


def words_per_uniform(dtype: np.dtype) -> int:
    """uint32 words one uniform of the compute dtype takes (1, or 2 for float64)."""
    return 2 if compute_dtype(dtype) == dt.float64 else 1


# -- the NumPy Threefry-2x32 -------------------------------------------------------------


def _rotl(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(key, c0, c1):
    """Threefry-2x32 (20 rounds) of the counter words ``c0, c1`` (uint32 arrays) under
    ``key`` (uint32[2]); returns the two uint32 output words."""
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(KEY_PARITY))
    x0, x1 = c0 + ks[0], c1 + ks[1]
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def random_bits(key, count: int) -> np.ndarray:
    """``count`` uint32 words: block i = threefry2x32(key, (i, 0)) gives words 2i, 2i+1."""
    blocks = -(-count // 2)
    with np.errstate(over="ignore"):
        x0, x1 = threefry2x32(
            np.ascontiguousarray(key).view(np.uint32), np.arange(blocks, dtype=np.uint32), np.zeros(blocks, np.uint32)
        )
    return np.stack([x0, x1], axis=1).reshape(-1)[:count]


def _rows(key, rows: int, n: int) -> np.ndarray:
    return random_bits(key, rows * n).reshape(rows, n)


def _uniform_parts(words, dtype: np.dtype, p: int) -> list:
    """[0, 1) from the top ``p`` bits of ``words`` (1 or 2 rows): ``[u]`` in float32, or for
    float64 ``[u_hi, u_lo]`` (the top and low 26 of the 52 mantissa bits; u = u_hi + u_lo)."""
    if compute_dtype(dtype) == dt.float64:
        w = (words[0].astype(np.uint64) << np.uint64(32)) | words[1].astype(np.uint64)
        m = (w >> np.uint64(64 - p)) << np.uint64(52 - p)
        one = np.uint64(0x3FF0000000000000)
        hi = ((m >> np.uint64(SPLIT_BITS)) << np.uint64(SPLIT_BITS)) | one
        lo = (m & np.uint64(2**SPLIT_BITS - 1)) | one
        return [hi.view(np.float64) - 1.0, lo.view(np.float64) - 1.0]
    m = ((words[0] >> np.uint32(32 - p)) << np.uint32(23 - p)) | np.uint32(0x3F800000)
    return [m.view(np.float32) - np.float32(1.0)]


def _uniform_bits(words, dtype: np.dtype, p: int) -> np.ndarray:
    """[0, 1) in ``compute_dtype(dtype)`` (u_hi + u_lo is exact for float64)."""
    return sum(_uniform_parts(words, dtype, p))


def span_split(low: float, high: float) -> tuple[float, float]:
    """``high - low`` in float64 as ``hi + lo``: hi its top 26 significant bits, lo the rest."""
    span = np.float64(high) - np.float64(low)
    hi = (np.asarray(span).view(np.uint64) & ~np.uint64(2 ** (SPLIT_BITS + 1) - 1)).view(np.float64)
    return float(hi), float(span - hi)


def is_unit_range(low: float, high: float) -> bool:
    return low == 0 and high == 1
