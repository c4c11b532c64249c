"""Cumulative sums and products: cumsum and cumprod (inclusive prefix sums and products along
an axis). Their family is named "scan" (``OpDef.family``, ``hlotrace rules``, tests/mutants/scan.py).

Semantics (each op's reference below is the definition the lowering rules must match):

- ``cumsum(x, axis=None, dtype=None, reverse=False)``, ``cumprod(x, axis=None,
  reverse=False)``: ``out[i] = x[0] + ... + x[i]`` (``*`` for cumprod) along ``axis``;
  ``axis=None`` scans the flattened tensor (NumPy); ``reverse=True`` scans from the end
  (``out[i] = x[i] + ... + x[n-1]``, as ``jax.lax.cumsum(reverse=True)``).
- Result dtypes follow hlotrace's ``sum``: bool and int32 give **int32** (NumPy: int64),
  int64 gives int64, integers wrap on overflow; floats keep their dtype. cumsum's
  ``dtype=`` (int32, int64 or a float dtype) casts ``x`` to it first, as NumPy does; casting
  a float tensor to an integer ``dtype`` is refused (NumPy truncates; use ``astype``).
- float16 and bfloat16 accumulate in float32 and each output element is rounded once
  (NumPy accumulates in float16, rounding at every step).
- The first element is ``x[0]`` itself (the scan starts at -0.0 for sums and 1 for
  products), so a leading -0.0 stays -0.0, as in NumPy.

VJPs: cumsum's is the reverse cumsum of the cotangent. cumprod's is zero-safe: up to the
first zero of a scanned slice it is ``reverse_cumsum(ct * out) / x``; at the first zero it
is the reverse cumsum of ``ct`` times the products with that zero taken as 1; after it 0.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis
from hlotrace.ops.registry import Aval, OpDef, get_op, register_op

FAMILY = "scan"

__all__ = ["cumprod", "cumsum"]

_TARGETS = (dt.int32, dt.int64, *dt.FLOATING)  # admitted cumsum dtype= values

# The primary dtypes each property test is split by (every dtype is admitted); cumsum's
# dtype= draws bfloat16 and float64 results too.
SAMPLE_DTYPES = {
    "cumsum": (dt.bool_, dt.int32, dt.int64, dt.float16, dt.float32),
    "cumprod": (dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float32),
}


def result_dtype(dtype: np.dtype, target=None) -> np.dtype:
    """The result dtype of a scan of ``dtype`` (cast to ``target`` first, if given)."""
    if target is not None:
        return target
    if dtype in (dt.bool_, dt.int32):
        return dt.int32
    return dtype


def accumulation_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a scan with result ``dtype`` computes in: float32 for float16/bfloat16."""
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype


def _canonicalize(name):
    allowed = ("axis", "dtype", "reverse") if name == "cumsum" else ("axis", "reverse")

    def canonicalize(avals, attrs):
        unknown = set(attrs) - set(allowed)
        if unknown:
            raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({name} takes {', '.join(allowed)})")
        (x,) = avals
        axis = attrs.get("axis")
        if isinstance(axis, np.integer):
            axis = int(axis)
        reverse = attrs.get("reverse", False)
        if not isinstance(reverse, bool | np.bool_):
            raise ShapeDtypeError(f"reverse must be a bool, got {reverse!r}")
        out = {"axis": None if axis is None else normalize_axis(axis, len(x.shape)), "reverse": bool(reverse)}
        if name == "cumsum":
            target = attrs.get("dtype")
            if target is not None:
                target = dt.canonicalize(target)
                if target not in _TARGETS:
                    raise ShapeDtypeError(f"dtype must be int32, int64 or a float dtype, got {target}")
                if x.dtype in dt.FLOATING and target in dt.INTEGER:
                    raise ShapeDtypeError(f"cannot accumulate {x.dtype} in {target} (cast with astype first)")
            out["dtype"] = target
        return out

    return canonicalize


def _infer(x: Aval, *, axis, reverse, dtype=None) -> Aval:
    shape = (int(np.prod(x.shape)),) if axis is None else x.shape
    return Aval(shape, result_dtype(x.dtype, dtype))


def _reference(name):
    ufunc = np.add if name == "cumsum" else np.multiply

    def reference(x, *, axis, reverse, dtype=None):
        out = result_dtype(x.dtype, dtype)
        if axis is None:
            x, axis = x.reshape(-1), 0
        x = x.astype(out)
        # Integers accumulate in int64: its wraparound keeps the low 32 bits of int32 results.
        x = x.astype(np.int64 if out in dt.INTEGER else accumulation_dtype(out))
        if reverse:
            return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
        return ufunc.accumulate(x, axis=axis)

    return reference


def _cumsum_vjp(ct, out, x, *, axis, reverse, dtype=None):
    g = F.cumsum(ct, axis=0 if axis is None else axis, reverse=not reverse)
    return (F.reshape(g, x.shape) if axis is None else g,)


