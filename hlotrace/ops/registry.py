"""The op registry: one :class:`OpDef` per op, and :func:`apply`, the single entry point
through which every op application runs (eager reference, and recording when a trace is
being recorded).

An op is declared once, in its family file under ``hlotrace/ops/``::

    register_op(OpDef(
        name="exp", family="elementwise",
        reference=np.exp,                       # eager NumPy reference
        infer=unary_float_infer,               # (*in_avals, **attrs) -> Aval | tuple[Aval]
        sample=lambda s: s.unary(dtypes=s.ALL),  # hypothesis strategy of OpSample
    ))
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import OpError, ShapeDtypeError
from hlotrace.source import user_location


class Aval(NamedTuple):
    """Abstract value: what the lowering needs to know about a tensor."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{dt.SHORT_NAMES.get(self.dtype, self.dtype)}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything hlotrace knows about one op, except its lowering rule.

    Fields:
      name: registry key, also the name in traces and lowering rules.
      family: the ops/ file it lives in (elementwise, reduction, linalg, shape, indexing).
      reference: eager NumPy implementation ``(*arrays, **attrs) -> array``; its result is
        cast to the inferred dtype, so it may compute in a wider type.
      infer: shape/dtype inference ``(*avals, **attrs) -> Aval``; raises ShapeDtypeError
        with a plain message for invalid inputs.
      sample: ``(strategies_module) -> SearchStrategy[OpSample]``; called only by tests, so
        ops never import hypothesis.
      canonicalize: optional ``(avals, attrs) -> attrs`` that normalizes attributes (negative
        axes, defaults) before inference; traces store the normalized form.
      promote_inputs: input positions whose dtypes decide a Python scalar operand's dtype
        (None: all of them).
      variadic: the op takes any number of tensor inputs (concat).
      vjp: reverse-mode rule ``vjp(ct, out, *inputs, **attrs) -> tuple`` written with
        registered ops (hlotrace.functional), one cotangent (or None for zero) per input; see
        :mod:`hlotrace.autodiff` for the contract. ``NOT_DIFFERENTIABLE`` marks ops whose
        result carries no gradient (comparisons, logic, integer results); ``None`` means
        nobody wrote one yet, and differentiating through the op is an error.
      domain: optional ``(*arrays, **attrs) -> str | None``: why these operand values lie
        outside the values the op defines a result for (None: inside). The op's sample
        stays inside; the fuzzer keeps programs inside and calls a disagreement there an
        undefined input.
      arity: optional number of tensor operands, for the fuzzer's operands of an op without
        a sample strategy. It wins over both signatures; without it the fuzzer counts the
        required positional parameters of ``infer``, or of ``reference`` when ``infer``
        takes ``*avals``, and tries 1-4 operands when both do.
    """

    name: str
    family: str
    reference: Callable[..., Any]
    infer: Callable[..., Aval]
    sample: Callable[[Any], Any] | None = None
    canonicalize: Callable[[tuple[Aval, ...], dict], dict] | None = None
    promote_inputs: tuple[int, ...] | None = None
    variadic: bool = False
    vjp: Callable[..., Any] | None = None
    doc: str = ""
    domain: Callable[..., str | None] | None = None
    tags: frozenset = field(default_factory=frozenset)
    arity: int | None = None


OPS: dict[str, OpDef] = {}

# OpDef.vjp for ops whose output carries no gradient (comparisons, logical ops, ...).
NOT_DIFFERENTIABLE = "not differentiable"

# Active autodiff tapes (hlotrace.autodiff.Tape), innermost last; apply() records into each.
TAPES: list = []

# How many Tape.backward calls are running: ops applied meanwhile belong to a backward pass
# (the Recorder marks their records; the remat pass tells forward from backward by it).
BACKWARD_DEPTH = [0]

# Named scopes entered with hlotrace.trace.scope(): (name, instance) pairs, outermost first.
# The Recorder tags each record with the outermost one (fuse-elementwise names composites by it).
SCOPES: list = []

# The nn.Modules being called, outermost first (their attribute names in the caller, the
# root by class name): the Recorder tags each record with the dotted path ("MLP.fc1"), and
# the lowering puts it in front of the location name ("MLP.fc1/rec3:matmul").
MODULE_PATH: list = []


def is_differentiable(op: OpDef) -> bool:
    """Whether gradients flow through ``op`` (it has, or should have, a VJP)."""
    return op.vjp is not NOT_DIFFERENTIABLE


def register_op(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; a second op of the same name is refused."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered (by family {OPS[op.name].family!r})")
    OPS[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; registered ops: {', '.join(sorted(OPS))}") from None


# The active recorder (see hlotrace.trace.Recorder), or None when running eagerly.
_RECORDER: contextvars.ContextVar = contextvars.ContextVar("hlotrace_recorder", default=None)


def current_recorder():
    return _RECORDER.get()


def describe_avals(avals) -> str:
    return ", ".join(str(a) for a in avals) if avals else "no inputs"


def _op_error(op: OpDef, message: str, avals) -> OpError:
    loc = user_location(2)
    where = f" at {loc}" if loc else ""
    return OpError(f"{op.name}: {message} (inputs: {describe_avals(avals)}){where}")


def apply(op: OpDef, *inputs, **attrs):
    """Apply ``op`` to tensors (or Python scalars / array-likes) and return Tensor(s).

    Runs the NumPy reference; inside a recording context also appends an OpRecord.

    >>> apply(get_op("add"), tensor([1.0]), 2.0).numpy()
    array([3.], dtype=float32)
    """
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
                tensors[i] = Tensor._from_array(np.asarray(inputs[i], dtype=dtype))

    avals = tuple(Aval(t.shape, t.dtype) for t in tensors)
    try:
        if op.canonicalize is not None:
            attrs = op.canonicalize(avals, attrs)
        out_aval = op.infer(*avals, **attrs)
    except ShapeDtypeError as exc:
        raise _op_error(op, str(exc), avals) from None
    except TypeError as exc:  # unexpected/missing keyword attributes
        raise _op_error(op, f"bad attributes {sorted(attrs)}: {exc}", avals) from None

    recorder = _RECORDER.get()
    if recorder is not None and recorder.abstract:
        # first_call='compiled': inference only; the compiled program computes the value.
        out = Tensor._abstract(out_aval.shape, out_aval.dtype)
    else:
        arrays = [t.numpy() for t in tensors]
        try:
            with np.errstate(all="ignore"):
                result = op.reference(*arrays, **attrs)
        except (ValueError, ArithmeticError, IndexError) as exc:  # data-dependent refusals
            raise _op_error(op, str(exc), avals) from None
        out = _as_output(op, result, out_aval)

    location = user_location(2)
    if recorder is not None:
        for i in converted:
            recorder.add_constant(tensors[i])
        recorder.record(op, attrs, tensors, out, location)
    else:
        # Remembered so that a recording that closes over this tensor can say where it came from.
        out._origin = location
    for tape in TAPES:
        tape.record(op, attrs, tensors, out, location)
    return out


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


from hlotrace.tensor import Tensor  # noqa: E402  (Tensor's methods call back into apply)
