"""Structured control flow: ``F.cond``, ``F.switch``, ``F.while_loop``, ``F.fori_loop``, ``F.scan``.

Each callable is recorded once into a closed region (:mod:`hlotrace.regions`); the op's
record holds the regions as attributes and takes the tensors they close over as trailing
inputs. Three ops, lowered by ``hlotrace/lowering/rules/control_flow.py``:

- ``switch(index, *operands, *captures, branches=(Region, ...))``: the branch at ``index``
  clamped to ``[0, len(branches) - 1]`` (``F.cond`` is a switch over (false, true));
- ``while_loop(*carry, *captures, cond=Region, body=Region, num_carry=n)``;
- ``scan(*init, *xs, *captures, body=Region, num_carry, num_xs, length, reverse,
  saved_carries=False)``: the body maps ``(carry, x[t])`` to ``(carry, y[t])``; the outputs
  are the last carry and the ys stacked along a new leading axis, in index order. Under
  autodiff F.scan also returns the carry each step starts from as trailing ys
  (``saved_carries``), which the VJP reads instead of recomputing them.

They are ordinary ops: the public functions record the regions, then call
:func:`hlotrace.dispatch.apply` like every other op, which infers, computes, records and
tapes them. What control flow needs from the registry is in its OpDefs:

- several results: inference returns a tuple of avals (one result: an Aval, as every op),
  the reference a list of arrays, ``apply`` a tuple of Tensors;
- regions as attributes (``REGIONS_TAG``): recorders adopt them into their var table;
- the VJP on the OpDef, ``vjp(ct, out, *inputs, **attrs)`` (tuples for several results),
  written as control flow again (:mod:`hlotrace.ops.control_flow_grad`); ``while_loop``'s
  is a :class:`~hlotrace.ops.registry.ReverseModeRefused`.

Eager evaluation is the OpDef's ``reference``: :func:`hlotrace.regions.evaluate` of the
regions, each record by its op's NumPy reference, so eager and compiled run the same ops.
The regions are plain attributes to the dispatcher: an engine computes a control-flow op
the way it computes any op, the NumPy engine with the reference, and a device engine with
the op's lowering rule, which lowers the regions with the same per-op rules (one executable
for the whole construct). No engine needs a control-flow case of its own.
"""

from __future__ import annotations

import numpy as np

import hlotrace.ops.control_flow_grad as grad
from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.ops.common import F
from hlotrace.ops.registry import OPS, Aval, OpDef, register_op
from hlotrace.recording import TAPES
from hlotrace.regions import (
    NONE,
    as_tensors,
    aval_of,
    close,
    describe_structure,
    evaluate,
    flatten,
    record,
    results,
    unflatten,
)
from hlotrace.source import user_location
from hlotrace.tensor import Tensor, tensor
from hlotrace.trace import REGIONS_TAG, Region

FAMILY = "control_flow"

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]


def _avals(region: Region, ids) -> list[Aval]:
    return [region.table.vars[v].aval for v in ids]


def _check_params(region: Region, avals, what: str) -> None:
    params = _avals(region, region.params)
    if list(avals) != params:
        raise ShapeDtypeError(
            f"{what} takes ({', '.join(map(str, params))}) but the operands are ({', '.join(map(str, avals))})"
        )


# -- inference and evaluation (lists of outputs) -------------------------------------------


def _switch_avals(index: Aval, *avals: Aval, branches) -> list[Aval]:
    if index.shape != () or index.dtype not in dt.INTEGER:
        raise ShapeDtypeError(f"the branch index must be an integer scalar, got {index}")
    if not branches:
        raise ShapeDtypeError("switch needs at least one branch")
    out = _avals(branches[0], branches[0].results)
    for i, branch in enumerate(branches):
        _check_params(branch, avals, f"branch {i}")
        if _avals(branch, branch.results) != out:
            raise ShapeDtypeError(f"branch {i} returns other shapes/dtypes than branch 0")
    return out


def _switch_eval(index, *arrays, branches) -> list:
    return evaluate(branches[int(np.clip(index, 0, len(branches) - 1))], arrays)


def _while_avals(*avals: Aval, cond, body, num_carry) -> list[Aval]:
    _check_params(cond, avals, "cond")
    _check_params(body, avals, "body")
    if _avals(cond, cond.results) != [Aval((), dt.bool_)]:
        raise ShapeDtypeError("cond must return one bool scalar")
    carry = list(avals[:num_carry])
    if _avals(body, body.results) != carry:
        raise ShapeDtypeError("body must return the carry's shapes and dtypes")
    return carry


