"""Neural-network primitives: relu, sigmoid, log_softmax, one_hot, clip.

Semantics (each op's reference below is the definition the lowering rules must match):

- ``relu(x)``: ``x`` where ``x > 0``, NaN where ``x`` is NaN, else ``+0`` (so ``relu(-0.0)``
  is ``+0.0``, as ``jax.nn.relu``; NumPy's ``maximum(x, 0)`` returns either zero there).
  Integer and float tensors.
- ``sigmoid(x)``: ``1 / (1 + exp(-x))``, computed stably (``exp(x) / (1 + exp(x))`` for
  ``x < 0``), so no overflow warning or NaN for large ``|x|``; NaN propagates. float16 and
  bfloat16 are computed in float32 and rounded once (float64 in float64). Float tensors only.
- ``log_softmax(x, axis)``: ``x - m - log(sum(exp(x - m)))`` along ``axis`` with ``m`` the
  maximum of the slice, computed in float32 for float16/bfloat16. A slice holding NaN or
  +inf, or made only of -inf, is all NaN; a -inf entry of an otherwise finite slice gives
  -inf. Float tensors of rank >= 1 only; ``axis`` is stored non-negative.
- ``one_hot(labels, num_classes, dtype)``: ``labels[..., None] == arange(num_classes)`` as
  ``dtype``. A label outside ``[0, num_classes)`` gives an all-zero row
  (as ``jax.nn.one_hot``; PyTorch raises). Labels of any integer dtype.
- ``clip(x, min, max)``: scalar bounds (Python numbers, either may be None, not both; not
  NaN). ``y = min where x < min else x``, then ``max where y > max else y``: NaN in ``x``
  propagates, ``min > max`` gives ``max`` everywhere (NumPy's ``clip``), and a signed zero
  equal to a bound is kept as it is. The result dtype is that of ``x`` promoted with the
  bounds as weak Python scalars (an int32 tensor clipped at 0.5 gives float32); bounds are
  stored rounded to the result dtype. Integer and float tensors. The gradient passes where
  ``min <= x <= max`` (PyTorch's convention at the bounds), and nowhere when
  ``min >= max`` (the result is then the constant ``max``; PyTorch passes it at x == min == max).

VJPs follow :mod:`hlotrace.autodiff`; one_hot is not differentiable.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dtypes import compute_dtype
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.common import F, normalize_axis
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, Aval, OpDef, register_op

FAMILY = "nn"

NUMERIC_DTYPES = (*dt.INTEGER, *dt.FLOATING)  # relu and clip


def _no_attrs():
    def canonicalize(avals, attrs):
        if attrs:
            raise ShapeDtypeError(f"takes no attributes, got {sorted(attrs)}")
        return {}

    return canonicalize


def _dtype_infer(admitted, what):
    def infer(x: Aval, **attrs) -> Aval:
        if x.dtype not in admitted:
            raise ShapeDtypeError(f"defined for {what} tensors only, got {x.dtype}")
        return x

    return infer


# -- relu ---------------------------------------------------------------------------------


def _relu_reference(x):
    keep = (x > 0) | np.isnan(x) if x.dtype in dt.FLOATING else x > 0
    return np.where(keep, x, np.zeros((), x.dtype))


def _relu_vjp(ct, out, x):
    return (F.where(F.greater(x, 0), ct, 0),)


register_op(
    OpDef(
        name="relu",
        family=FAMILY,
        reference=_relu_reference,
        infer=_dtype_infer(NUMERIC_DTYPES, "integer and float"),
        canonicalize=_no_attrs(),
        sample=lambda s: s.elementwise(1, s.NUMERIC),
        vjp=_relu_vjp,
        doc="max(x, 0): NaN propagates, relu(-0.0) is +0.0; integers and floats",
    )
)


# -- sigmoid ------------------------------------------------------------------------------


def _sigmoid_reference(x):
    x = x.astype(compute_dtype(x.dtype))
    e = np.exp(-np.abs(x))  # in (0, 1]: never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _sigmoid_vjp(ct, out, x):
    return (ct * out * (1 - out),)


def _sigmoid_sample(s):
    # The default values (every boundary value, ±inf, NaN, ±0.0) and moderately large
    # magnitudes, where 1 + exp(-x) overflows or the result rounds to 0 or 1.
    return s.st.one_of(s.elementwise(1, s.FLOATS), s.elementwise(1, s.FLOATS, ranges=lambda dtype: (-40.0, 40.0)))


register_op(
    OpDef(
        name="sigmoid",
        family=FAMILY,
        reference=_sigmoid_reference,
        infer=_dtype_infer(dt.FLOATING, "float"),
        canonicalize=_no_attrs(),
        sample=_sigmoid_sample,
        vjp=_sigmoid_vjp,
        doc="1 / (1 + exp(-x)), stable for large |x|; float16/bfloat16 computed in float32",
    )
)


# -- log_softmax --------------------------------------------------------------------------


def _log_softmax_canonicalize(avals, attrs):
    unknown = set(attrs) - {"axis"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (log_softmax takes axis=)")
    rank = len(avals[0].shape)
    if rank == 0:
        raise ShapeDtypeError("needs a tensor of rank >= 1 (it normalizes along an axis)")
    axis = attrs.get("axis", -1)
    if isinstance(axis, np.integer):
        axis = int(axis)
    return {"axis": normalize_axis(axis, rank)}


def _log_softmax_reference(x, *, axis):
    x = x.astype(compute_dtype(x.dtype))
    if x.size == 0:
        return x
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _log_softmax_vjp(ct, out, x, *, axis):
    return (ct - F.exp(out) * F.sum(ct, axis=axis, keepdims=True),)


def _log_softmax_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.FLOATS))
        rng = s.generator(draw)
        elements = s.values(dtype, special_rate=1 / 16)
        if rng.random() < 1 / 8:
            # Slices of 4096+ elements: XLA:CPU's vectorized max skips NaN (see reduction.py).
            length = int(rng.integers(4096, 4201))
            shape = (length,) if rng.random() < 0.5 else (int(rng.integers(1, 3)), length)
            x = draw(s.long_arrays(dtype, shape, elements))
            axis = len(shape) - 1 if rng.random() < 0.5 else -1
        else:
            shape = s.random_shape(rng)
            if not shape:
                shape = (int(rng.integers(1, 6)),)
            axis = int(rng.integers(-len(shape), len(shape)))
            if rng.random() < 1 / 4:
                # Logits in a narrow range: slices where no element dominates.
                elements = s.values(dtype, -2.0, 2.0, special_rate=1 / 32)
            x = draw(s.arrays(dtype, shape, elements))
            if rng.random() < 1 / 6:
                # Logits far from 0, all large and negative or positive: exp(x) alone would
                # underflow or overflow; only the shift by the slice's max keeps them finite.
                magnitudes = (100.0, 1e4) if dtype.itemsize == 2 else (100.0, 1e4, 1e30)
                offset = float(rng.choice([-1.0, 1.0])) * float(rng.choice(magnitudes))
                with np.errstate(over="ignore", invalid="ignore"):
                    x = (x.astype(np.float64) + offset).astype(dtype)
        return s.OpSample((x,), {"axis": axis})

    return sample()


register_op(
    OpDef(
        name="log_softmax",
        family=FAMILY,
        reference=_log_softmax_reference,
        infer=_dtype_infer(dt.FLOATING, "float"),
        canonicalize=_log_softmax_canonicalize,
        sample=_log_softmax_sample,
        vjp=_log_softmax_vjp,
        doc="x - max - log(sum(exp(x - max))) along axis; NaN/+inf in a slice make it NaN",
    )
)


# -- one_hot ------------------------------------------------------------------------------


def _one_hot_canonicalize(avals, attrs):
    unknown = set(attrs) - {"num_classes", "dtype"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (one_hot takes num_classes= and dtype=)")
    if "num_classes" not in attrs:
        raise ShapeDtypeError("needs num_classes=")
    n = attrs["num_classes"]
    if isinstance(n, bool | np.bool_) or not isinstance(n, int | np.integer):
        raise ShapeDtypeError(f"num_classes must be an int, got {n!r}")
    if n <= 0:
        raise ShapeDtypeError(f"num_classes must be positive, got {n}")
    dtype = attrs.get("dtype")
    return {"num_classes": int(n), "dtype": dt.float32 if dtype is None else dt.canonicalize(dtype)}


def _one_hot_infer(labels: Aval, *, num_classes, dtype) -> Aval:
    if labels.dtype not in dt.INTEGER:
        raise ShapeDtypeError(f"labels must be integer class indices, got {labels.dtype}")
    return Aval((*labels.shape, num_classes), dtype)


def _one_hot_reference(labels, *, num_classes, dtype):
    return (labels[..., None] == np.arange(num_classes, dtype=labels.dtype)).astype(dtype)


def _one_hot_sample(s):
    @s.st.composite
    def sample(draw):
        dtype = draw(s.dtypes(s.ALL))  # the result dtype (the test is split by it)
        label_dtype = draw(s.st.sampled_from(dt.INTEGER))
        rng = s.generator(draw)
        num_classes = int(rng.integers(1, 7)) if rng.random() < 0.9 else int(rng.integers(7, 40))
        shape = s.random_shape(rng, max_dims=3)
        # Mostly valid labels; -1, num_classes and beyond, and the dtype's extremes sometimes.
        elements = s.values(label_dtype, -2, num_classes + 1, boundary_rate=1 / 16)
        if rng.random() < 1 / 6:
            elements = s.values(label_dtype, boundary_rate=1 / 2)
        labels = draw(s.arrays(label_dtype, shape, elements))
        return s.OpSample((labels,), {"num_classes": num_classes, "dtype": dtype})

    return sample()


register_op(
    OpDef(
        name="one_hot",
        family=FAMILY,
        reference=_one_hot_reference,
        infer=_one_hot_infer,
        canonicalize=_one_hot_canonicalize,
        sample=_one_hot_sample,
        vjp=NOT_DIFFERENTIABLE,
        doc="labels[..., None] == arange(num_classes) as dtype; integer labels; out of range: all-zero row",
    )
)


# -- clip ---------------------------------------------------------------------------------


def _bound_kind(value, name):
    kind = dt.number_kind(value)  # Python, NumPy and ml_dtypes scalars (x.numpy().max() of bfloat16)
    if kind is bool:
        raise ShapeDtypeError(f"{name}= must be a number, got {value!r}")
    if kind is int:
        return int
    if kind is float:
        if np.isnan(float(value)):
            raise ShapeDtypeError(f"{name}= must not be NaN")
        return float
    raise ShapeDtypeError(
        f"{name}= must be a Python number or None, got {type(value).__name__} (use maximum/minimum for tensor bounds)"
    )


def clip_result_dtype(dtype, lo, hi) -> np.dtype:
    """x's dtype promoted with the (non-None) bounds as weak Python scalars."""
    return dt.promote(dtype, *(dt.Weak(_bound_kind(b, n)) for b, n in ((lo, "min"), (hi, "max")) if b is not None))


