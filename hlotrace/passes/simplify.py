"""``simplify`` and ``elide-guards``: exact simplifications MLIR's ``canonicalize`` does not do.

Every rule keeps every result bit for every input (NaN, ±inf, -0.0 and subnormals
included; a NaN may come out with another payload, which no hlotrace op distinguishes):

``simplify``:

- identity ``reshape`` / ``convert`` / ``broadcast_in_dim`` / ``transpose`` → the operand;
  ``reshape∘reshape`` → one reshape; ``transpose∘transpose`` → one transpose (or none);
  ``convert∘convert`` that widens then narrows back (f16→f32→f16, f32→f64→f32, i32→i64→i32)
  → the operand. Not f64→f32→f64, which rounds.
- ``x + (-0.0)`` → x (IEEE: ``x + (+0.0)`` turns -0.0 into +0.0, so only -0.0 is the
  identity), integer ``x + 0`` → x; ``x - (+0.0)`` / ``x - 0`` → x; ``x * 1`` → x;
  ``x / 1`` → x (floats and integers). ``x - x`` and ``x * 0`` are NOT 0 (NaN, inf).

Each rule's exactness is checked bitwise by ``tests/passes/test_simplify.py`` on special values.

``elide-guards`` (a second rule table here) drops guards that cannot change any result:

- ``select(s == 0, +0.0, s)`` → s where s is a sum (init +0.0) of values that are never
  -0.0 (``exp``, ``abs``, ``x * x``): the -0.0 guard hlotrace's sum rule adds cannot fire.
- The NaN guard of a row max (``select(any(x != x), NaN, max(x))``) whose only use is a
  softmax (``e = exp(x - max)``, ``e / sum(e)`` over the same axes) is dropped: a NaN in a
  row makes that row's sum NaN, so every output of the row is NaN with or without it.

Under StableHLO's semantics the values are unchanged, but without the guards XLA:CPU
compiles the whole softmax into one YNNPACK fusion, whose exp and division differ from its
own loop's in the last bit (201,489 of 6.4M softmax outputs, by one ulp): so
``elide-guards`` is registered ``exact=False`` and is differentially tested within the
tolerance table. Its effect: the NaN-exact softmax at jax.jit's speed (BENCHMARKS.md).
"""

from __future__ import annotations

import math

from hlotrace.passes.registry import register_pass
from hlotrace.passes.rewrite import Match, RuleSet, transpose
from hlotrace.runtime.jaxlib_compat import ir, stablehlo

RULES = RuleSet("simplify")
GUARDS = RuleSet("elide-guards")


def _float(value) -> bool:
    return isinstance(Match.element_type(value), ir.FloatType)


def _is(value, element, negative_zero: bool | None = None) -> bool:
    """Whether ``value`` is a splat constant equal to ``element`` (and of that zero's sign)."""
    found = Match.splat(value)
    if found is None or isinstance(found, bool) or found != element:
        return False
    return negative_zero is None or (math.copysign(1.0, found) < 0) == negative_zero


# -- identities ---------------------------------------------------------------------------


@RULES.pattern("stablehlo.reshape", "identity-reshape")
@RULES.pattern("stablehlo.convert", "identity-convert")
def _identity(m: Match):
    """reshape / convert to the operand's own type: the operand."""
    (x,) = m.operands
    return x if x.type == m.results[0].type else None


@RULES.pattern("stablehlo.reshape", "reshape-of-reshape")
def _reshape_reshape(m: Match):
    """reshape(reshape(x)) → reshape(x)."""
    (inner,) = m.operands
    if not m.produced_by(inner, "stablehlo.reshape"):
        return None
    return stablehlo.ReshapeOp(m.results[0].type, m.producer(inner).operands[0]).result


@RULES.pattern("stablehlo.broadcast_in_dim", "identity-broadcast")
def _identity_broadcast(m: Match):
    """broadcast_in_dim to the operand's own type with dims 0..n-1: the operand."""
    (x,) = m.operands
    dims = list(ir.DenseI64ArrayAttr(m.attr("broadcast_dimensions")))
    return x if x.type == m.results[0].type and dims == list(range(len(dims))) else None


@RULES.pattern("stablehlo.transpose", "transpose-of-transpose")
def _transpose(m: Match):
    """transpose with the identity permutation → x; transpose(transpose(x, p), q) → one."""
    (x,) = m.operands
    perm = list(ir.DenseI64ArrayAttr(m.attr("permutation")))
    if perm == list(range(len(perm))):
        return x
    if not m.produced_by(x, "stablehlo.transpose"):
        return None
    inner = m.producer(x)
    first = list(ir.DenseI64ArrayAttr(inner.attributes["permutation"]))
    composed = [first[p] for p in perm]
    source = inner.operands[0]
    return source if composed == list(range(len(composed))) else transpose(source, composed)


