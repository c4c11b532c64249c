"""``apply``: the one entry through which every op application runs.

An op applied to Tensors (or Python scalars / array-likes) is checked and inferred here, then
computed by the eager engine -- the op's NumPy reference -- or, while a recording runs on
shapes only, not computed at all; the active recorder (hlotrace.recording) and every active
autodiff tape see the application.

Every op goes through here, control flow included: an op whose inference returns a tuple of
avals has that many results (a tuple of Tensors), and an op whose attributes hold closed
regions (``REGIONS_TAG``) needs nothing else from the dispatcher -- the regions are
attributes, its reference evaluates them, recorders adopt them into their var table, and
its VJP sees them as attributes too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.avals import Aval, describe_avals
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.recording import RECORDER, TAPES
from hlotrace.records import REGIONS_TAG
from hlotrace.source import user_location
from hlotrace.tensor import Tensor

if TYPE_CHECKING:
    from hlotrace.ops.registry import OpDef

__all__ = ["ENGINE", "apply", "describe_avals"]

# The eager engine (hlotrace.engines fills it): None runs each op's NumPy reference; else a
# callable ``(op, attrs, tensors, out_aval, key) -> Tensor | tuple`` (the device engine; ``key``
# is the application's inference key below, or None) with ``cached(key, buffers)``: the result
# of an application it has an executable for, run on those device buffers, else None.
ENGINE: list = [None]

# The ``_origin`` of the 0-d tensor a Python scalar operand becomes: never seen by the caller,
# never updated in place, so an engine may share one device buffer among equal ones.
SCALAR_OPERAND = "a Python scalar operand"

# (op, input avals, attributes) -> (canonical attributes, inferred aval or avals). Inference is
# a pure function of them, so an op applied again to tensors of the same shapes and dtypes
# (every step of a loop) skips canonicalization and inference. Applications whose attributes
# have no cheap hashable form (regions, arrays) are inferred every time. Cleared when full.
_INFERRED: dict = {}
INFERRED_CAPACITY = 1 << 16


def _aval(value, _new=tuple.__new__) -> Aval:
    """The Aval of a tensor's host array or device buffer (the hot path: no NamedTuple __new__)."""
    return _new(Aval, (value.shape, value.dtype))


def _inference_key(op, avals, attrs):
    if not attrs:
        return (op, avals)
    if REGIONS_TAG in op.tags:  # closed sub-programs: a new object per application
        return None
    try:
        key = (op, avals, tuple([(name, _attr_key(value)) for name, value in sorted(attrs.items())]))
        hash(key)
    except TypeError:  # an array, a dict: no key
        return None
    return key


def _attr_key(value):
    """``value`` as a key that tells apart what ``==`` does not: 1, 1.0 and True (another
    dtype), 0.0 and -0.0 (another sign), NaN and NaN (equal here). A slice (unhashable
    before Python 3.12; getitem's index) is keyed by its three fields."""
    kind = type(value)
    if kind is float or isinstance(value, np.floating):
        return (kind, repr(value))
    if kind is tuple or kind is list:
        return (kind, tuple([_attr_key(v) for v in value]))
    if kind is slice:
        return (kind, _attr_key(value.start), _attr_key(value.stop), _attr_key(value.step))
    return (kind, value)


def _op_error(op: OpDef, message: str, avals) -> OpError:
    loc = user_location(2)
    where = f" at {loc}" if loc else ""
    return OpError(f"{op.name}: {message} (inputs: {describe_avals(avals)}){where}")


op_error = _op_error  # for the device engine: the same OpError the reference would raise


