"""More reductions: any, all, prod, var, logsumexp (primitives) and std (a composite),
over ``axis`` (int, tuple or None = all) with ``keepdims``, like :mod:`.reduction`'s.
Registered through :mod:`hlotrace.ops.reduction` (which imports this module); the public
functions reach ``hlotrace.functional`` through :mod:`hlotrace.ops.scan`'s ``__all__``.

Semantics (each op's reference below is the definition the lowering rules must match):

- ``any``/``all``: bool results for every input dtype; an element counts as true when it
  is ``!= 0`` (NaN is true, -0.0 false), as NumPy. Over nothing: False / True.
- ``prod``: dtypes as hlotrace's ``sum``: bool and int32 give **int32** (NumPy: int64),
  int64 int64, integers wrap on overflow; floats keep their dtype, float16/bfloat16
  multiply in float32 and round once (NumPy multiplies in float16). Over nothing: 1.
- ``var(x, axis=None, ddof=0, keepdims=False)``: ``sum((x - mean)**2) / max(n - ddof, 0)``
  computed in two passes (the mean first, so large offsets do not cancel), in float32 for
  bool/int32/float16/bfloat16 (results: float32 for bool/int32, as ``mean``; NumPy:
  float64) and float64 for int64/float64. ``n - ddof <= 0`` gives inf (NaN where the
  squared deviations sum to 0, so over nothing NaN), as NumPy, without its warning.
  ``ddof`` is a non-negative int.
- ``std(x, axis=None, ddof=0, keepdims=False)``: the composite ``sqrt(var(...))`` (float16
  and bfloat16 results are therefore rounded twice). Its gradient is NaN where the spread
  is 0 (as PyTorch's and JAX's).
- ``logsumexp(x, axis=None, keepdims=False)``: ``m + log(sum(exp(x - m)))`` with ``m`` the
  slice's maximum (0 where that is not finite), in float32 for float16/bfloat16. A slice
  holding NaN gives NaN; one holding +inf (and no NaN) +inf; one of nothing but -inf, or
  an empty slice, -inf (scipy's ``logsumexp``; PyTorch gives NaN over nothing). Float
  tensors only.

VJPs: prod's is zero-safe without division (each element gets the product of the others,
from exclusive prefix and suffix products); var's is ``2 (x - mean) / (n - ddof)``;
logsumexp's is ``exp(x - out)`` (softmax), 0 over slices of nothing but -inf. any and all
are not differentiable.
"""

from __future__ import annotations

import math

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axes
from hlotrace.ops.reduction import accumulation_dtype, reduced_shape
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, get_op, register_op

FAMILY = "reduction"

__all__ = ["all", "any", "logsumexp", "prod", "std", "var"]

# The primary dtypes each op's property test is split by (every dtype the op admits is
# accepted): the kinds and accumulation paths each op has, without repeating the ones
# whose rules differ only in element types, to keep the generated tests' time down.
SAMPLE_DTYPES = {
    "any": (dt.bool_, dt.int32, dt.float16, dt.float32),
    "all": (dt.bool_, dt.int32, dt.float16, dt.float32),
    "prod": (dt.bool_, dt.int32, dt.int64, dt.float16, dt.bfloat16, dt.float32),
    "var": (dt.bool_, dt.int32, dt.float16, dt.float32, dt.float64),
    "logsumexp": dt.FLOATING,
}


def _canonicalize(name):
    allowed = ("axis", "ddof", "keepdims") if name == "var" else ("axis", "keepdims")

    def canonicalize(avals, attrs):
        unknown = set(attrs) - set(allowed)
        if unknown:
            raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({name} takes {', '.join(allowed)})")
        return _canonical(avals, attrs, name == "var")

    return canonicalize