# Widening conversions that are exact, so converting back gives the original bits.
_EXACT_WIDENING = {("f16", "f32"), ("f16", "f64"), ("bf16", "f32"), ("bf16", "f64"), ("f32", "f64"), ("i32", "i64")}


@RULES.pattern("stablehlo.convert", "convert-round-trip")
def _convert_round_trip(m: Match):
    """convert(convert(x: A → B) → A) → x when A → B is exact (widening)."""
    (mid,) = m.operands
    if not m.produced_by(mid, "stablehlo.convert"):
        return None
    x = m.producer(mid).operands[0]
    if x.type != m.results[0].type:
        return None
    pair = (str(m.element_type(x)), str(m.element_type(mid)))
    return x if pair in _EXACT_WIDENING else None


# -- arithmetic identities ----------------------------------------------------------------


@RULES.pattern("stablehlo.add", "add-zero")
def _add_zero(m: Match):
    """x + (-0.0) → x (floats), x + 0 → x (integers), either side."""
    for x, c in (m.operands, reversed(m.operands)):
        if _float(x) and _is(c, 0, negative_zero=True):
            return x
        if not _float(x) and _is(c, 0):
            return x
    return None


@RULES.pattern("stablehlo.subtract", "subtract-zero")
def _subtract_zero(m: Match):
    """x - (+0.0) → x (floats), x - 0 → x (integers)."""
    x, c = m.operands
    return x if _is(c, 0, negative_zero=False if _float(x) else None) else None


@RULES.pattern("stablehlo.multiply", "multiply-one")
def _multiply_one(m: Match):
    """x * 1 → x, either side."""
    for x, c in (m.operands, reversed(m.operands)):
        if _is(c, 1):
            return x
    return None


@RULES.pattern("stablehlo.divide", "divide-one")
def _divide_one(m: Match):
    """x / 1 → x."""
    x, c = m.operands
    return x if _is(c, 1) else None


# -- guards that cannot fire ----------------------------------------------------------------

# Ops whose results are never -0.0 (NaN aside): sums of them starting at +0.0 are never -0.0.
_NEVER_NEGATIVE_ZERO = ("stablehlo.exponential", "stablehlo.abs")


def _never_negative_zero(value) -> bool:
    op = Match.producer(value)
    if op is None:
        return False
    if op.name in _NEVER_NEGATIVE_ZERO:
        return True
    return op.name == "stablehlo.multiply" and op.operands[0] == op.operands[1]


def _single_add_reduce(op) -> bool:
    if op is None or op.name != "stablehlo.reduce" or len(op.results) != 1:
        return False
    body = list(op.regions[0].blocks[0].operations)
    return len(body) == 2 and body[0].operation.name == "stablehlo.add"


@GUARDS.pattern("stablehlo.select", "sum-zero-guard")
def _sum_zero_guard(m: Match):
    """select(s == 0, +0.0, s) → s for a sum s of values that are never -0.0."""
    pred, zero, s = m.operands
    cmp = m.producer(pred)
    if cmp is None or cmp.name != "stablehlo.compare" or cmp.operands[0] != s:
        return None
    if str(cmp.attributes["comparison_direction"]) != "#stablehlo<comparison_direction EQ>":
        return None
    if not (_is(cmp.operands[1], 0) and _is(zero, 0, negative_zero=False)):
        return None
    reduce = m.producer(s)
    if not _single_add_reduce(reduce) or not _is(reduce.operands[1], 0, negative_zero=False):
        return None
    return s if _never_negative_zero(reduce.operands[0]) else None


def _only_user(value, kind: str):
    users = Match.uses(value)
    if len(users) != 1 or users[0].operation.name != kind:
        return None
    return users[0].operation


def _row_broadcast(value, dims: tuple, rank: int):
    """Follow a per-row value (reduced over ``dims``) through single-use reshapes to the
    broadcast_in_dim that spreads it back over ``dims`` with every other dim in place;
    that broadcast op, or None."""
    while True:
        users = Match.uses(value)
        if len(users) != 1:
            return None
        user = users[0].operation
        if user.name == "stablehlo.reshape":
            value = user.results[0]
            continue
        if user.name != "stablehlo.broadcast_in_dim":
            return None
        return user if _spreads_rows(user, dims, rank) else None


def _spreads_rows(bcast, dims: tuple, rank: int) -> bool:
    """broadcast_in_dim from the reduced shape (kept dims in order) or the keepdims shape
    (size 1 at ``dims``, identity mapping): row r's value lands on row r."""
    mapping = list(ir.DenseI64ArrayAttr(bcast.attributes["broadcast_dimensions"]))
    shape = Match.shape(bcast.operands[0])
    kept = [d for d in range(rank) if d not in dims]
    if mapping == kept:
        return True
    return mapping == list(range(rank)) and all(shape[d] == 1 for d in dims)


