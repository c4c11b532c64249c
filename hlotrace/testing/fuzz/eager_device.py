"""The ``eager-device`` oracle: each program run eagerly under the device eager engine.

Every record of the program is applied eagerly, in program order, with
``hlotrace.engines.eager_engine("device")`` (each op application a cached one-op executable
built from the op's own lowering rule, :mod:`hlotrace.engines.device`), and each output is
compared with

- the compiled module's result (one XLA program, fused): bitwise where the spmd oracle's
  compiled-vs-compiled comparison is bitwise (an output computed only by elementwise ops,
  hlotrace.testing.fuzz.spmd.bitwise_output), else within the output's tolerance without the
  sign of zero, leaving out elements the float64 judge says the program does not determine
  at its precision (XLA folds a constant input at compile time, the engine computes it); and
- the eager NumPy result, with the compiled oracle's own test (the tolerance table, the
  float64 judge, ill-conditioned elements left out).

An output the compiled module already gets wrong is not compared (that is a rule bug, and
the one-op executables share the rule). A disagreement, or an application that fails under
the device engine although the whole program compiled and ran, is an **engine bug** (class
``ENGINE_BUG``, oracle ``eager-device``); a bitwise difference in subnormals and zeros only
is an XLA disagreement (XLA:CPU flushes some subnormals in fusions).

Which programs it runs on (``Oracles.eager_device``): ``"all"``, ``"short"`` (the default:
programs of at most :data:`SHORT_RECORDS` records, whose one-op compiles are few, and in a
session one program in :data:`SHORT_EVERY`), or ``"off"``.
"""

from __future__ import annotations

import numpy as np

from hlotrace.dispatch import apply
from hlotrace.engines import device_engine, eager_engine
from hlotrace.ops.registry import OPS
from hlotrace.tensor import Tensor

MODES = ("off", "short", "all")
DEFAULT_MODE = "short"
# "short": programs of at most SHORT_RECORDS records (each op application is one compile),
# in a session one program in SHORT_EVERY: measured on this 2-core machine, "all" made a
# session of 50 programs 2.6x slower (43 s instead of 16.5 s, every pass checked), "short"
# without the rotation 2.3x; one in four of the short ones costs about a sixth more.
SHORT_RECORDS = 8
SHORT_EVERY = 4
ORACLE = "eager-device"


def runs_on(program, mode: str | None, rotate: int | None = None) -> str | None:
    """None when the oracle runs on ``program`` under ``mode`` (``rotate``: the program's
    index in a fuzzing session); else why it does not."""
    if mode is None or mode == "off":
        return "eager-device: not asked for (--eager-device off)"
    if mode == "short" and len(program.trace.records) > SHORT_RECORDS:
        return f"eager-device: more than {SHORT_RECORDS} records (--eager-device all runs it)"
    if mode == "short" and rotate is not None and rotate % SHORT_EVERY:
        return f"eager-device: one program in {SHORT_EVERY} (--eager-device all runs it on every one)"
    if not program.trace.records:
        return "eager-device: the program has no ops"
    return None