def _cumprod_vjp(ct, out, x, *, axis, reverse):
    shape, flattened = x.shape, axis is None
    if flattened:
        x, axis = F.reshape(x, (-1,)), 0

    def tail(t):  # sum over the outputs each element reaches
        return F.cumsum(t, axis=axis, reverse=not reverse)

    zero = F.equal(x, 0)
    zeros_so_far = F.cumsum(zero, axis=axis, reverse=reverse)
    before = F.equal(zeros_so_far, 0)  # no zero up to and including this element
    first = F.logical_and(zero, F.equal(zeros_so_far, 1))
    # Before the first zero: d out[i] / d x[k] = out[i] / x[k] (x[k] != 0).
    g_before = F.divide(tail(F.multiply(ct, out)), F.where(before, x, 1))
    # At the first zero: the products of the other elements, i.e. with that zero taken as 1.
    g_first = tail(F.multiply(ct, F.cumprod(F.where(first, 1, x), axis=axis, reverse=reverse)))
    g = F.where(before, g_before, F.where(first, g_first, 0))
    return (F.reshape(g, shape) if flattened else g,)


def _sample(name):
    def strategy(s):
        @s.st.composite
        def sample(draw):
            dtype = draw(s.dtypes(SAMPLE_DTYPES[name]))
            rng = s.generator(draw)
            attrs = {"reverse": bool(rng.random() < 0.5)}
            target = None
            if name == "cumsum" and rng.random() < 1 / 4:
                target = draw(s.st.sampled_from(dt.FLOATING if dtype in dt.FLOATING else _TARGETS))
                attrs["dtype"] = target
            elements = _elements(s, name, result_dtype(dtype, target), dtype)
            if rng.random() < 1 / 10:
                # Scans of 4096+ elements: where XLA may rewrite a reduce_window.
                length = int(rng.integers(4096, 4201))
                shape = (length,) if rng.random() < 0.5 else (int(rng.integers(1, 3)), length)
                if name == "cumprod" and dtype in dt.FLOATING:
                    # ±1 but at 1-4 planted values (NaN, inf, 0 among them): exact in any order.
                    x = rng.choice(np.array([1.0, -1.0]), shape)
                    planted = int(rng.integers(1, 5))
                    special = s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0, special_rate=1 / 2)
                    x.flat[rng.integers(0, x.size, planted)] = special.draw(rng, planted)
                    x = x.astype(dtype)
                else:
                    x = draw(s.long_arrays(dtype, shape, elements))
                attrs["axis"] = (None, -1, len(shape) - 1)[rng.integers(0, 3)] if len(shape) == 1 else -1
            else:
                shape = s.random_shape(rng)
                x = draw(s.arrays(dtype, shape, elements))
                if shape and rng.random() < 4 / 5:
                    attrs["axis"] = int(rng.integers(-len(shape), len(shape)))
                else:
                    attrs["axis"] = None
            if name == "cumprod" and dtype in dt.FLOATING and rng.random() < 1 / 4:
                x = np.where(rng.random(x.shape) < 1 / 4, 0.0, x).astype(dtype)  # zeros: cumprod's VJP
            return s.OpSample((x,), attrs)

        return sample()

    return strategy


def _elements(s, name, out, dtype):
    if dtype in dt.FLOATING and name == "cumsum":
        # Exact partial sums (multiples of 1/16): the summation order cannot matter.
        return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
    if dtype in dt.FLOATING:
        # Multiples of 1/4 up to 4 (4 significant bits): products of 5 stay exact in float32.
        return s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0, special_rate=1 / 16)
    if out in dt.FLOATING:
        return s.values(dtype, -1000, 1000)  # exact float32 sums even over 4200 elements
    return None  # integers: the whole range (wraparound)


_DOCS = {
    "cumsum": "inclusive prefix sum along axis (None: flattened); bool/int32 give int32; half in float32",
    "cumprod": "inclusive prefix product along axis (None: flattened); bool/int32 give int32; half in float32",
}

for _name, _vjp in (("cumsum", _cumsum_vjp), ("cumprod", _cumprod_vjp)):
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_reference(_name),
            infer=_infer,
            canonicalize=_canonicalize(_name),
            sample=_sample(_name),
            vjp=_vjp,
            doc=_DOCS[_name],
        )
    )


def cumsum(x, axis=None, dtype=None, reverse=False):
    """Inclusive prefix sums along ``axis`` (None: of the flattened tensor); ``dtype`` casts
    first; ``reverse`` sums from the end. bool/int32 give int32; half accumulates in float32."""
    return apply(get_op("cumsum"), x, axis=axis, dtype=dtype, reverse=reverse)


def cumprod(x, axis=None, reverse=False):
    """Inclusive prefix products along ``axis`` (None: of the flattened tensor); ``reverse``
    multiplies from the end. bool/int32 give int32; half accumulates in float32."""
    return apply(get_op("cumprod"), x, axis=axis, reverse=reverse)
