"""Gradient checks generated from the op registry (tests/test_gradients.py runs them).

For a sample of an op (drawn by the op's own strategy) and random output weights ``w``,
the checked function is ``f(inputs) = sum(w * op(inputs))``; its gradient is the op's VJP
applied to ``w``.

- :func:`check_vjp_fd`: the eager VJP against central finite differences of the NumPy
  reference in float64. Elements where the one-sided differences disagree (a kink: relu at
  0, a max tie, abs at 0) or where a difference is not finite are not compared: the
  derivative is not defined there.
- :func:`check_compiled_grad`: ``grad(f)`` recorded and compiled with ``xla_trace`` (the
  backward ops lowered by the same rules as any op) equals the eager gradient within the
  tolerance table.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import assume, given, seed, settings

import hlotrace.testing.strategies as strategies
from hlotrace import dtypes as dt
from hlotrace.autodiff import grad, vjp
from hlotrace.dispatch import apply
from hlotrace.jit import xla_trace
from hlotrace.ops.registry import OpDef, is_differentiable
from hlotrace.tensor import Tensor
from hlotrace.testing.check import _as_operand, example_seed, on_numpy_engine
from hlotrace.testing.sampling import OpSample
from hlotrace.testing.tolerances import (
    CANCELLING_GRADIENTS,
    ROUNDED_PRODUCT_GRADIENTS,
    SUBNORMAL_INPUTS_UNCHECKED,
    Tolerance,
    assert_close,
    cancellation_atol,
    mismatches,
    product_sum_atol,
    tolerance_for,
)
from hlotrace.testing.values import flush_subnormals

# Finite differences: step relative to the element's magnitude (at least STEP).
STEP = 1e-6
# Elements compared per input (a random subset of larger inputs): two reference calls each.
MAX_ELEMENTS = 48
FD_TOLERANCE = Tolerance(1e-4, 1e-6, "central differences in float64 with a 1e-6 relative step", signed_zeros=False)
# One-sided differences further apart than this (relative) mark a kink: not compared.
KINK = 1e-3
# The compiled-gradient test's share of the profile's examples (10 of 25 under ci).
COMPILED_EXAMPLE_SHARE = 0.4


def float_positions(sample: OpSample) -> list[int]:
    """Positions of the sample's floating-point array operands (the differentiated ones)."""
    return [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and dt.is_floating(a.dtype)]


def _unfit(x):
    """Values finite differences cannot use: non-finite, huge, or nonzero but within a few
    steps of zero, where the step would straddle a pole (seed 1636961270: a divisor of
    -9.2e-41, d/dy of x / y is -6.5e80, the central difference across y = 0 gave 0). Zero
    itself is kept: it is where kinks are (relu, abs)."""
    return ~np.isfinite(x) | (np.abs(x) > 1e4) | ((x != 0) & (np.abs(x) < 10 * STEP))


def _to_float64(value, rng):
    """A float array in float64 with the values finite differences cannot use (_unfit)
    replaced by N(0, 1) draws (a Python float likewise): they need moderate values."""
    if isinstance(value, float) and bool(_unfit(np.float64(value))):
        return float(rng.standard_normal())
    if not (isinstance(value, np.ndarray) and dt.is_floating(value.dtype)):
        return value
    x = value.astype(np.float64)
    bad = _unfit(x)
    x[bad] = rng.standard_normal(int(bad.sum()))
    return x


def _float64_attrs(attrs: dict) -> dict:
    """Float dtype attributes (astype's target) widened to float64: a cast to float16 is a
    step function at the scale of a finite-difference step."""
    return {k: (dt.float64 if isinstance(v, np.dtype) and dt.is_floating(v) else v) for k, v in attrs.items()}


def _operands(args):
    return [_as_operand(a) for a in args]