def _while_eval(*arrays, cond, body, num_carry) -> list:
    carry, captures = list(arrays[:num_carry]), list(arrays[num_carry:])
    while bool(evaluate(cond, carry + captures)[0]):
        carry = evaluate(body, carry + captures)
    return carry


def _scan_avals(*avals: Aval, body, num_carry, num_xs, length, reverse, saved_carries=False, unroll=1) -> list[Aval]:
    if not isinstance(unroll, int) or unroll < 1:
        raise ShapeDtypeError(f"unroll must be a positive int, got {unroll!r}")
    xs = avals[num_carry : num_carry + num_xs]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise ShapeDtypeError(f"every xs operand must have leading size {length}, got {x}")
    params = [*avals[:num_carry], *(Aval(x.shape[1:], x.dtype) for x in xs), *avals[num_carry + num_xs :]]
    _check_params(body, params, "body")
    out = _avals(body, body.results)
    if out[:num_carry] != list(avals[:num_carry]):
        raise ShapeDtypeError("body must return the carry's shapes and dtypes first")
    return [*out[:num_carry], *(Aval((length, *y.shape), y.dtype) for y in out[num_carry:])]


def _scan_eval(*arrays, body, num_carry, num_xs, length, reverse, saved_carries=False, unroll=1) -> list:
    carry = list(arrays[:num_carry])
    xs, captures = arrays[num_carry : num_carry + num_xs], list(arrays[num_carry + num_xs :])
    y_avals = _avals(body, body.results[num_carry:])
    ys = [np.empty((length, *a.shape), a.dtype) for a in y_avals]
    for t in reversed(range(length)) if reverse else range(length):
        out = evaluate(body, carry + [x[t] for x in xs] + captures)
        carry = out[:num_carry]
        for stacked, y in zip(ys, out[num_carry:], strict=True):
            stacked[t] = y
    return carry + ys


def _single(fn):
    """An OpDef's infer/reference: one output as itself, any other number as a tuple (the
    registry's convention for several results)."""

    def one(*args, **attrs):
        out = fn(*args, **attrs)
        return out[0] if len(out) == 1 else tuple(out)

    return one


def _apply(name: str, inputs, attrs: dict) -> tuple[Tensor, ...]:
    """Every output of control-flow op ``name`` applied by the one dispatcher."""
    return results(apply(OPS[name], *inputs, **attrs))


# -- the user-facing functions --------------------------------------------------------------


def _error(message: str, location) -> OpError:
    return OpError(message + (f" at {location}" if location else ""))


def _scalar(value, what: str, location) -> Tensor:
    """``value`` (Tensor or Python bool/int), checked to be a bool or integer scalar."""
    if not isinstance(value, Tensor):
        if not isinstance(value, bool | int | np.bool_ | np.integer):
            raise _error(f"{what} must be a bool or integer scalar, got {type(value).__name__}", location)
        value = tensor(value)
    if value.shape != () or not (value.dtype == dt.bool_ or value.dtype in dt.INTEGER):
        raise _error(
            f"{what} must be a scalar (shape ()) of bool or integer dtype, got {dt.short_name(value.dtype)}"
            f"{list(value.shape)}",
            location,
        )
    return value


def _as_index(value, what: str, location) -> Tensor:
    """An int32 scalar branch index."""
    value = _scalar(value, what, location)
    return value if value.dtype == dt.int32 else F.astype(value, dt.int32)


def _as_predicate(value, what: str, location) -> Tensor:
    """A bool scalar (an integer is true where nonzero)."""
    value = _scalar(value, what, location)
    return value if value.dtype == dt.bool_ else F.not_equal(value, 0)


def _operand_leaves(tree, what: str, location):
    leaves, structure, paths = flatten(tree)
    return as_tensors(leaves, what, location), structure, paths


def _check_same(expected, got, paths, what: str, location, leaf_what: str, names) -> None:
    """Raise naming the first leaf whose shape/dtype differs (or the structures)."""
    if expected[0] != got[0]:
        raise _error(
            f"{what}: the structures differ: {describe_structure(expected[0])} in {names[0]}, "
            f"{describe_structure(got[0])} in {names[1]}",
            location,
        )
    for path, a, b in zip(paths, expected[1], got[1], strict=True):
        if a != b:
            raise _error(f"{what}: {leaf_what}{path} is {a} in {names[0]} but {b} in {names[1]}", location)


