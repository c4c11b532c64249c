"""``hlotrace rules --matrix``: op x dtype x platform support, generated from the registries.

For each op, one example is drawn from its sample strategy (seed 0) and its array operands of
the first operand's dtype are retyped to every dtype hlotrace supports; the op's own
canonicalization and inference decide whether that dtype is accepted (nothing is compiled).
Per platform: whether a lowering rule exists for the op, and whether the generated property
tests cover that op and dtype there (``make test`` runs them on the CPU; ``make test-gpu``
on CUDA, which the table marks as not run unless a results file says otherwise).
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt

PLATFORMS = ("cpu", "cuda")


def _example(op):
    from hypothesis import HealthCheck, Phase, given, seed, settings

    from hlotrace.testing import strategies

    found = []

    @seed(0)
    @settings(max_examples=1, database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(op.sample(strategies))
    def draw(sample):
        found.append(sample)

    draw()
    return found[0] if found else None


def accepted_dtypes(op) -> list[str] | None:
    """Names of the dtypes the op's inference accepts for its primary operands, or None when
    the op has no sample strategy to start from."""
    from hlotrace.errors import ShapeDtypeError
    from hlotrace.ops.registry import Aval

    if op.sample is None:
        return None
    sample = _example(op)
    if sample is None:
        return None
    arrays = [a for a in sample.args if isinstance(a, np.ndarray)]
    if not arrays:
        return [dt.short_name(np.dtype(sample.attrs.get("dtype", "float32")))] if "dtype" in sample.attrs else []
    primary = arrays[0].dtype
    names = []
    for dtype in dt.SUPPORTED:
        avals = []
        for a in sample.args:
            if isinstance(a, np.ndarray):
                avals.append(Aval(a.shape, dtype if a.dtype == primary else a.dtype))
            elif isinstance(a, bool | int | float):
                continue  # Python scalars are weak: they take the other operands' dtype
        attrs = dict(sample.attrs)
        try:
            if op.canonicalize is not None:
                attrs = op.canonicalize(tuple(avals), attrs)
            op.infer(*avals, **attrs)
        except (ShapeDtypeError, TypeError, ValueError, KeyError):
            continue
        names.append(dt.short_name(dtype))
    return names


def matrix() -> dict:
    """``{"dtypes": [...], "ops": [{"op", "family", "dtypes": {name: {platform: status}}}]}``;
    status: "tested" (rule and property test for that dtype), "rule" (a rule, no test run
    there), "no rule", or absent when the inference refuses the dtype."""
    import hlotrace.lowering.rules  # noqa: F401  (fills RULES)
    from hlotrace.lowering import PLATFORM_RULES, RULES
    from hlotrace.ops import OPS
    from hlotrace.testing.check import admitted_dtypes

    columns = [dt.short_name(d) for d in dt.SUPPORTED]
    rows = []
    for op in sorted(OPS.values(), key=lambda o: (o.family, o.name)):
        accepted = accepted_dtypes(op)
        tested = set()
        if op.sample is not None:
            tested = {dt.short_name(np.dtype(d)) for d in admitted_dtypes(op) if d is not None}
            if admitted_dtypes(op) == (None,):
                tested = set(accepted or ())
        cells = {}
        for name in accepted or ():
            cells[name] = {
                platform: (
                    "no rule"
                    if op.name not in RULES and op.name not in PLATFORM_RULES.get(platform, {})
                    else "tested"
                    if platform == "cpu" and name in tested
                    else "rule"
                )
                for platform in PLATFORMS
            }
        rows.append({"op": op.name, "family": op.family, "sampled": accepted is not None, "dtypes": cells})
    return {"dtypes": columns, "platforms": list(PLATFORMS), "ops": rows}


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
        "T: rule and generated property test (CPU, `make test`); r: a rule, the property tests not run on that "
        "platform here (`make test-gpu` runs them on CUDA); X: no rule; -: the op's inference refuses the dtype; "
        "?: no sample strategy to probe from"
    )
    return "\n".join(lines)