def _clip_canonicalize(avals, attrs):
    unknown = set(attrs) - {"min", "max"}
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} (clip takes min= and max=)")
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is None and hi is None:
        raise ShapeDtypeError("needs min= or max= (or both)")
    (x,) = avals
    if x.dtype not in NUMERIC_DTYPES:
        raise ShapeDtypeError(f"defined for integer and float tensors only, got {x.dtype}")
    out = clip_result_dtype(x.dtype, lo, hi)

    def rounded(value, name):
        if value is None:
            return None
        value = dt.as_python_number(value)
        if out in dt.INTEGER:
            value, info = int(value), np.iinfo(out)
            if not info.min <= value <= info.max:
                raise ShapeDtypeError(f"{name}={value} is out of range for {out}")
            return value
        with np.errstate(over="ignore"):  # 1e10 as a float16 bound is inf, as a weak scalar
            return float(np.asarray(value, dtype=out))

    return {"min": rounded(lo, "min"), "max": rounded(hi, "max")}


def _clip_infer(x: Aval, *, min, max) -> Aval:  # noqa: A002  (the attribute names)
    return Aval(x.shape, clip_result_dtype(x.dtype, min, max))


def _clip_reference(x, *, min, max):  # noqa: A002
    out = clip_result_dtype(x.dtype, min, max)
    y = x.astype(out)
    if min is not None:
        lo = np.asarray(min, dtype=out)
        y = np.where(y < lo, lo, y)
    if max is not None:
        hi = np.asarray(max, dtype=out)
        y = np.where(y > hi, hi, y)
    return y