def apply(op: OpDef, *inputs, **attrs):
    """Apply ``op`` to tensors (or Python scalars / array-likes) and return a Tensor, or a
    tuple of Tensors for an op with several results (its inference returned a tuple).

    Runs the NumPy reference; inside a recording context also appends an OpRecord.

    >>> apply(OPS["add"], tensor([1.0]), 2.0).numpy()
    array([3.], dtype=float32)
    """
    engine = ENGINE[0]
    if engine is not None and not attrs and not TAPES and RECORDER.get() is None:
        # The device engine's steady state: operands already on the device, seen before with
        # these shapes and dtypes (the memo has the inference), nothing recording or taping.
        try:
            buffers = [x._device for x in inputs]  # AttributeError: a Python scalar
            avals = tuple([_aval(b) for b in buffers])  # AttributeError: a host tensor (None)
        except AttributeError:
            pass
        else:
            key = (op, avals)
            inferred = _INFERRED.get(key)
            if inferred is not None and type(inferred[1]) is not tuple:
                out = engine.cached(key, buffers)
                if out is None:  # not compiled yet (or a mesh is active): the engine's full path
                    out = engine(op, inferred[0], inputs, inferred[1], key)
                out._origin = user_location(2)
                return out
    if not hasattr(op, "infer"):  # an op's name (looked up), or not an op: registry.as_op
        from hlotrace.ops.registry import as_op  # cycle: ops.registry imports dispatch

        op = as_op(op)
    # Convert operands. Python scalars are weak: their dtype comes from the other inputs.
    tensors: list = list(inputs)
    converted = []  # positions of operands that were not Tensors: constants in a trace
    weak_positions = []
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor):
            continue
        kind = dt.python_scalar_kind(x)
        if kind is not None:
            weak_positions.append((i, kind))
            converted.append(i)
        else:
            converted.append(i)
            try:
                tensors[i] = Tensor._from_array(np.asarray(x, dtype=dt.dtype_of_value(x)))
            except ShapeDtypeError as exc:
                raise _op_error(op, f"input {i}: {exc}", ()) from None
    if weak_positions:
        positions = op.promote_inputs if op.promote_inputs is not None else range(len(inputs))
        strong = [tensors[p].dtype for p in positions if p < len(tensors) and isinstance(tensors[p], Tensor)]
        for i, kind in weak_positions:
            dtype = dt.promote(*strong, dt.Weak(kind))
            with np.errstate(over="ignore"):  # 1e10 as a float16 operand is inf, as in NumPy
                tensors[i] = scalar = Tensor._from_array(np.asarray(inputs[i], dtype=dtype))
            scalar._origin = SCALAR_OPERAND  # the device engine keeps one device copy per value

    avals = tuple([_aval(t._host if t._host is not None else t._device) for t in tensors])
    key = _inference_key(op, avals, attrs)
    inferred = _INFERRED.get(key) if key is not None else None
    if inferred is not None:
        attrs, out_aval = inferred
    else:
        try:
            if op.canonicalize is not None:
                attrs = op.canonicalize(avals, attrs)
            out_aval = op.infer(*avals, **attrs)
        except ShapeDtypeError as exc:
            raise _op_error(op, str(exc), avals) from None
        except TypeError as exc:  # unexpected/missing keyword attributes
            raise _op_error(op, f"bad attributes {sorted(attrs)}: {exc}", avals) from None
        if key is not None:
            if len(_INFERRED) >= INFERRED_CAPACITY:
                _INFERRED.clear()
            _INFERRED[key] = (attrs, out_aval)

    recorder = RECORDER.get()
    several = type(out_aval) is tuple  # a control-flow op's results
    if recorder is not None and recorder.abstract:
        # first_call='compiled': inference only; the compiled program computes the value.
        if several:
            out = tuple(Tensor._abstract(a.shape, a.dtype) for a in out_aval)
        else:
            out = Tensor._abstract(out_aval.shape, out_aval.dtype)
    elif (engine := ENGINE[0]) is not None:  # the device engine (hlotrace.engines)
        out = engine(op, attrs, tensors, out_aval, key)
    else:
        out = run_reference(op, attrs, tensors, out_aval)

    location = user_location(2)
    if recorder is not None:
        for i in converted:
            recorder.add_constant(tensors[i])
        recorder.record(op, attrs, tensors, out, location)
    elif several:
        for t in out:
            t._origin = location
    else:
        # Remembered so that a recording that closes over this tensor can say where it came from.
        out._origin = location
    for tape in TAPES:
        tape.record(op, attrs, tensors, out, location)
    return out


def run_reference(op: OpDef, attrs: dict, tensors, out_aval):
    """The NumPy engine: ``op``'s reference on the tensors' host values (copied from the
    device where they live there), as Tensors of ``out_aval`` (a tuple of them for several)."""
    arrays = [t.numpy() for t in tensors]
    try:
        with np.errstate(all="ignore"):
            result = op.reference(*arrays, **attrs)
    except (ValueError, ArithmeticError, IndexError) as exc:  # data-dependent refusals
        raise _op_error(op, str(exc), [_aval(a) for a in arrays]) from None
    if type(out_aval) is tuple:
        return tuple(_as_output(op, r, a) for r, a in zip(result, out_aval, strict=True))
    return _as_output(op, result, out_aval)


def _as_output(op: OpDef, result, aval: Aval):
    array = np.asarray(result)
    if array.dtype != aval.dtype:
        with np.errstate(over="ignore", invalid="ignore"):  # float16 overflow gives inf, as NumPy's own ops do
            array = array.astype(aval.dtype)
    if array.shape != aval.shape:
        raise AssertionError(
            f"internal error in op {op.name!r}: reference produced shape {array.shape}, inference said {aval.shape}"
        )
    return Tensor._from_array(array, checked=True)