def switch(index, branches, *operands):
    """``branches[index](*operands)``, with ``index`` clamped to ``[0, len(branches) - 1]``
    (eagerly and compiled). Every branch is recorded and must return the same structure,
    shapes and dtypes; only the selected one runs.

    >>> F.switch(k, [lambda x: x + 1, lambda x: x * 2, F.tanh], x)
    """
    location = user_location()
    index = _as_index(index, "F.switch: the index", location)
    branches = list(branches)
    if not branches:
        raise _error("F.switch needs at least one branch", location)
    names = [f"branch {i} of F.switch" for i in range(len(branches))]
    return _switch(index, branches, operands, names, "F.switch", location)


def cond(pred, true_fn, false_fn, *operands):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``; ``pred`` is a bool or
    integer scalar (nonzero is true). Both branches are recorded and must return the same
    structure, shapes and dtypes; only the taken one runs.

    >>> y = F.cond(x.sum() > 0, lambda x: x * 2, lambda x: -x, x)
    """
    location = user_location()
    index = _as_index(_as_predicate(pred, "F.cond: the predicate", location), "F.cond", location)
    names = ["false_fn of F.cond", "true_fn of F.cond"]
    return _switch(index, [false_fn, true_fn], operands, names, "F.cond", location)


def _switch(index, fns, operands, names, api: str, location):
    tensors, structure, _ = _operand_leaves(operands, f"{api} operands", location)
    avals = [aval_of(t) for t in tensors]
    recorded = [record(fn, structure, avals, name, location) for fn, name in zip(fns, names, strict=True)]
    first = recorded[0]
    for name, other in zip(names[1:], recorded[1:], strict=False):
        _check_same(
            (first.structure, first.out_avals),
            (other.structure, other.out_avals),
            first.paths,
            "the branches return different outputs",
            location,
            "output",
            (names[0], name),
        )
    regions, captures = close(recorded)
    outs = _apply("switch", [index, *tensors, *captures], {"branches": tuple(regions)})
    return unflatten(first.structure, outs)


def while_loop(cond_fn, body_fn, init):
    """``carry = init; while cond_fn(carry): carry = body_fn(carry)``; returns the carry.

    ``body_fn`` must keep the carry's structure, shapes and dtypes; ``cond_fn`` returns a
    bool or integer scalar. The trip count may depend on values (compiled as
    ``stablehlo.while``), so it is not reverse-differentiable: use :func:`scan` or
    :func:`fori_loop` with int bounds for gradients.

    >>> F.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2), (i0, x))
    """
    location = user_location()
    tensors, structure, paths = _operand_leaves(init, "F.while_loop init", location)
    avals = [aval_of(t) for t in tensors]
    args = (tuple, (structure,))

    def predicate(carry):
        p = cond_fn(carry)
        return _as_predicate(p, "F.while_loop: the value cond_fn returns", location)

    c = record(predicate, args, avals, "cond_fn of F.while_loop", location)
    b = record(body_fn, args, avals, "body_fn of F.while_loop", location)
    _check_same(
        (structure, avals),
        (b.structure, b.out_avals),
        paths,
        "F.while_loop: body_fn changes the carry",
        location,
        "carry",
        ("init", "body_fn's result"),
    )
    (cond_region, body_region), captures = close([c, b])
    attrs = {"cond": cond_region, "body": body_region, "num_carry": len(tensors)}
    return unflatten(structure, _apply("while_loop", [*tensors, *captures], attrs))


def _count(structure) -> int:
    """How many leaves ``structure`` holds."""
    if structure is None:
        return 1
    if structure == NONE:
        return 0
    children = structure[2] if structure[0] is dict else structure[1]
    return sum(_count(c) for c in children)


def scan(fn, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``fn(carry, x) -> (carry, y)`` over the leading axis of ``xs``; returns
    ``(last carry, ys)`` with the ys stacked along a new leading axis (in index order, also
    when ``reverse`` runs from the end). ``xs=None`` runs ``length`` steps with ``x=None``.
    ``unroll=k`` (compiled) runs k steps per loop iteration: fewer iterations, a bigger body
    (``unroll=True``: no loop); results are the same.

    >>> def step(h, x):
    ...     h = F.tanh(h @ w + x)
    ...     return h, h
    >>> h, hs = F.scan(step, h0, xs)
    """
    location = user_location()
    carry, c_structure, c_paths = _operand_leaves(init, "F.scan init", location)
    if xs is None:
        x_tensors, x_structure, x_paths = [], NONE, []
    else:
        x_tensors, x_structure, x_paths = _operand_leaves(xs, "F.scan xs", location)
    sizes = {}
    for path, x in zip(x_paths, x_tensors, strict=True):
        if x.ndim == 0:
            raise _error(f"F.scan: xs{path} is a scalar; every xs leaf needs a leading axis to scan over", location)
        sizes.setdefault(x.shape[0], f"xs{path}")
    if length is not None:
        sizes.setdefault(int(length), "length=")
    if len(sizes) > 1:
        described = ", ".join(f"{name} has {n}" for n, name in sizes.items())
        raise _error(f"F.scan: xs have different leading sizes ({described})", location)
    if not sizes:
        raise _error("F.scan needs xs or length=", location)
    (steps,) = sizes
    c_avals = [aval_of(t) for t in carry]
    x_avals = [Aval(t.shape[1:], t.dtype) for t in x_tensors]
    body = record(fn, (tuple, (c_structure, x_structure)), c_avals + x_avals, "the body of F.scan", location)
    if body.structure is None or body.structure[0] not in (tuple, list) or len(body.structure[1]) != 2:
        raise _error(f"F.scan: the body must return (carry, y), got {describe_structure(body.structure)}", location)
    n_carry = _count(body.structure[1][0])
    _check_same(
        (c_structure, c_avals),
        (body.structure[1][0], body.out_avals[:n_carry]),
        c_paths,
        "F.scan: the body changes the carry",
        location,
        "carry",
        ("init", "the body's result"),
    )
    (region,), captures = close([body])
    attrs = {
        "body": region,
        "num_carry": len(carry),
        "num_xs": len(x_tensors),
        "length": steps,
        "reverse": bool(reverse),
    }
    if unroll is True or (not isinstance(unroll, bool) and isinstance(unroll, int) and unroll > steps):
        unroll = max(steps, 1)
    if isinstance(unroll, bool) or not isinstance(unroll, int) or unroll < 1:
        raise _error(f"F.scan: unroll must be a positive int or True, got {unroll!r}", location)
    if unroll != 1:
        attrs["unroll"] = unroll
    taped = any(tape.key(t) is not None for tape in TAPES for t in (*carry, *x_tensors, *captures))
    if taped and any(dt.is_floating(t.dtype) for t in carry):
        # The VJP re-runs each step from the carry it started from: output those too.
        saved = region.params[: len(carry)]
        region = Region(region.params, region.records, region.results + saved, region.table)
        attrs.update(body=region, saved_carries=True)
    outs = _apply("scan", [*carry, *x_tensors, *captures], attrs)
    n_out = len(carry) + len(body.out_avals) - n_carry
    return unflatten(c_structure, outs[: len(carry)]), unflatten(body.structure[1][1], outs[len(carry) : n_out])