def _row_value_source(value, dims: tuple, rank: int):
    """The per-row value a denominator broadcasts: through reshapes down from the broadcast."""
    op = Match.producer(value)
    if op is None or op.name != "stablehlo.broadcast_in_dim" or not _spreads_rows(op, dims, rank):
        return None
    value = op.operands[0]
    while Match.produced_by(value, "stablehlo.reshape"):
        value = Match.producer(value).operands[0]
    return value


def _sum_of(value, e, dims) -> bool:
    """Whether ``value`` is (a -0.0 guard around) a +0.0-started sum of ``e`` over ``dims``."""
    op = Match.producer(value)
    if op is not None and op.name == "stablehlo.select":
        value = op.operands[2]
        op = Match.producer(value)
    return (
        _single_add_reduce(op)
        and op.operands[0] == e
        and _is(op.operands[1], 0, negative_zero=False)
        and tuple(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) == dims
    )


def _reduce_input(value, op, combiner: str):
    """The operand that ``op`` (a possibly variadic reduce) reduces into ``value`` with
    ``combiner`` alone, else None."""
    results = list(op.results)
    index = next((i for i, r in enumerate(results) if r == value), None)
    if index is None:
        return None
    n = len(results)
    block = op.regions[0].blocks[0]
    ret = list(block.operations)[-1].operation
    combined = Match.producer(ret.operands[index])
    if combined is None or combined.name != combiner:
        return None
    args = list(block.arguments)
    if {a for a in combined.operands} != {args[index], args[n + index]}:
        return None
    return op.operands[index]


@GUARDS.pattern("stablehlo.select", "softmax-nan-guard")
def _softmax_nan_guard(m: Match):
    """select(any(x != x), NaN, max(x)) used only by a softmax of x → max(x)."""
    flag, nan, peak = m.operands
    nan_value = m.splat(nan)
    if not isinstance(nan_value, float) or not math.isnan(nan_value):
        return None
    flag_op, peak_op = m.producer(flag), m.producer(peak)
    if flag_op is None or peak_op is None or flag_op.name != "stablehlo.reduce" or peak_op.name != "stablehlo.reduce":
        return None
    dims = tuple(ir.DenseI64ArrayAttr(peak_op.attributes["dimensions"]))
    if tuple(ir.DenseI64ArrayAttr(flag_op.attributes["dimensions"])) != dims:
        return None
    x = _reduce_input(peak, peak_op, "stablehlo.maximum")
    test = _reduce_input(flag, flag_op, "stablehlo.or")
    if x is None or test is None:
        return None
    cmp = m.producer(test)  # the flag must be exactly "some x in the row is NaN"
    if cmp is None or cmp.name != "stablehlo.compare" or list(cmp.operands) != [x, x]:
        return None
    if str(cmp.attributes["comparison_direction"]) != "#stablehlo<comparison_direction NE>":
        return None
    rank = len(m.shape(x))
    bcast = _row_broadcast(m.results[0], dims, rank)
    if bcast is None or bcast.results[0].type != x.type:
        return None
    sub = _only_user(bcast.results[0], "stablehlo.subtract")
    if sub is None or sub.operands[0] != x or sub.operands[1] != bcast.results[0]:
        return None
    exp = _only_user(sub.results[0], "stablehlo.exponential")
    if exp is None:
        return None
    e = exp.results[0]
    users = [u.operation for u in Match.uses(e)]
    divides = [u for u in users if u.name == "stablehlo.divide"]
    sums = [u for u in users if u.name == "stablehlo.reduce"]
    if len(divides) + len(sums) != len(users) or not divides or not sums:
        return None
    for total in sums:  # only sums of e over the rows: NaN in a NaN row either way
        if not (_single_add_reduce(total) and tuple(ir.DenseI64ArrayAttr(total.attributes["dimensions"])) == dims):
            return None
    for divide in divides:
        if divide.operands[0] != e:
            return None
        row = _row_value_source(divide.operands[1], dims, rank)
        if row is None or not _sum_of(row, e, dims):
            return None
    return peak


@register_pass("simplify")
def simplify(module, options) -> None:
    """Exact algebraic simplifications canonicalize lacks: identity reshape/convert/transpose, x+(-0.0), x*1, ..."""
    RULES.apply(module)


@register_pass("elide-guards", exact=False)
def elide_guards(module, options) -> None:
    """Drop NaN and -0.0 guards that cannot change a result (a softmax's max, a sum of exps); XLA may then pick other kernels."""
    GUARDS.apply(module)
