"""VJPs and sample strategies of the control-flow ops (:mod:`hlotrace.ops.control_flow`).

VJPs of control flow are control flow, written with the public functions, so they compute
eagerly, record inside ``xla_trace`` and are taped again for second order:

- switch: a switch over the same index of each branch's VJP (the branch re-run under a
  tape, :func:`hlotrace.regions.call_region`); a branch gives zeros for the operands it
  does not use, so every branch returns the same types;
- scan: with the carry each step started from (stacked: output by the forward scan when
  F.scan ran under a tape, ``saved_carries``, else recomputed by one more scan), a scan in
  the opposite direction re-runs the body on ``(carry[t], x[t])`` under a tape
  and carries ``(d carry, sum of d captures)``: tensors the body closes over get their
  gradients as extra carries; the xs' cotangents are its ys;
- while_loop: refused (its trip count, hence what backward must keep, is known only at run
  time): its OpDef's vjp is a ReverseModeRefused, an OpError pointing to F.scan and
  int-bound F.fori_loop once a cotangent reaches the loop.

Each is the OpDef's ``vjp(ct, out, *inputs, **attrs)`` (:mod:`hlotrace.autodiff`); with
several results ``ct`` and ``out`` are tuples. Only floating-point operands carry cotangents.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.ops.common import F
from hlotrace.ops.registry import Aval, ReverseModeRefused
from hlotrace.regions import call_region, close, record

# -- VJPs: vjp(ct, out, *inputs, **attrs) -> one cotangent per input ------------------------


def _several(value) -> tuple:
    """``ct`` or ``out`` of a VJP as a tuple of every result (one result comes as itself)."""
    return value if type(value) is tuple else (value,)


def _floating(tensors) -> list[int]:
    return [i for i, t in enumerate(tensors) if dt.is_floating(t.dtype)]


def _backward(region, operands, watched, out_positions, cotangents) -> list:
    """Cotangents of ``operands[watched]`` of ``region``'s outputs ``out_positions`` for
    ``cotangents`` (zeros where none flows), re-running the region under a tape."""
    from hlotrace.autodiff import Tape  # lazy: import hlotrace does not load autodiff (~3 ms)

    tape = Tape()
    with tape:
        keys = [tape.watch(operands[i]) for i in watched]
        results = call_region(region, list(operands))
    grads = tape.backward([results[j] for j in out_positions], list(cotangents), keys)
    return [g if g is not None else F.zeros_like(operands[i]) for g, i in zip(grads, watched, strict=True)]


def switch_vjp(ct, out, *inputs, branches) -> tuple:
    cts, outs = _several(ct), _several(out)
    index, operands = inputs[0], inputs[1:]
    watched, out_positions = _floating(operands), _floating(outs)
    if not watched:
        return (None,) * len(inputs)

    def branch_vjp(region):
        return lambda ops, cs: _backward(region, ops, watched, out_positions, cs)

    grads = F.switch(index, [branch_vjp(r) for r in branches], list(operands), [cts[j] for j in out_positions])
    out = [None] * len(operands)
    for i, g in zip(watched, grads, strict=True):
        out[i] = g
    return (None, *out)


def scan_vjp(ct, out, *inputs, body, num_carry, num_xs, length, reverse, saved_carries=False, unroll=1) -> tuple:
    cts, outs, nc, nx = _several(ct), _several(out), num_carry, num_xs
    init, xs, consts = list(inputs[:nc]), list(inputs[nc : nc + nx]), list(inputs[nc + nx :])
    fc, fx, fk = _floating(init), _floating(xs), _floating(consts)
    if not (fc or fx or fk):
        return (None,) * len(inputs)
    n_saved = nc if saved_carries else 0
    fy = _floating(outs[nc:])  # saved carries too: second order differentiates through them
    if n_saved:
        stacked = outs[len(outs) - n_saved :]
    else:

        def carries(c, x):  # the carry each step starts from, stacked
            return call_region(body, [*c, *x, *consts])[:nc], list(c)

        _, stacked = F.scan(carries, init, xs, length=length, reverse=reverse, unroll=unroll) if nc else (None, [])

    def backward_step(carry, x):
        ct_carry, acc = carry
        c_t, x_t, ct_y = x
        operands = [*c_t, *x_t, *consts]
        watched = fc + [nc + i for i in fx] + [nc + nx + k for k in fk]
        grads = _backward(body, operands, watched, fc + [nc + j for j in fy], [*ct_carry, *ct_y])
        g_c, g_x, g_k = grads[: len(fc)], grads[len(fc) : len(fc) + len(fx)], grads[len(fc) + len(fx) :]
        # A non-float carry's next value is recomputed from stacked, so only floats carry.
        return (g_c, [a + g for a, g in zip(acc, g_k, strict=True)]), g_x

    ct_final = [cts[i] for i in fc]
    zeros = [F.zeros_like(consts[k]) for k in fk]
    ct_ys = [cts[nc + j] for j in fy]
    (ct_init, ct_consts), ct_xs = F.scan(
        backward_step,
        (ct_final, zeros),
        (list(stacked), xs, ct_ys),
        length=length,
        reverse=not reverse,
        unroll=unroll,
    )
    grads = [None] * len(inputs)
    for i, g in zip(fc, ct_init, strict=True):
        grads[i] = g
    for i, g in zip(fx, ct_xs, strict=True):
        grads[nc + i] = g
    for k, g in zip(fk, ct_consts, strict=True):
        grads[nc + nx + k] = g
    return tuple(grads)


WHILE_LOOP_VJP = ReverseModeRefused(
    "reverse-mode differentiation of F.while_loop is not supported",
    "its trip count is known only at run time, so the backward pass could not size what it keeps. "
    "Use F.scan, or F.fori_loop with Python-int bounds (a scan), which are differentiable.",
)


# -- sample strategies: float64 operands, bodies of a few registered ops --------------------
# float64 only: a region's params have fixed dtypes, and the gradient test re-runs a sample
# in float64.


def _random_body(rng):
    """A function ``(x, y) -> same shape as x`` of 1-3 smooth or exact ops."""
    steps = [int(k) for k in rng.integers(0, 4, size=int(rng.integers(1, 4)))]

    def body(x, y):
        for k in steps:
            if k == 0:
                x = F.tanh(x)
            elif k == 1:
                x = x * 0.5 + y
            elif k == 2:
                # maximum spelled as a select: F.maximum's result at a +0.0/-0.0 tie is
                # either zero (tolerances.UNSIGNED_ZEROS), which a region's check would
                # not forgive (seed 2905549118: switch-float64, max(0.0, -0.0)).
                x = F.where(x > y, x, y)
            else:
                x = x - F.tanh(y) * x
        return x

    return body


def _region(fn, avals):
    recorded = record(fn, (tuple, (None,) * len(avals)), avals, "a sampled body", None)
    (region,), captures = close([recorded])
    assert not captures
    return region


def _operands(s, draw, rng, count, shape=None):
    dtype = draw(s.dtypes((dt.float64,)))
    shape = s.random_shape(rng, 3) if shape is None else shape
    elements = s.values(dtype, -4.0, 4.0)
    return dtype, shape, [draw(s.arrays(dtype, shape, elements)) for _ in range(count)]


def _switch_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        dtype, shape, (x, y) = _operands(s, draw, rng, 2)
        n = int(rng.integers(1, 4))
        aval = Aval(shape, dtype)
        branches = tuple(_region(_random_body(rng), [aval, aval]) for _ in range(n))
        index = np.asarray(rng.integers(-1, n + 1), np.int32)  # out of range: clamped
        return s.OpSample((index, x, y), {"branches": branches})

    return sample()


def _while_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3))))
        dtype, shape, (x,) = _operands(s, draw, rng, 1, shape)
        bound = float(rng.integers(1, 40))
        aval = Aval(shape, dtype)
        # The sum grows by at least one per element each step: it ends (NaN stops it at once).
        cond = _region(lambda c: F.sum(F.abs(c)) < bound, [aval])
        body = _region(lambda c: F.abs(c) * 1.5 + 1.0, [aval])
        return s.OpSample((x,), {"cond": cond, "body": body, "num_carry": 1})

    return sample()


def _scan_sample(s):
    @s.st.composite
    def sample(draw):
        rng = s.generator(draw)
        length = int(rng.integers(0, 4))
        dtype, shape, (c,) = _operands(s, draw, rng, 1)
        xs = draw(s.arrays(dtype, (length, *shape), s.values(dtype, -4.0, 4.0)))
        aval = Aval(shape, dtype)
        f = _random_body(rng)
        if rng.random() < 0.5:  # the last carry only
            body = _region(lambda carry, x_t: ((f(carry, x_t),), ()), [aval, aval])
            args = (c, xs)
            num_carry = 1
        else:  # the ys only
            body = _region(lambda x_t: ((), f(x_t, x_t)), [aval])
            args = (xs,)
            num_carry = 0
        attrs = {
            "body": body,
            "num_carry": num_carry,
            "num_xs": 1,
            "length": length,
            "reverse": bool(rng.random() < 0.5),
        }
        if rng.random() < 0.5:
            attrs["unroll"] = int(rng.integers(2, 5))  # more than length: no loop at all
        return s.OpSample(args, attrs)

    return sample()


SAMPLES = {"switch": _switch_sample, "while_loop": _while_sample, "scan": _scan_sample}