def _canonical(avals, attrs, with_ddof):
    """``axis`` as a sorted tuple of non-negative ints, ``keepdims`` a bool (var: ``ddof``)."""
    keepdims = attrs.get("keepdims", False)
    if not isinstance(keepdims, bool | np.bool_):
        raise ShapeDtypeError(f"keepdims must be a bool, got {keepdims!r}")
    axis = attrs.get("axis")
    if isinstance(axis, np.integer):
        axis = int(axis)
    out = {"axis": normalize_axes(axis, len(avals[0].shape)), "keepdims": bool(keepdims)}
    if with_ddof:
        ddof = attrs.get("ddof", 0)
        if isinstance(ddof, bool | np.bool_) or not isinstance(ddof, int | np.integer) or ddof < 0:
            raise ShapeDtypeError(f"ddof must be a non-negative int, got {ddof!r}")
        out["ddof"] = int(ddof)
    return out


def result_dtype(name: str, dtype: np.dtype) -> np.dtype:
    if name in ("any", "all"):
        return dt.bool_
    if dtype in dt.FLOATING:
        return dtype
    if name == "prod":
        return dt.int64 if dtype == dt.int64 else dt.int32
    return dt.true_divide_dtype(dtype)  # var


def compute_dtype(name: str, dtype: np.dtype) -> np.dtype:
    """The dtype ``name`` computes in (shared with the lowering rules)."""
    if name == "prod":
        return accumulation_dtype("sum", dtype)
    if name == "var":
        return accumulation_dtype("mean", dtype)
    return dt.promote_strong(dtype, dt.float32)  # logsumexp


def _infer(name):
    def infer(x: Aval, *, axis, keepdims, ddof=None) -> Aval:
        if name == "logsumexp" and x.dtype not in dt.FLOATING:
            raise ShapeDtypeError(f"defined for float tensors only, got {x.dtype}")
        return Aval(reduced_shape(x.shape, axis, keepdims), result_dtype(name, x.dtype))

    return infer


def _any_reference(x, *, axis, keepdims):
    return np.any(x != 0, axis=axis, keepdims=keepdims)


def _all_reference(x, *, axis, keepdims):
    return np.all(x != 0, axis=axis, keepdims=keepdims)


def _prod_reference(x, *, axis, keepdims):
    # Integers multiply in int64: its wraparound keeps the low 32 bits of int32 products.
    acc = np.int64 if x.dtype in (dt.bool_, dt.int32, dt.int64) else compute_dtype("prod", x.dtype)
    return np.prod(x.astype(acc), axis=axis, keepdims=keepdims)


def _var_reference(x, *, axis, ddof, keepdims):
    acc = compute_dtype("var", x.dtype)
    x = x.astype(acc)
    count = math.prod(x.shape[a] for a in axis)
    mean = np.sum(x, axis=axis, keepdims=True) / acc.type(count)
    deviation = x - mean
    total = np.sum(deviation * deviation, axis=axis, keepdims=keepdims)
    return total / acc.type(max(count - ddof, 0))


def _logsumexp_reference(x, *, axis, keepdims):
    x = x.astype(compute_dtype("logsumexp", x.dtype))
    peak = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, np.zeros((), x.dtype))
    total = np.sum(np.exp(x - peak), axis=axis, keepdims=True)
    out = np.log(total) + peak
    return out if keepdims else np.squeeze(out, axis=axis)


# -- VJPs -----------------------------------------------------------------------------------


def _spread(ct, x, axis, keepdims):
    """ct (the reduction's cotangent) broadcast back over the reduced dims of x."""
    if not keepdims:
        ct = F.reshape(ct, reduced_shape(x.shape, axis, True))
    return F.broadcast_to(ct, x.shape)


def _prod_vjp(ct, out, x, *, axis, keepdims):
    if not axis:
        return (ct,)
    if 0 in x.shape:
        return (F.zeros_like(x),)
    # Reduced dims last and flattened into one of length m: (*kept, m).
    kept = [d for d in range(len(x.shape)) if d not in axis]
    perm = kept + list(axis)
    lead = tuple(x.shape[d] for d in kept)
    m = math.prod(x.shape[a] for a in axis)
    flat = F.reshape(F.transpose(x, perm), (*lead, m))
    last = len(lead)
    one = F.ones((*lead, 1), x.dtype)
    head = (slice(None),) * last
    # The product of the others = (product of those before) * (product of those after).
    before = F.concat([one, F.getitem(F.cumprod(flat, axis=last), (*head, slice(0, m - 1)))], axis=last)
    after = F.concat([F.getitem(F.cumprod(flat, axis=last, reverse=True), (*head, slice(1, m))), one], axis=last)
    g = F.multiply(F.multiply(before, after), F.reshape(ct, (*lead, 1)))
    g = F.reshape(g, tuple(x.shape[d] for d in perm))
    return (F.transpose(g, tuple(int(i) for i in np.argsort(perm))),)