@on_numpy_engine
def check_vjp_fd(op: OpDef, sample: OpSample, rng: np.random.Generator) -> int:
    """Assert the eager VJP of ``op`` matches finite differences; returns how many elements
    were compared (0 when the sample has nothing differentiable)."""
    args = [_to_float64(a, rng) for a in sample.args]
    attrs = _float64_attrs(sample.attrs)
    positions = float_positions(sample)
    operands = _operands(args)
    out = apply(op, *operands, **attrs)
    if not positions or not dt.is_floating(out.dtype):
        return 0
    # Outputs that are NaN or ±inf at the base point (rsqrt(0), log of a negative) get no
    # weight: summed in, they made every difference non-finite, and a sample with one such
    # element had nothing compared (rsqrt under seed 2297100651: no example at all).
    finite = np.isfinite(out.numpy().astype(np.float64))
    w = np.where(finite, rng.standard_normal(out.shape), 0.0)

    def f(arrays) -> float:
        filled = list(args)
        for p, a in zip(positions, arrays, strict=True):
            filled[p] = a
        with np.errstate(all="ignore"):
            y = apply(op, *_operands(filled), **attrs).numpy().astype(np.float64)
            return float(np.sum(np.where(finite, w * y, 0.0)))

    primals = [operands[p] for p in positions]

    def fn(*xs):
        filled = list(operands)
        for p, x in zip(positions, xs, strict=True):
            filled[p] = x
        return apply(op, *filled, **attrs)

    cotangent = Tensor._from_array(w.astype(out.dtype))

    def vjp_at(arrays) -> list[np.ndarray]:
        # The VJP at another point (arrays replace the differentiated operands).
        points = [Tensor._from_array(np.asarray(a, dtype=o.dtype)) for a, o in zip(arrays, primals, strict=True)]
        _, at_fn = vjp(fn, *points)
        return [g.numpy().astype(np.float64) for g in at_fn(cotangent)]

    _, vjp_fn = vjp(fn, *primals)
    grads = vjp_fn(cotangent)
    base = [np.array(args[p]) for p in positions]
    f0 = f(base)
    compared = 0
    for k, (x, g) in enumerate(zip(base, grads, strict=True)):
        g = g.numpy().astype(np.float64)
        assert g.shape == x.shape, f"{op.name}: cotangent of input {positions[k]} has shape {g.shape}, not {x.shape}"
        flat = np.arange(x.size)
        if x.size > MAX_ELEMENTS:
            flat = rng.choice(x.size, MAX_ELEMENTS, replace=False)
        for i in flat:
            at = np.unravel_index(i, x.shape)
            if not np.isfinite(g[at]) and (not finite.all() or out.size == 0):
                # Feeds a non-finite output: 0 * inf in the VJP, no derivative there. With no
                # output at all the same 0 * inf is all the VJP can compute (seed 3594143097:
                # batch_norm_inference of an empty x whose var + eps < 0, an empty sum * NaN).
                continue
            h = STEP * max(1.0, abs(x[at]))
            plus, minus = [b.copy() for b in base], [b.copy() for b in base]
            plus[k][at] += h
            minus[k][at] -= h
            fp, fm = f(plus), f(minus)
            forward, backward = float((fp - f0) / h), float((f0 - fm) / h)
            if not np.isfinite([forward, backward]).all():
                continue
            if abs(forward - backward) > KINK * (abs(forward) + abs(backward)) + 1e-6:
                continue
            expected = (fp - fm) / (2 * h)
            if abs(forward - backward) > FD_TOLERANCE.rtol * (abs(forward) + abs(backward)):
                # A mild kink (e.g. two cotangents meeting at a sort tie): the derivative from
                # either side is an answer a VJP may give, the central difference neither.
                expected = min((expected, forward, backward), key=lambda v: abs(g[at] - v))
            tolerance = FD_TOLERANCE._replace(atol=FD_TOLERANCE.atol * (1 + abs(f0)))
            if mismatches(np.array([g[at]]), np.array([expected]), tolerance).any():
                if _jumps(f, base, k, at, h, expected):
                    continue  # f jumps here (an argmax switching at a tie): no derivative to check
                if _gradient_switches(vjp_at, plus, minus, k, at, g[at], (expected, forward, backward), tolerance):
                    compared += 1  # checked beside the point instead
                    continue
            assert_close(
                np.array([g[at]]),
                np.array([expected]),
                tolerance,
                what=f"d/d(input {positions[k]}){list(at)} of sum(w * {op.name}(...)) for {sample!r}",
            )
            compared += 1
    return compared


