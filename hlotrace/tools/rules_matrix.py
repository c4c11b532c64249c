"""``hlotrace rules --matrix``: op x dtype x platform support, generated from the registries.

A column is an op's *primary* dtype: the one its sample strategy draws through
``strategies.dtypes`` (what its property tests are split by; the first array operand's for a
strategy that draws none). For each op and dtype the matrix looks for one call the op
accepts (:func:`probe`): the op's sample strategy drawn (seed 0) with that primary dtype
forced on it -- regions, ``dtype`` attributes and operands alike -- and, when that draw
fails, an example drawn at each dtype the strategy admits with its primary operands and
``dtype`` attribute retyped. The op's own canonicalization and inference decide (nothing is
compiled); tests/tools/test_rules_matrix.py runs every cell's probe eagerly.
Per platform: whether a lowering rule exists for the op, and whether the generated property
tests cover that op and dtype there (``make test`` runs them on the CPU; ``make test-gpu``
on CUDA, which the table marks as not run unless a results file says otherwise).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import describe_avals
from hlotrace.errors import ShapeDtypeError
from hlotrace.ops import OPS
from hlotrace.ops.gather.writes import VALUE_DEPENDENT_SHAPES
from hlotrace.ops.registry import Aval

PLATFORMS = ("cpu", "cuda")


def _is_array(value) -> bool:
    """An operand that is a tensor in ``ops.apply`` (Python and NumPy bool/int/float scalars
    there are weak: they take the other operands' dtype)."""
    return dt.python_scalar_kind(value) is None


def draw_example(op, dtype=None, force=False, example_seed=0):
    """The op's sample drawn with ``example_seed``: primary dtype ``dtype`` when its strategy
    admits it (always with ``force``), any without. None when the strategy cannot draw one
    (it refuses ``dtype`` outright)."""
    from hypothesis import HealthCheck, Phase, given, seed, settings

    import hlotrace.testing.strategies as strategies  # lazy: loads testing.strategies (4 modules)

    found = []

    @seed(example_seed)
    @settings(max_examples=1, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(op.sample(strategies))
    def draw(sample):
        found.append(sample)

    with strategies.pinned_dtype(dtype, force=force):
        try:
            draw()
        except Exception:  # a forced dtype the strategy cannot draw values of
            return None
    return found[0] if found else None


def avals_of(sample) -> tuple:
    """The Avals of a sample's array operands (Python scalars are weak and take theirs)."""
    return tuple(Aval(np.shape(a), dt.dtype_of_value(a)) for a in sample.args if _is_array(a))


def accepts(op, sample) -> bool:
    """Whether ``op``'s canonicalization and inference accept the sample, refusing exactly
    what ``ops.apply`` turns into an OpError (a bad dtype or shape, bad attributes)."""
    attrs = dict(sample.attrs)
    avals = avals_of(sample)
    try:
        if op.canonicalize is not None:
            attrs = op.canonicalize(avals, attrs)
        op.infer(*avals, **attrs)
    except (ShapeDtypeError, TypeError):
        return False
    return True


def _retyped(sample, primary, dtype):
    """The sample with every array operand of dtype ``primary`` and a ``dtype`` attribute
    naming it turned into ``dtype``."""
    with np.errstate(all="ignore"):
        args = tuple(
            np.asarray(a).astype(dtype) if _is_array(a) and np.asarray(a).dtype == primary else a for a in sample.args
        )
    attrs = dict(sample.attrs)
    if "dtype" in attrs and attrs["dtype"] is not None and dt.canonicalize(attrs["dtype"]) == primary:
        attrs["dtype"] = dtype
    return replace(sample, args=args, attrs=attrs)


def admitted(op) -> tuple:
    """The primary dtypes ``op``'s strategy draws from; ``()`` when it draws none."""
    from hlotrace.testing.check import admitted_dtypes  # lazy: loads testing.check (6 modules)

    found = admitted_dtypes(op)
    return () if len(found) == 1 and found[0] is None else tuple(found)


def candidates(op, dtype, bases, example_seed=0):
    """The calls of ``op`` with primary dtype ``dtype`` that :func:`probe` tries, in order
    (drawn lazily): the strategy's example with ``dtype`` forced on it, then an example at
    each of ``bases`` (the dtypes the strategy admits) retyped to ``dtype``; for a strategy
    that draws no dtype, its example with its first array operand's dtype retyped."""
    dtype = np.dtype(dtype)
    if bases:
        forced = draw_example(op, dtype, force=True, example_seed=example_seed)
        if forced is not None:
            yield forced
        for base in bases:
            example = draw_example(op, base, example_seed=example_seed)
            if example is not None:
                yield _retyped(example, base, dtype)
        return
    example = draw_example(op, example_seed=example_seed)
    arrays = [np.asarray(a) for a in example.args if _is_array(a)] if example is not None else []
    if arrays:
        yield _retyped(example, arrays[0].dtype, dtype)


def probe(op, dtype, bases=None):
    """A sample (NumPy operands and attributes) of ``op`` with primary dtype ``dtype`` that
    the op's inference accepts, or None when it refuses every candidate."""
    if op.sample is None:
        return None
    bases = admitted(op) if bases is None else bases
    return next((sample for sample in candidates(op, dtype, bases) if accepts(op, sample)), None)


def describe(sample) -> str:
    """``"f32[2,3], i32[]; axis=1"``: a probe's operands and plain attributes."""

    def plain(value) -> bool:
        if isinstance(value, tuple | list):
            return all(plain(v) for v in value)
        return isinstance(value, bool | int | float | str | np.dtype | type(None))

    attrs = ", ".join(f"{k}={v!r}" for k, v in sample.attrs.items() if plain(v))
    return describe_avals(avals_of(sample)) + (f"; {attrs}" if attrs else "")


def matrix() -> dict:
    """``{"dtypes": [...], "ops": [{"op", "family", "dtypes": {name: {platform: status}},
    "probes": {name: "inputs; attrs"}}]}``; status: "tested" (rule and property test for
    that dtype), "rule" (a rule, no test run there), "no rule", or absent when the op's
    inference refuses every probe of that dtype."""
    import hlotrace.lowering.rules  # noqa: F401  lazy: loads jax (fills RULES)
    from hlotrace.lowering import PLATFORM_RULES, RULES  # lazy: loads jax

    columns = [dt.short_name(d) for d in dt.SUPPORTED]
    rows = []
    for op in sorted(OPS.values(), key=lambda o: (o.family, o.name)):
        bases = admitted(op) if op.sample is not None else ()
        probes = {dt.short_name(d): probe(op, d, bases) for d in dt.SUPPORTED} if op.sample is not None else {}
        accepted = {name: sample for name, sample in probes.items() if sample is not None}
        # The property tests run once per dtype the strategy admits (once in all without one).
        tested = {dt.short_name(np.dtype(d)) for d in bases} if bases else set(accepted)
        has_rule = {platform: op.name in RULES or op.name in PLATFORM_RULES.get(platform, {}) for platform in PLATFORMS}
        cells = {}
        for name in accepted:
            cells[name] = {
                platform: (
                    "no rule"
                    if not has_rule[platform]
                    else "tested"
                    if platform == "cpu" and name in tested
                    else "rule"
                )
                for platform in PLATFORMS
            }
        rows.append(
            {
                "op": op.name,
                "family": op.family,
                "sampled": op.sample is not None,
                "dtypes": cells,
                "probes": {name: describe(sample) for name, sample in accepted.items()},
            }
        )
    return {
        "dtypes": columns,
        "platforms": list(PLATFORMS),
        "ops": rows,
        "value_dependent_shapes": [dict(entry) for entry in VALUE_DEPENDENT_SHAPES],
        # Ops whose reference refuses values XLA accepts (OpDef.host_check): out-of-range
        # indices, integer negative powers.
        "value_checks": sorted(op.name for op in OPS.values() if op.host_check is not None),
    }


def text(report: dict) -> str:
    """One line per op: a column per dtype, ``T`` tested on CPU, ``r`` a rule without a test
    run there, ``-`` refused by the op's inference, ``X`` accepted but no rule."""
    columns = report["dtypes"]
    width = max(len(r["op"]) for r in report["ops"]) if report["ops"] else 2
    lines = [" " * width + "  " + "  ".join(f"{c:>4}" for c in columns) + "   (cpu/cuda)"]
    for row in report["ops"]:
        cells = []
        for c in columns:
            status = row["dtypes"].get(c)
            if status is None:
                cells.append(f"{'-':>4}" if row["sampled"] else f"{'?':>4}")
            else:
                marks = "".join({"tested": "T", "rule": "r", "no rule": "X"}[status[p]] for p in report["platforms"])
                cells.append(f"{marks:>4}")
        lines.append(f"{row['op']:<{width}}  " + "  ".join(cells))
    lines.append("")
    lines.append(
        "Columns: the op's primary dtype (its first operand's, or its dtype= attribute for ops that make tensors); "
        "each cell is one call probed with the op's own inference (--json lists the probes). "
        "T: rule and generated property test (CPU, `make test`); r: a rule, the property tests not run for that "
        "dtype or platform here (`make test-gpu` runs them on CUDA); X: no rule; -: the op's inference refuses the "
        "dtype (for control flow: with the sampled body); ?: no sample strategy to probe from"
    )
    if report.get("value_dependent_shapes"):
        lines.append("")
        lines.append("Value-dependent shapes (no static-shape executable; eager only):")
        for entry in report["value_dependent_shapes"]:
            lines.append(f"  {entry['expression']}")
            for key in ("numpy engine", "device engine", "compiled"):
                lines.append(f"    {key}: {entry[key]}")
    if report.get("value_checks"):
        lines.append("")
        lines.append(
            "Operand values the references refuse and XLA accepts (out-of-range indices, integer negative powers): "
            + ", ".join(report["value_checks"])
        )
        lines.append("    numpy engine: refused (OpError naming the op and the line)")
        lines.append(
            "    device engine: refused when the operand is on the host; XLA's result (clamped) when on the device"
        )
        lines.append("    compiled: XLA's result (a compiled program cannot raise)")
    return "\n".join(lines)