def _var_vjp(ct, out, x, *, axis, ddof, keepdims):
    count = math.prod(x.shape[a] for a in axis)
    deviation = F.subtract(x, F.mean(x, axis=axis, keepdims=True))
    half_denominator = max(count - ddof, 0) / 2  # 0 gives inf/NaN, as var itself does
    return (F.divide(F.multiply(_spread(ct, x, axis, keepdims), deviation), float(half_denominator)),)


def _logsumexp_vjp(ct, out, x, *, axis, keepdims):
    # exp(x - out) is the softmax of the slice; over nothing but -inf, 0 (not exp(NaN)).
    out = F.where(F.equal(out, float("-inf")), 0.0, out)
    return (F.multiply(_spread(ct, x, axis, keepdims), F.exp(F.subtract(x, _spread(out, x, axis, keepdims)))),)


# -- samples --------------------------------------------------------------------------------


def _elements(s, name, dtype, rng):
    if name in ("any", "all"):
        if dtype == dt.bool_ or rng.random() < 1 / 2:
            return None  # the default values: mostly non-zero, specials and boundaries
        return s.values(dtype, -1, 1, grid_bits=0 if dtype in dt.FLOATING else None)  # many zeros
    if name == "prod":
        # Multiples of 1/4 up to 4 (4 significant bits): products stay exact in any order.
        return s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0) if dtype in dt.FLOATING else None
    if name == "var":
        if dtype in dt.FLOATING:  # exact sums (multiples of 1/16), as sum's samples
            return s.values(dtype, grid_bits=4, boundary_rate=0.0, special_rate=1 / 16)
        return s.values(dtype, -1000, 1000) if dtype in dt.INTEGER else None
    if rng.random() < 1 / 4:  # logsumexp: slices where no element dominates
        return s.values(dtype, -2.0, 2.0, special_rate=1 / 32)
    return s.values(dtype, special_rate=1 / 16)


def _long(s, draw, rng, name, dtype, elements):
    shape = (int(rng.integers(4096, 4201)),)
    if rng.random() < 1 / 2:
        shape = (int(rng.integers(1, 3)), *shape)
    axis = (None, -1, len(shape) - 1, tuple(range(len(shape))))[rng.integers(0, 4)]
    if name == "prod" and dtype in dt.FLOATING:
        # ±1 but at 1-4 planted values (NaN, inf, 0 among them): exact in any order.
        x = rng.choice(np.array([1.0, -1.0]), shape)
        planted = int(rng.integers(1, 5))
        special = s.values(dtype, -4.0, 4.0, grid_bits=2, boundary_rate=0.0, special_rate=1 / 2)
        x.flat[rng.integers(0, x.size, planted)] = special.draw(rng, planted)
        return x.astype(dtype), axis
    return draw(s.long_arrays(dtype, shape, elements)), axis


def _offset(rng, name, dtype, x):
    """Slices far from 0: var's one-pass formula cancels there, logsumexp's exp overflows."""
    if name == "var" and dtype in (dt.float32, dt.float64):
        offset = float(rng.choice([1e3, -1e3] if dtype == dt.float32 else [1e3, 1e6, -1e9]))
    elif name == "logsumexp":
        magnitudes = (100.0, 1e4) if dtype.itemsize == 2 else (100.0, 1e4, 1e30)
        offset = float(rng.choice([-1.0, 1.0])) * float(rng.choice(magnitudes))
    else:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        return (x.astype(np.float64) + offset).astype(dtype)