def _jumps(f, base, k: int, at, h: float, expected: float) -> bool:
    """Whether ``f`` is discontinuous at the element rather than differentiable: the central
    difference with an eighth of the step is not the one with the whole step (a jump over the
    step grows as 1/h; seed 2981992792: adaptive_max_pool2d_backward of an all-zero x, where
    nudging one zero makes it every window's maximum, measured 1.1e7 for a derivative of 0).
    Asked only when the VJP and the difference disagree, so passing elements cost nothing."""
    small = h / 8
    plus, minus = [b.copy() for b in base], [b.copy() for b in base]
    plus[k][at] += small
    minus[k][at] -= small
    closer = (f(plus) - f(minus)) / (2 * small)
    scale = abs(expected) + abs(closer)
    return not np.isfinite(closer) or abs(closer - expected) > KINK * scale + 1e-6


def _gradient_switches(vjp_at, plus, minus, k: int, at, value: float, differences, tolerance: Tolerance) -> bool:
    """Whether the gradient is discontinuous at the element (a tie the one-sided differences
    did not reveal) and the VJP just beside it, on either side, matches a difference there.

    At a tie of sort, nudging one tied element up or down moves it to one end of its group:
    the one-sided derivatives are the cotangents at the group's two ends, and the VJP at the
    point is the cotangent at the element's own place, in between. When the two ends' weights
    happen to agree within KINK (seed 3099572356: -0.6074 and -0.6077 among 675 float16 ties,
    the VJP -0.242), the kink rule misses it. The VJP a step away on either side is then the
    one-sided derivative: the rule is right beside the point, and the point is not
    differentiable along every direction. A wrong rule is as wrong a step away, so it still
    fails. Asked only when the VJP and the difference disagree."""
    besides = [vjp_at(plus)[k][at], vjp_at(minus)[k][at]]
    if not any(mismatches(np.array([b]), np.array([value]), tolerance).any() for b in besides):
        return False  # the same gradient on both sides: continuous here, so the check stands
    return any(not mismatches(np.array([b]), np.array([d]), tolerance).any() for b in besides for d in differences)


def _compiled_tolerance(op: OpDef, dtype: np.dtype) -> Tolerance:
    base = tolerance_for(op.name, dtype)
    # The backward is several ops, each within the table: allow a few roundings more.
    return Tolerance(base.rtol * 8, base.atol * 8, "backward of " + base.reason, signed_zeros=False)


def _flush_scalar(value, tiny: float):
    """A Python float below ``tiny`` (the smallest normal) as a zero of its sign; anything
    else as it is (the same object)."""
    return float(np.copysign(0.0, value)) if isinstance(value, float) and 0 < abs(value) < tiny else value


@on_numpy_engine
def check_compiled_grad(op: OpDef, sample: OpSample, rng: np.random.Generator) -> bool:
    """Assert ``xla_trace(grad(f))`` equals eager ``grad(f)``; False when nothing is differentiable."""
    positions = float_positions(sample)
    args = [flush_subnormals(a) if isinstance(a, np.ndarray) else a for a in sample.args]
    if not positions:
        return False
    # XLA:CPU flushes a subnormal float attribute too (a clip bound of -5e-324 compares as
    # -0.0: clip's compiled gradient under seed 3067397598), so the eager side gets it flushed.
    tiny = float(ml_dtypes.finfo(sample.args[positions[0]].dtype).smallest_normal)
    attrs = {k: _flush_scalar(v, tiny) for k, v in sample.attrs.items()}
    if op.name in SUBNORMAL_INPUTS_UNCHECKED:
        # Ops XLA:CPU computes wrongly from a subnormal operand (the tolerance table) are
        # differentiated at the flushed value, like array operands above: power(1.166e-38, y)
        # with the base a Python scalar is 1e4 times NumPy's (ci seed 3965948841).
        args = [_flush_scalar(a, tiny) for a in args]
    probe = apply(op, *_operands(args), **attrs)
    if not dt.is_floating(probe.dtype):
        return False
    w = rng.standard_normal(probe.shape).astype(probe.dtype)

    def make_loss(operands):
        def loss(*xs_and_w):
            *xs, weights = xs_and_w
            filled = _operands(operands)
            for p, x in zip(positions, xs, strict=True):
                filled[p] = x
            y = apply(op, *filled, **attrs)
            total = (y * weights).sum()
            return total if dt.is_floating(total.dtype) else total.astype("float32")

        return loss

    gradient = grad(make_loss(args), argnums=tuple(range(len(positions))))
    inputs = [Tensor._from_array(np.array(args[p])) for p in positions] + [Tensor._from_array(w)]
    eager = gradient(*inputs)
    # A subnormal Python-scalar operand is a literal XLA:CPU flushes where it meets a run-time
    # value (minimum(x, -9.2e-41) ties with x = +0.0 and the gradient goes to x: seed
    # 2198290105): the eager gradient with it flushed is accepted too.
    flushed = [_flush_scalar(a, tiny) for a in args]
    alternatives = []
    if any(a is not b for a, b in zip(flushed, args, strict=True)):
        alternatives = grad(make_loss(flushed), argnums=tuple(range(len(positions))))(*inputs)
    traced = xla_trace(gradient, capture_as_const=True)  # non-float operands are closed over
    traced(*inputs)
    compiled = traced(*inputs)
    for k, (p, e, c) in enumerate(zip(positions, eager, compiled, strict=True)):
        # The backward computes in the result's dtype too (cumsum(x: f32, dtype=f16)'s
        # reverse cumsum of the f16 cotangent, seed 3552269493): the coarser dtype's row.
        coarser = max((e.dtype, probe.dtype), key=lambda d: float(ml_dtypes.finfo(d).eps))
        tolerance = _compiled_tolerance(op, coarser)
        if op.name in CANCELLING_GRADIENTS:
            x = np.asarray(args[p])
            tolerance = tolerance._replace(atol=tolerance.atol + cancellation_atol(x, attrs.get("axis"), w))
        if op.name in ROUNDED_PRODUCT_GRADIENTS:
            x = np.asarray(args[p])
            extra = product_sum_atol(x, attrs.get("axis"), attrs.get("reverse", False), w)
            tolerance = tolerance._replace(atol=tolerance.atol + extra)
        assert_close(
            c.numpy(),
            e.numpy(),
            tolerance,
            what=f"compiled vs eager gradient of input {p} of sum(w * {op.name}(...)) for {sample!r}",
            alternatives=[alternatives[k].numpy()] if alternatives else (),
        )
    return True


