"""Control-flow steps of the program generator: switch, scan and while_loop records of
several outputs, whose regions are drawn here.

The ops' own sample strategies (hlotrace/ops/control_flow_grad.py) give single-output,
float64 uses (what the generated tests draw); half of a control-flow op's steps use them.
The other half come from here and go through the public API (``F.switch``, ``F.scan``,
``F.while_loop``), as a user's program does: the operands are live values of the program
(or fresh inputs) of its main float dtype (float32 when the program's is not float32 or
float64: a loop compounds a narrow dtype's rounding past its tolerance), each region is a
random chain of the run's smooth ops (``BODY_OPS`` among ``--ops``; these when none is),
it may close over a live value (an extra input of the record), and the record returns two
outputs: a switch's two results, a scan's carry and stacked ys, a while loop's two carries.
A step whose results leave the finite range is undone, as the generator's other steps are.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.tensor import Tensor

CONTROL_FLOW = ("switch", "scan", "while_loop")
P_MULTI_OUTPUT = 0.5  # a control-flow step's chance to come from here, not from the op's sample
P_CLOSURE = 0.3  # a region closes over a live value
BODY_OPS = ("tanh", "add", "multiply", "subtract", "maximum")
DEFAULT_BODY_OPS = ("tanh", "add", "multiply")


def _body(rng: np.random.Generator, ops: tuple[str, ...], closure):
    """``(x, y) -> like x``: 1-3 steps of ``ops`` that keep values bounded (|x| stays within
    a few times the operands' magnitudes)."""
    steps = [ops[int(k)] for k in rng.integers(0, len(ops), size=int(rng.integers(1, 4)))]

    def body(x, y):
        other = y if closure is None else y + closure * 0.25
        for name in steps:
            if name == "tanh":
                x = F.tanh(x)
            elif name == "add":
                x = x * 0.5 + other if "multiply" in ops else F.tanh(x + other)
            elif name == "multiply":
                x = x * F.tanh(other)
            elif name == "subtract":
                x = x - F.tanh(other) * 0.5
            else:
                x = F.maximum(x, other)
        return x

    return body


def _dtype(main_dtype):
    return main_dtype if main_dtype in (dt.float32, dt.float64) else np.dtype(dt.float32)


def region_step(builder, name: str, selected: list[str]) -> bool:
    """One multi-output record of control-flow op ``name`` (False, and ``builder.refusal``
    says why, when its results left the finite range or an op refused)."""
    rng = builder.rng
    dtype = _dtype(builder.main_dtype)
    ops = tuple(o for o in BODY_OPS if o in selected) or DEFAULT_BODY_OPS
    live = [t for t in builder.live if t.dtype == dtype and 0 < t.ndim <= 3 and t.size > 0]
    fresh: list[Tensor] = []

    def value(shape):
        same = [t for t in live if t.shape == shape]
        if same and rng.random() < 0.8:
            return same[int(rng.integers(len(same)))]
        tensor = Tensor._from_array(rng.uniform(-2.0, 2.0, shape).astype(dtype))
        fresh.append(tensor)
        return tensor

    def scalar(array):
        tensor = Tensor._from_array(array)
        fresh.append(tensor)
        return tensor

    if live and rng.random() < 0.8:
        shape = live[int(rng.integers(len(live)))].shape
    else:
        shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(1, 3))))
    x, y = value(shape), value(shape)
    closure = value(shape) if rng.random() < P_CLOSURE else None
    records = len(builder.recorder.trace.records)
    ids = builder._add_inputs(fresh)  # before recording: a region may close over them
    fresh.clear()
    try:
        if name == "switch":
            n = int(rng.integers(1, 4))
            bodies = [(_body(rng, ops, closure), _body(rng, ops, None)) for _ in range(n)]
            index = scalar(np.asarray(rng.integers(-1, n + 1), np.int32))  # out of range: clamped
            ids += builder._add_inputs(fresh)
            outs = F.switch(index, [lambda a, b, f=f, g=g: (f(a, b), g(b, a)) for f, g in bodies], x, y)
        elif name == "scan":
            length = int(rng.integers(0, 5))
            xs = value((length, *shape)) if length else scalar(np.zeros((0, *shape), dtype))
            ids += builder._add_inputs(fresh)
            f, g = _body(rng, ops, closure), _body(rng, ops, None)
            unroll = int(rng.integers(2, 5)) if rng.random() < 0.3 else 1
            outs = F.scan(lambda c, t: (f(c, t), g(t, c)), x, xs, reverse=bool(rng.random() < 0.5), unroll=unroll)
        else:
            bound = float(rng.integers(1, 40))
            f = _body(rng, ops, closure)

            def body(carry):
                a, b = carry
                return F.abs(a) * 1.5 + 1.0, f(b, a * 0.01)

            outs = F.while_loop(lambda carry: F.sum(F.abs(carry[0])) < bound, body, (x, y))
    except HlotraceError as exc:
        _undo(builder, records, ids)
        builder.refusal = str(exc)
        return False
    outs = list(outs)
    if not all(np.isfinite(t.numpy().astype(np.float64)).all() for t in outs):
        _undo(builder, records, ids)
        builder.refusal = "its result became NaN/inf"
        return False
    builder.live.extend(outs)
    return True


def _undo(builder, records: int, ids: list[int]) -> None:
    del builder.recorder.trace.records[records:]
    builder._drop_inputs(ids)
