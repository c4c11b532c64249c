"""Lowering rules for hlotrace/ops/random.py.

Threefry-2x32 is written out in StableHLO on ``ui32`` (add, xor, and rotations as two
shifts and an or), exactly as the NumPy references compute it, so the bits, and the
uniform, randint and permutation results built from them, are bit for bit the eager ones.
The key (``int32[2]``) is bitcast to ``ui32``; floats are made from bits by bitcasts.
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.lowering.hlo as hlo
from hlotrace import dtypes as dt
from hlotrace.lowering.registry import rule
from hlotrace.ops.registry import Aval
from hlotrace.ops.threefry import (
    KEY_PARITY,
    MANTISSA_BITS,
    ROTATIONS,
    SPLIT_BITS,
    compute_dtype,
    is_unit_range,
    span_split,
    words_per_uniform,
)
from hlotrace.runtime.jaxlib_compat import ir, stablehlo


def _unsigned(bits: int) -> ir.Type:
    return ir.IntegerType.get_unsigned(bits)


def _type(shape, element: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element)


def _uconst(value: int, shape, bits: int = 32) -> ir.Value:
    """A splat ``ui<bits>`` constant (IntegerAttr takes the two's complement of values
    from 2**(bits-1) on)."""
    element = _unsigned(bits)
    signed = value - 2**bits if value >= 2 ** (bits - 1) else value
    attr = ir.DenseElementsAttr.get_splat(_type(shape, element), ir.IntegerAttr.get(element, signed))
    return stablehlo.ConstantOp(attr).result


def _reshape(value, result_type):
    return stablehlo.ReshapeOp(result_type, value).result


def _add(a, b):
    return stablehlo.AddOp(a, b).result


def _shape_of(value) -> tuple:
    return tuple(ir.RankedTensorType(value.type).shape)


def _rotl(x, r: int, shape):
    left = stablehlo.ShiftLeftOp(x, _uconst(r, shape)).result
    right = stablehlo.ShiftRightLogicalOp(x, _uconst(32 - r, shape)).result
    return stablehlo.OrOp(left, right).result


def threefry2x32(key_u32, c0, c1):
    """Threefry-2x32 (20 rounds) of the ui32 counter words ``c0, c1`` (same 1-D shape)
    under ``key_u32`` (ui32[2]); returns the two ui32 output words."""
    shape = _shape_of(c0)

    def word(i):
        scalar = stablehlo.SliceOp(key_u32, [i], [i + 1], [1]).result
        return hlo.broadcast_in_dim(scalar, shape, [0])

    k0, k1 = word(0), word(1)
    ks = (k0, k1, stablehlo.XorOp(stablehlo.XorOp(k0, k1).result, _uconst(KEY_PARITY, shape)).result)
    x0, x1 = _add(c0, ks[0]), _add(c1, ks[1])
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = _add(x0, x1)
            x1 = stablehlo.XorOp(_rotl(x1, r, shape), x0).result
        x0 = _add(x0, ks[(i + 1) % 3])
        x1 = _add(_add(x1, ks[(i + 2) % 3]), _uconst(i + 1, shape))
    return x0, x1


def _key_u32(key):
    return stablehlo.BitcastConvertOp(_type((2,), _unsigned(32)), key).result


def random_bits(key, count: int):
    """``count`` ui32 words (count > 0): block i = threefry2x32(key, (i, 0)) gives words 2i, 2i+1."""
    blocks = -(-count // 2)
    counter = stablehlo.IotaOp(_type((blocks,), _unsigned(32)), 0).result
    x0, x1 = threefry2x32(_key_u32(key), counter, _uconst(0, (blocks,)))
    pairs = [_reshape(x, _type((blocks, 1), _unsigned(32))) for x in (x0, x1)]
    words = _reshape(stablehlo.ConcatenateOp(pairs, 1).result, _type((2 * blocks,), _unsigned(32)))
    if 2 * blocks != count:
        words = stablehlo.SliceOp(words, [0], [count], [1]).result
    return words


def _rows(key, rows: int, n: int):
    """``bits(key, rows * n)`` as ``rows`` ui32[n] values."""
    words = random_bits(key, rows * n)
    return [stablehlo.SliceOp(words, [j * n], [(j + 1) * n], [1]).result for j in range(rows)]


def _u64(word, n):
    return stablehlo.ConvertOp(_type((n,), _unsigned(64)), word).result


def _join64(hi, lo, n):
    """The ui64 words ``hi << 32 | lo``."""
    high = stablehlo.ShiftLeftOp(_u64(hi, n), _uconst(32, (n,), 64)).result
    return stablehlo.OrOp(high, _u64(lo, n)).result


def _float_from_mantissa(m, wide, n):
    """``m`` (mantissa-field bits) | the bits of 1.0, as a float of ``wide``, minus 1."""
    bits = 64 if wide == dt.float64 else 32
    one = 0x3FF0000000000000 if wide == dt.float64 else 0x3F800000
    value = stablehlo.BitcastConvertOp(hlo.tensor_type((n,), wide), stablehlo.OrOp(m, _uconst(one, (n,), bits)).result)
    return stablehlo.SubtractOp(value.result, hlo.constant(1, wide, (n,))).result


def _uniform_parts(words, dtype, p: int, n: int) -> list:
    """[0, 1) from the top ``p`` bits of ``words``: ``[u]`` in float32, or ``[u_hi, u_lo]``
    in float64 (the top and low 26 of the 52 mantissa bits)."""
    wide = compute_dtype(dtype)
    if wide == dt.float64:
        w = _join64(words[0], words[1], n)
        m = stablehlo.ShiftRightLogicalOp(w, _uconst(64 - p, (n,), 64)).result
        m = stablehlo.ShiftLeftOp(m, _uconst(52 - p, (n,), 64)).result
        split = _uconst(SPLIT_BITS, (n,), 64)
        hi = stablehlo.ShiftLeftOp(stablehlo.ShiftRightLogicalOp(m, split).result, split).result
        lo = stablehlo.AndOp(m, _uconst(2**SPLIT_BITS - 1, (n,), 64)).result
        return [_float_from_mantissa(hi, wide, n), _float_from_mantissa(lo, wide, n)]
    m = stablehlo.ShiftRightLogicalOp(words[0], _uconst(32 - p, (n,))).result
    m = stablehlo.ShiftLeftOp(m, _uconst(23 - p, (n,))).result
    return [_float_from_mantissa(m, wide, n)]


def _uniform_bits(words, dtype, p: int, n: int):
    parts = _uniform_parts(words, dtype, p, n)
    return parts[0] if len(parts) == 1 else stablehlo.AddOp(*parts).result


def _empty(ctx):
    out = ctx.out_aval
    return hlo.constant(np.zeros(out.shape, out.dtype), out.dtype, out.shape)


@rule("random_split")
def _random_split(ctx, key):
    x0, x1 = threefry2x32(_key_u32(key), _uconst(0, (1,)), _uconst(1, (1,)))
    return stablehlo.BitcastConvertOp(
        hlo.tensor_type((2,), dt.int32), stablehlo.ConcatenateOp([x0, x1], 0).result
    ).result


def _mul(a, b):
    return stablehlo.MulOp(a, b).result


@rule("random_uniform")
def _random_uniform(ctx, key, *, shape, dtype, low, high):
    n = math.prod(shape)
    if n == 0:
        return _empty(ctx)
    wide = compute_dtype(dtype)
    parts = _uniform_parts(_rows(key, words_per_uniform(dtype), n), dtype, MANTISSA_BITS[dtype], n)
    if is_unit_range(low, high):
        value = parts[0] if len(parts) == 1 else stablehlo.AddOp(*parts).result
        return hlo.reshape(hlo.convert(value, Aval((n,), wide), dtype), shape, dtype)

    def f64(x):
        return hlo.constant(x, dt.float64, (n,))

    if len(parts) == 1:  # span * u is exact in float64 (24 + 23 bits)
        span = np.float32(high) - np.float32(low)
        u = hlo.convert(parts[0], Aval((n,), dt.float32), dt.float64)
        value = _add(f64(low), _mul(f64(span), u))
    else:  # four exact partial products, summed in the reference's order
        (s_hi, s_lo), (u_hi, u_lo) = span_split(low, high), parts
        middle = _add(_add(_mul(f64(s_hi), u_lo), _mul(f64(s_lo), u_hi)), _mul(f64(s_lo), u_lo))
        value = _add(f64(low), _add(_mul(f64(s_hi), u_hi), middle))
    value = hlo.select(hlo.compare(value, f64(high), "GT", dt.float64), f64(high), value)
    value = hlo.convert(value, Aval((n,), dt.float64), wide)
    return hlo.reshape(hlo.convert(value, Aval((n,), wide), dtype), shape, dtype)


@rule("random_normal")
def _random_normal(ctx, key, *, shape, dtype, mean, std):
    n = math.prod(shape)
    if n == 0:
        return _empty(ctx)
    wide = compute_dtype(dtype)
    k = words_per_uniform(dtype)
    rows = _rows(key, 2 * k, n)
    p = MANTISSA_BITS[wide]
    u1 = stablehlo.SubtractOp(hlo.constant(1, wide, (n,)), _uniform_bits(rows[:k], dtype, p, n)).result
    u2 = _uniform_bits(rows[k:], dtype, p, n)
    radius = stablehlo.SqrtOp(stablehlo.MulOp(hlo.constant(-2, wide, (n,)), stablehlo.LogOp(u1).result).result).result
    angle = stablehlo.MulOp(hlo.constant(2 * np.pi, wide, (n,)), u2).result
    z = stablehlo.MulOp(radius, stablehlo.CosineOp(angle).result).result
    value = stablehlo.AddOp(hlo.constant(mean, wide, (n,)), stablehlo.MulOp(hlo.constant(std, wide, (n,)), z).result)
    return hlo.reshape(hlo.convert(value.result, Aval((n,), wide), dtype), shape, dtype)


@rule("random_randint")
def _random_randint(ctx, key, *, shape, low, high, dtype):
    n = math.prod(shape)
    if n == 0:
        return _empty(ctx)
    hi, lo = _rows(key, 2, n)
    b = _join64(hi, lo, n)
    span = high - low
    r = b if span == 2**64 else stablehlo.RemOp(b, _uconst(span, (n,), 64)).result
    value = stablehlo.AddOp(_uconst(low % 2**64, (n,), 64), r).result
    signed = stablehlo.BitcastConvertOp(hlo.tensor_type((n,), dt.int64), value).result
    return hlo.reshape(hlo.convert(signed, Aval((n,), dt.int64), dtype), shape, dtype)


@rule("random_permutation")
def _random_permutation(ctx, key, *, n, dtype):
    if n == 0:
        return _empty(ctx)
    bits = random_bits(key, n)
    index = stablehlo.IotaOp(hlo.tensor_type((n,), dtype), 0).result
    op = stablehlo.SortOp(
        [_type((n,), _unsigned(32)), hlo.tensor_type((n,), dtype)], [bits, index], dimension=0, is_stable=True
    )
    scalar_u32, scalar_index = _type((), _unsigned(32)), hlo.tensor_type((), dtype)
    block = op.comparator.blocks.append(scalar_u32, scalar_u32, scalar_index, scalar_index)
    with ir.InsertionPoint(block):
        a, b = block.arguments[0], block.arguments[1]
        less = stablehlo.CompareOp(
            a,
            b,
            stablehlo.ComparisonDirectionAttr.get("LT"),
            compare_type=stablehlo.ComparisonTypeAttr.get("UNSIGNED"),
        ).result
        stablehlo.ReturnOp([less])
    return op.results[1]