def gradient_test(op: OpDef, base: int, kind: str):
    """The seeded hypothesis test of ``op``'s VJP: ``kind`` is "fd" or "compiled".

    Samples without a floating-point operand are skipped; the test fails if no example at
    all had something to compare (every element at a kink or outside the op's domain).
    """
    checker = {"fd": check_vjp_fd, "compiled": check_compiled_grad}[kind]
    checked = []

    @seed(example_seed(f"{op.name}-grad-{kind}", base))
    @given(op.sample(strategies), strategies.st.integers(0, 2**32 - 1))
    def examples(sample, rng_seed):
        assume(float_positions(sample))
        checked.append(int(checker(op, sample, np.random.default_rng(rng_seed))))

    if kind == "compiled":
        # Each example compiles a backward module (the cost of the gradient tests): the
        # backward's ops are the primitives whose rules the property tests already check,
        # and the VJP's math is checked by the fd test, so fewer examples suffice here.
        examples = settings(max_examples=max(1, round(settings.default.max_examples * COMPILED_EXAMPLE_SHARE)))(
            examples
        )

    def run():
        examples()
        if not any(checked):
            raise AssertionError(f"{op.name}: no example had a differentiable element to check ({kind})")

    return run


def differentiable_ops(ops) -> list[OpDef]:
    """Ops gradients flow through (VJP present or missing), with a sample strategy."""
    return [op for op in ops if is_differentiable(op) and op.sample is not None]


def central_differences(f, args, analytic, points=5, h=1e-6, seed=3) -> None:
    """Assert the ``analytic`` gradients (one array per argument) of the scalar function
    ``f`` of float64 arrays ``args`` against central differences at ``points`` elements of
    each argument (chosen with ``seed``). For hand-written composite tests; the generated
    VJP tests use :func:`check_vjp_fd`."""
    rng = np.random.default_rng(seed)
    for which, base in enumerate(args):
        for flat in rng.choice(base.size, min(points, base.size), replace=False):
            idx = np.unravel_index(flat, base.shape)
            plus, minus = base.copy(), base.copy()
            plus[idx] += h
            minus[idx] -= h
            shifted = lambda value: f(*[value if i == which else a for i, a in enumerate(args)])  # noqa: E731
            numeric = (shifted(plus) - shifted(minus)) / (2 * h)
            np.testing.assert_allclose(analytic[which][idx], numeric, rtol=1e-5, atol=1e-7)