def fori_loop(lower, upper, body_fn, init):
    """``x = init; for i in range(lower, upper): x = body_fn(i, x)``; ``i`` is an int32 tensor.

    Python-int bounds run a :func:`scan` (differentiable); tensor bounds a
    :func:`while_loop` (the trip count may depend on values; not differentiable).

    >>> F.fori_loop(0, 3, lambda i, x: x * 2 + i, x)
    """
    if isinstance(lower, int) and isinstance(upper, int):

        def step(carry, _):
            i, x = carry
            return (i + 1, body_fn(i, x)), None

        (_, out), _ = scan(step, (tensor(lower, dtype=dt.int32), init), length=max(upper - lower, 0))
        return out
    location = user_location()
    lower = _scalar(lower, "F.fori_loop: lower", location)
    upper = _scalar(upper, "F.fori_loop: upper", location)

    def body(carry):
        i, x = carry
        return i + 1, body_fn(i, x)

    return while_loop(lambda carry: carry[0] < upper, body, (lower, init))[1]


# -- registration ----------------------------------------------------------------------------


def _register():
    ops = {
        "switch": (
            _switch_avals,
            _switch_eval,
            grad.switch_vjp,
            "the branch region at the (clamped) index applied to the operands",
        ),
        "while_loop": (
            _while_avals,
            _while_eval,
            grad.WHILE_LOOP_VJP,
            "the body region applied while the cond region is true",
        ),
        "scan": (_scan_avals, _scan_eval, grad.scan_vjp, "the body region over the leading axis of xs, ys stacked"),
    }
    for name, (infer, reference, vjp, doc) in ops.items():
        register_op(
            OpDef(
                name=name,
                family=FAMILY,
                reference=_single(reference),
                infer=_single(infer),
                sample=grad.SAMPLES[name],
                vjp=vjp,
                doc=doc,
                tags=frozenset({REGIONS_TAG}),
            )
        )


_register()