def _clip_vjp(ct, out, x, *, min, max):  # noqa: A002
    # The gradient passes where min <= x <= max, bounds included (PyTorch's convention),
    # except when min >= max: then the result is the constant max and carries none.
    if min is not None and max is not None and min >= max:
        return (None,)
    inside = None
    if min is not None:
        inside = F.greater_equal(x, min)
    if max is not None:
        below = F.less_equal(x, max)
        inside = below if inside is None else F.logical_and(inside, below)
    return (F.where(inside, ct, 0),)


def _clip_sample(s):
    @s.st.composite
    def sample(draw):
        first = draw(s.dtypes(NUMERIC_DTYPES))
        (x,) = draw(s.elementwise(1, (first,))).args
        rng = s.generator(draw)
        values = x.ravel()

        def bound():
            # A value of x itself (ties: where the sign of zero and <= vs < show), a
            # boundary or special value, or a general one; ints or floats as Python scalars.
            pick = rng.random()
            kind = float if first in dt.FLOATING or rng.random() < 1 / 8 else int
            info = np.iinfo(first) if first in dt.INTEGER else np.iinfo(np.int32)
            if pick < 1 / 3 and values.size:
                value = values[rng.integers(0, values.size)]
                if np.isnan(float(value)):
                    value = 0
            elif pick < 1 / 2:
                value = (0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, int(info.max), int(info.min))[rng.integers(0, 8)]
                if kind is int and not np.isfinite(value):
                    value = 0
            else:
                value = rng.uniform(-10, 10) if kind is float else int(rng.integers(-10, 11))
            return kind(value) if kind is int or np.isfinite(value) else value

        mode = rng.integers(0, 4)  # both bounds (sometimes min > max), only min, only max
        lo = bound() if mode != 2 else None
        hi = bound() if mode != 1 else None
        if mode == 0 and lo is not None and hi is not None and lo > hi and rng.random() < 1 / 2:
            lo, hi = hi, lo  # min > max half as often as min <= max
        return s.OpSample((x,), {"min": lo, "max": hi})

    return sample()


register_op(
    OpDef(
        name="clip",
        family=FAMILY,
        reference=_clip_reference,
        infer=_clip_infer,
        canonicalize=_clip_canonicalize,
        sample=_clip_sample,
        vjp=_clip_vjp,
        doc="clip to scalar bounds [min, max] (either may be None); NaN propagates; min > max gives max",
    )
)
