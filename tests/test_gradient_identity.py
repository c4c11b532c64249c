"""Generated from the op registry (issue 33): after ``gm.backward`` through any differentiable
op, every ``.grad`` is a Tensor object of its own -- not another input's ``.grad``, not the
``dy`` the caller passed, not an input -- a second backward accumulates into the very same
objects, and an in-place callback scales each gradient exactly once. The functional front ends
(``grad``, ``vjp``) return distinct objects too.

Before, ops whose VJP hands one cotangent to several inputs (``add``, ``where``, ``concat``'s
slices of one object, ``broadcast_to``'s identity) gave ``a.grad is b.grad`` or
``x.grad is dy``: an in-place callback then ran twice on one tensor.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, seed, settings

from hlotrace import dtypes as dt
from hlotrace.autodiff import GradManager, vjp
from hlotrace.dispatch import apply
from hlotrace.ops import OPS
from hlotrace.tensor import Tensor, tensor
from hlotrace.testing import strategies
from hlotrace.testing.check import _as_operand, example_seed
from hlotrace.testing.gradcheck import differentiable_ops, float_positions

DIFFERENTIABLE = sorted(op.name for op in differentiable_ops(OPS.values()))
EXAMPLES = 4


def _halve(p, g):
    g *= 0.5
    return g


def _same(actual: Tensor, expected: Tensor, what: str) -> None:
    # float64 views: NaN equals NaN there for every dtype (not for ml_dtypes' bfloat16 as is)
    np.testing.assert_array_equal(actual.numpy().astype(np.float64), expected.numpy().astype(np.float64), err_msg=what)


def _check(op, sample) -> None:
    positions = float_positions(sample)
    operands = [_as_operand(a) for a in sample.args]
    leaves = [operands[p] for p in positions]
    assume(leaves and len({id(t) for t in leaves}) == len(leaves))
    out = apply(op, *operands, **sample.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    assume(all(isinstance(o, Tensor) and dt.is_floating(o.dtype) for o in outs))
    dys = [tensor(np.ones(o.shape, o.dtype)) for o in outs]

    def backward(gm):
        with gm:
            result = apply(op, *operands, **sample.attrs)
            gm.backward(list(result) if isinstance(result, tuple) else result, dys)

    plain = GradManager().attach(leaves)
    backward(plain)
    grads = [t.grad for t in leaves]
    if all(g is None for g in grads):
        return
    held = {id(t) for t in (*operands, *dys)}
    ids = [id(g) for g in grads if g is not None]
    assert len(set(ids)) == len(ids), f"{op.name}: two inputs share one .grad object"
    assert not held & set(ids), f"{op.name}: a .grad is an input or the caller's dy"
    first = [None if g is None else g.numpy().copy() for g in grads]

    backward(plain)  # accumulates into the same objects
    for t, g, value in zip(leaves, grads, first, strict=True):
        assert t.grad is g, f"{op.name}: a second backward replaced the .grad object"
        if g is not None:
            doubled = tensor(value) + tensor(value)  # the engine's own add: same rounding
            _same(g, doubled, f"{op.name}: accumulated .grad")

    for t in leaves:
        t.grad = None
    halving = GradManager().attach(leaves, callbacks=[_halve])
    backward(halving)
    for t, value in zip(leaves, first, strict=True):
        if value is not None:
            _same(t.grad, tensor(value) * 0.5, f"{op.name}: callback effect")
        t.grad = None

    cts = [tensor(np.ones(o.shape, o.dtype)) for o in outs]
    _, vjp_fn = vjp(lambda *xs: apply(op, *_filled(operands, positions, xs), **sample.attrs), *leaves)
    returned = vjp_fn(*cts)
    assert len({id(g) for g in returned}) == len(returned), f"{op.name}: vjp returned one object twice"
    assert not {id(g) for g in returned} & {id(t) for t in (*operands, *cts)}, f"{op.name}: vjp returned an input"


def _filled(operands, positions, xs):
    filled = list(operands)
    for p, x in zip(positions, xs, strict=True):
        filled[p] = x
    return filled


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_are_distinct_and_accumulate_in_place(name, hypothesis_base_seed):
    op = OPS[name]

    @seed(example_seed(f"{name}-grad-identity", hypothesis_base_seed))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(op.sample(strategies))
    def examples(sample):
        with np.errstate(all="ignore"):
            _check(op, sample)

    examples()