def _sample(name):
    def strategy(s):
        @s.st.composite
        def sample(draw):
            dtype = draw(s.dtypes(SAMPLE_DTYPES[name]))
            rng = s.generator(draw)
            elements = _elements(s, name, dtype, rng)
            if rng.random() < 1 / 8:
                x, axis = _long(s, draw, rng, name, dtype, elements)
            elif name == "prod" and dtype in (dt.float16, dt.bfloat16) and rng.random() < 1 / 4:
                # 64-128 factors 1 + k/64: rounding each step to the half dtype drifts by
                # several ulp from float32's product rounded once.
                shape = (int(rng.integers(1, 5)), int(rng.integers(64, 129)))
                x = (1 + rng.integers(-16, 17, shape) / 64).astype(dtype)
                axis = (None, -1, 1)[rng.integers(0, 3)]
            else:
                shape = s.random_shape(rng)
                axis = draw(s.axis_choice(len(shape)))
                x = draw(s.arrays(dtype, shape, elements))
                if name == "prod" and dtype in dt.FLOATING and rng.random() < 1 / 4:
                    x = np.where(rng.random(x.shape) < 1 / 4, 0.0, x).astype(dtype)  # zeros: the VJP
                if rng.random() < 1 / 6:
                    x = _offset(rng, name, dtype, x)
            attrs = {"axis": axis, "keepdims": bool(rng.random() < 0.5)}
            if name == "var":
                pick = rng.random()
                attrs["ddof"] = 0 if pick < 1 / 2 else 1 if pick < 3 / 4 else int(rng.integers(2, 7))
            return s.OpSample((x,), attrs)

        return sample()

    return strategy


_OPS = {
    "any": (_any_reference, NOT_DIFFERENTIABLE, "whether any element along axis is != 0 (NaN counts); bool"),
    "all": (_all_reference, NOT_DIFFERENTIABLE, "whether every element along axis is != 0 (NaN counts); bool"),
    "prod": (
        _prod_reference,
        _prod_vjp,
        "product over axis; bool/int32 give int32, int64 int64 (wrapping); float16/bfloat16 in float32; empty: 1",
    ),
    "var": (
        _var_reference,
        _var_vjp,
        "variance sum((x - mean)**2) / (n - ddof), two-pass; dtypes as mean; n <= ddof gives inf/NaN",
    ),
    "logsumexp": (
        _logsumexp_reference,
        _logsumexp_vjp,
        "log(sum(exp(x))) over axis, max-shifted; NaN -> NaN, +inf -> inf, all -inf or empty -> -inf; floats",
    ),
}

for _name, (_reference, _vjp, _doc) in _OPS.items():
    register_op(
        OpDef(
            name=_name,
            family=FAMILY,
            reference=_reference,
            infer=_infer(_name),
            canonicalize=_canonicalize(_name),
            sample=_sample(_name),
            vjp=_vjp,
            doc=_doc,
        )
    )


def any(x, axis=None, keepdims=False):  # noqa: A001  (the op's name)
    """Whether any element along ``axis`` is non-zero (NaN counts); bool."""
    return apply(get_op("any"), x, axis=axis, keepdims=keepdims)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element along ``axis`` is non-zero (NaN counts); bool."""
    return apply(get_op("all"), x, axis=axis, keepdims=keepdims)


def prod(x, axis=None, keepdims=False):
    """Product over ``axis``; bool/int32 give int32, int64 int64; 1 over nothing."""
    return apply(get_op("prod"), x, axis=axis, keepdims=keepdims)


def var(x, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (two-pass; bool/int32
    give float32, int64 float64)."""
    return apply(get_op("var"), x, axis=axis, ddof=ddof, keepdims=keepdims)


def std(x, axis=None, ddof=0, keepdims=False):
    """Standard deviation: ``sqrt(var(x, axis, ddof, keepdims))`` (a composite)."""
    return F.sqrt(var(x, axis=axis, ddof=ddof, keepdims=keepdims))


def logsumexp(x, axis=None, keepdims=False):
    """``log(sum(exp(x)))`` over ``axis``, stable (max-shifted); float tensors."""
    return apply(get_op("logsumexp"), x, axis=axis, keepdims=keepdims)