def run_eager_device(program) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The program's outputs, each record applied eagerly by the device engine, on the host:
    (the first run's, the second run's). On the CPU the engine runs a new op application
    first on an executable XLA compiled quickly (LLVM -O0, last bits may differ) while the
    optimized one compiles; the second run, after waiting for those, runs the optimized
    executables, which the bitwise comparison with the compiled module needs."""
    with eager_engine("device"):
        engine = device_engine()  # the engine itself (the selection may be a lazy placeholder)
        # Each op built anew from its rule as registered now (the engine keys its executables
        # by op, avals and attributes, not by rule: a rule replaced since, a test's planted
        # bug, would run stale); the in-process compile cache keeps the rebuild cheap.
        engine.clear()
        first = _run(program)
        engine.settle()
        return first, _run(program)


def _run(program) -> list[np.ndarray]:
    trace = program.trace
    env: dict[int, object] = {}
    for var_id, value in zip(trace.inputs, program.inputs, strict=True):
        env[var_id] = Tensor._from_array(np.asarray(value))
    for var_id, value in trace.constants.items():
        env[var_id] = Tensor._from_array(np.asarray(value))
    for record in trace.records:
        out = apply(OPS[record.op], *[env[v] for v in record.inputs], **record.attrs)
        outs = out if len(record.outputs) > 1 else (out,)
        for var_id, tensor in zip(record.outputs, outs, strict=True):
            env[var_id] = tensor
    return [np.asarray(env[v].numpy()) for v in trace.outputs]


def check_eager_device(run, base, base_bad) -> None:
    """The oracle on ``run`` (an oracles._Run whose compiled results are ``base``, wrong
    where ``base_bad``): findings of oracle ``eager-device`` go to its verdict."""
    from hlotrace import runtime  # lazy: loads runtime (7 modules)
    from hlotrace.testing.fuzz.compare import (  # lazy: loads testing.fuzz.compare (5 modules)
        bit_differences,
        disagreeing,
        first_diff,
        only_subnormals,
    )
    from hlotrace.testing.fuzz.oracles import (
        ENGINE_BUG,
        UNDEFINED_INPUT,
        XLA_DISAGREEMENT,
        _narrow,
        domain_violation,
    )  # cycle: testing.fuzz.oracles imports this module
    from hlotrace.testing.fuzz.spmd import _spmd_bad, bitwise_output  # lazy: loads testing.fuzz.spmd (1 module)

    program, verdict = run.program, run.verdict
    why = runs_on(program, run.oracles.eager_device, run.oracles.rotate)
    if why is None and run.oracles.platform is not None:
        engine, compiled = runtime.platform_name(None), runtime.platform_name(run.oracles.platform)
        if engine != compiled:
            why = f"eager-device: the device engine runs on {engine}, the compiled oracle on {compiled}"
    if why is not None:
        verdict.skipped[ORACLE] = why
        return
    try:
        quick, results = run_eager_device(program)
    except Exception as exc:  # the whole program compiled and ran: an application must too
        run.add(ENGINE_BUG, ORACLE, None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return
    for k, (first, actual, compiled) in enumerate(zip(quick, results, base, strict=True)):
        if base_bad[k]:
            continue  # the compiled module is wrong here already: a rule bug, the same rule
        var_id = program.trace.outputs[k]
        if np.shape(actual) != np.shape(compiled) or np.shape(first) != np.shape(compiled):
            run.add(ENGINE_BUG, ORACLE, k, f"shape {np.shape(actual)}, compiled {np.shape(compiled)}")
            continue
        found = False
        for value, which in ((first, "first run"), (actual, "second run")):
            against_numpy = run.bad(k, value)
            if against_numpy.any():
                evidence = (
                    f"{first_diff(value, run.eager[k], against_numpy)} ({which}; the compiled module agrees with eager)"
                )
                reason = domain_violation(program, var_id)
                run.add(
                    UNDEFINED_INPUT if reason else ENGINE_BUG,
                    ORACLE,
                    k,
                    f"{evidence}; {reason}" if reason else evidence,
                )
                found = True
                break
        if found:
            continue
        exact = bitwise_output(program, var_id)
        bad = bit_differences(actual, compiled) if exact else _spmd_bad(run, k, actual, compiled)
        if bad.any() and not exact:
            # Where eager NumPy is itself off from the float64 judge (cancellation, overflow)
            # the program does not determine the value at its precision: constant folding in
            # the compiled module and the engine's runtime arithmetic may both be right.
            undefined = bad & disagreeing(run.eager[k], _narrow(run.judge[k], run.eager[k].dtype), run.tolerances[k])
            if undefined.any():
                bad &= ~undefined
                verdict.skipped[f"{ORACLE} output {k}"] = (
                    f"eager-device: {int(undefined.sum())} element(s) the float64 re-execution says are undefined "
                    "at this precision, not compared with the compiled module"
                )
        if not bad.any():
            continue
        diff = first_diff(actual, compiled, bad).replace(", eager ", ", compiled ")
        evidence = f"{diff} ({'bitwise' if exact else 'within the tolerance'} vs the compiled module)"
        if exact and only_subnormals(actual, compiled, bad):
            run.add(XLA_DISAGREEMENT, ORACLE, k, f"{evidence}; only subnormals and zeros differ (XLA:CPU flushes)")
        elif _flushing_explains(run, k, bad, actual):
            # log(1.17e-38) - itself: NaN on the engine (the operand flushed to 0 at run time),
            # 0 compiled (XLA folded the constant without flushing), 0 in NumPy.
            run.add(
                XLA_DISAGREEMENT,
                ORACLE,
                k,
                f"{evidence}; the engine's value is eager's with subnormals flushed (XLA:CPU flushes them at "
                "run time; the compiled module folded them as constants)",
            )
        else:
            run.add(ENGINE_BUG, ORACLE, k, evidence)


def _flushing_explains(run, k: int, bad, actual) -> bool:
    """Whether every element of output ``k`` in ``bad`` is eager's value on flushed subnormals
    (``run.alternative``) where flushing is what changes eager's value."""
    from hlotrace.testing.fuzz.compare import mismatches_or_shape  # lazy: loads testing.fuzz.compare (5 modules)

    flushed, tolerance = run.alternative[k], run.tolerances[k]
    if flushed is None or np.shape(flushed) != np.shape(actual):
        return False
    changed = mismatches_or_shape(run.eager[k], flushed, tolerance)
    return not (bad & mismatches_or_shape(actual, flushed, tolerance)).any() and bool(changed[bad].all())
