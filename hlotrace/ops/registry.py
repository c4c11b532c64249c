"""The op registry: one :class:`OpDef` per op (:data:`OPS`), filled by the op families'
:func:`register_op` calls. Applying an op is :func:`hlotrace.dispatch.apply`'s job.

An op is declared once, in its family file under ``hlotrace/ops/``::

    register_op(OpDef(
        name="exp", family="elementwise",
        reference=np.exp,                       # eager NumPy reference
        infer=unary_float_infer,               # (*in_avals, **attrs) -> Aval | tuple[Aval]
        sample=lambda s: s.unary(dtypes=s.ALL),  # hypothesis strategy of OpSample
    ))

Control flow (``hlotrace/ops/control_flow.py``) is declared the same way and applied by the
same ``apply``: an op may have several results (its inference returns a tuple of avals),
hold closed regions among its attributes (``tags={REGIONS_TAG}``), and refuse reverse mode
(``vjp=ReverseModeRefused(...)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hlotrace.avals import Aval
from hlotrace.errors import argument_error

__all__ = [
    "NOT_DIFFERENTIABLE",
    "OPS",
    "Aval",
    "OpDef",
    "ReverseModeRefused",
    "get_op",
    "is_differentiable",
    "register_op",
]


@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything hlotrace knows about one op, except its lowering rule.

    Fields:
      name: registry key, also the name in traces and lowering rules.
      family: the ops/ file it lives in (elementwise, reduction, linalg, shape, indexing).
      reference: eager NumPy implementation ``(*arrays, **attrs) -> array``; its result is
        cast to the inferred dtype, so it may compute in a wider type.
      infer: shape/dtype inference ``(*avals, **attrs) -> Aval``; raises ShapeDtypeError
        with a plain message for invalid inputs. An op with several results (a control-flow
        op's) returns a tuple of Avals instead (any number but one: one result is an Aval);
        its ``reference`` then returns a sequence of arrays, one per result, and
        :func:`hlotrace.dispatch.apply` a tuple of Tensors.
      sample: ``(strategies_module) -> SearchStrategy[OpSample]``; called only by tests, so
        ops never import hypothesis.
      canonicalize: optional ``(avals, attrs) -> attrs`` that normalizes attributes (negative
        axes, defaults) before inference; traces store the normalized form.
      promote_inputs: input positions whose dtypes decide a Python scalar operand's dtype
        (None: all of them).
      variadic: the op takes any number of tensor inputs (concat).
      vjp: reverse-mode rule ``vjp(ct, out, *inputs, **attrs) -> tuple`` written with
        registered ops (hlotrace.functional), one cotangent (or None for zero) per input; for
        an op with several results ``ct`` and ``out`` are tuples. See :mod:`hlotrace.autodiff`
        for the contract. ``NOT_DIFFERENTIABLE`` marks ops whose result carries no gradient
        (comparisons, logic, integer results); a :class:`ReverseModeRefused` marks ops whose
        gradient is refused with a reason (while_loop); ``None`` means nobody wrote one yet,
        and differentiating through the op is an error.
      domain: optional ``(*arrays, **attrs) -> str | None``: why these operand values lie
        outside the values the op defines a result for (None: inside). The op's sample
        stays inside; the fuzzer keeps programs inside and calls a disagreement there an
        undefined input.
      tags: markers read by other layers: ``REGIONS_TAG`` (hlotrace.trace) for an op whose
        attributes hold closed regions (:class:`hlotrace.trace.Region`), which recorders
        move into their own var table.
      arity: optional number of tensor operands, for the fuzzer's operands of an op without
        a sample strategy. It wins over both signatures; without it the fuzzer counts the
        required positional parameters of ``infer``, or of ``reference`` when ``infer``
        takes ``*avals``, and tries 1-4 operands when both do.
      host_check: optional ``(avals, hosts, **attrs) -> str | None`` for an op whose
        reference refuses operand values that XLA silently accepts (an out-of-range index,
        clamped; an integer to a negative power): ``hosts`` holds each operand's host array,
        or None for one that lives only on the device. The device engine calls it before the
        op runs and raises the reference's error (an OpError) for the reason it returns; a
        value only on the device is not read (that would wait for it): XLA's result then.
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
    host_check: Callable[..., str | None] | None = None


OPS: dict[str, OpDef] = {}

# OpDef.vjp for ops whose output carries no gradient (comparisons, logical ops, ...).
NOT_DIFFERENTIABLE = "not differentiable"


@dataclass(frozen=True)
class ReverseModeRefused:
    """``OpDef.vjp`` of an op whose gradient is refused (``while_loop``: its trip count is
    known only at run time, so a backward pass could not size what it keeps). The op is
    taped like any other; a cotangent reaching it is an OpError
    ``<op>: <what> (the op at <file:line>): <why>``."""

    what: str
    why: str

    def message(self, name: str, location) -> str:
        at = f" (the op at {location})" if location else ""
        return f"{name}: {self.what}{at}: {self.why}"


def is_differentiable(op: OpDef) -> bool:
    """Whether gradients flow through ``op`` (it has, or should have, a VJP)."""
    return op.vjp is not NOT_DIFFERENTIABLE and not isinstance(op.vjp, ReverseModeRefused)


def register_op(op: OpDef) -> OpDef:
    """Add ``op`` to the registry; a second op of the same name is refused."""
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered (by family {OPS[op.name].family!r})")
    OPS[op.name] = op
    return op


def as_op(op) -> OpDef:
    """``op`` if it is an OpDef, the registered op of that name if it is a string
    (``apply("add", x, y)`` is ``apply(OPS["add"], x, y)``), else an ArgumentError."""
    if isinstance(op, OpDef):
        return op
    if isinstance(op, str) and op in OPS:
        return OPS[op]
    if isinstance(op, str):
        import difflib

        close = difflib.get_close_matches(op, OPS, n=3)
        hint = f" (close: {', '.join(close)})" if close else "; `hlotrace rules` lists them"
        raise argument_error("apply", "op", op, f"the name of a registered op{hint}")
    raise argument_error("apply", "op", op, "an OpDef (hlotrace.ops.OPS[name]) or an op's name")


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; registered ops: {', '.join(sorted(OPS))}") from None
