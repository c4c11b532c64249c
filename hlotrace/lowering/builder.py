"""Trace → verified StableHLO module (``func.func public @main``).

One loop over the recorded ops, one rule per op (see :mod:`hlotrace.lowering.registry`).
Every emitted op carries the location ``rec<index>:<op>`` nested around the user's
``file:line`` (``:bwd`` appended for records of a backward pass, ``@<scope>#<instance>``
for records inside :func:`hlotrace.trace.scope`; see hlotrace.passes.locations); the name survives into compiled HLO as ``metadata={op_name=...}``.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

import hlotrace.lowering.hlo as hlo
import hlotrace.runtime.jaxlib_compat as jaxlib_compat
from hlotrace import config
from hlotrace.errors import LoweringError
from hlotrace.lowering.registry import RULES, LoweringRuleContext, lowering_for, rule_for
from hlotrace.ops.registry import Aval
from hlotrace.runtime.jaxlib_compat import func, ir, shared_context
from hlotrace.trace import Trace


@dataclass
class LoweredModule:
    """A StableHLO module plus the avals of its arguments and results."""

    module: ir.Module
    in_avals: list[Aval]
    out_avals: list[Aval]
    name: str
    pass_timings: tuple = ()  # hlotrace.passes.PassTiming per pass run over it

    def text(self, debug_info: bool = True) -> str:
        """MLIR text; with ``debug_info`` the ``loc(...)`` of every op is printed."""
        return self.module.operation.get_asm(enable_debug_info=debug_info)

    def __str__(self) -> str:
        return self.text()

    def op_counts(self) -> dict[str, int]:
        """How many ops of each StableHLO kind the module's @main holds."""
        counts: dict[str, int] = {}
        for op in main_function(self.module).body.blocks[0].operations:
            name = op.operation.name
            counts[name] = counts.get(name, 0) + 1
        return counts


def main_function(module: ir.Module, error: type[Exception] = LoweringError):
    """``func.func @main`` of ``module`` (the passes use it too, raising their PassError)."""
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op
    raise error("module has no func.func @main")


def _location(index: int, op_name: str, record_location, backward: bool = False, scope=None, path=None) -> ir.Location:
    name = f"rec{index}:{op_name}:bwd" if backward else f"rec{index}:{op_name}"
    if scope is not None:
        name = f"{name}@{scope[0]}#{scope[1]}"
    if path:
        name = f"{path}/{name}"  # Model Explorer nests "/"-separated names
    if record_location is None:
        return ir.Location.name(name)
    return ir.Location.name(name, childLoc=ir.Location.file(record_location.file, record_location.line, 0))


def _at(record) -> str:
    """`` at file:line (in fn)`` for error messages; built only when an error is raised."""
    return f" at {record.location}" if record.location else ""


def _missing_rule(index: int, record) -> LoweringError:
    return LoweringError(
        f"no lowering rule for op {record.op!r} (record {index}){_at(record)}; "
        f"ops with rules: {', '.join(sorted(RULES))}. Register one with @hlotrace.lowering.rule({record.op!r})."
    )


def lower_trace(
    trace: Trace,
    name: str | None = None,
    donate: dict[int, int] | None = None,
    spmd=None,
    platform=None,
    precision: str = "highest",
) -> LoweredModule:
    """Lower ``trace`` to a verified StableHLO module.

    ``donate`` maps input positions to the output positions that reuse their buffers
    (in-place state updates): PJRT then deletes the donated input after the call. None:
    the trace's own map (``Trace.donate``, kept in trace files), so a saved step lowers, in
    every tool, with the aliasing its function had.
    ``platform``: the platform the module will run on; its platform-scoped rules
    (``@rule(op, platform=...)``) win over the default ones (None: the default rules).
    ``spmd`` (hlotrace.distributed.compile.Plan, for many devices): the module gets its
    ``sdy.mesh``, Shardy shardings on every argument and result, and lowers
    ``sharding_constraint`` records on that mesh.
    ``precision``: the ``precision_config`` of every float32 ``dot_general`` and
    ``convolution``, ``"highest"``, ``"high"`` or ``"default"`` (StableHLO's HIGHEST, HIGH,
    DEFAULT; README, "Matmul precision"); an ArgumentError for another value.

    >>> lowered = lower_trace(fn.trace)
    >>> print(lowered.text())
    """
    if donate is None:
        donate = trace.donate or None
    with lowering_for(platform, precision):
        return _lower(trace, name, donate, spmd)


def module_name(name: str) -> str:
    """The module name XLA sees for a function called ``name`` (``jit_step``): it names
    the HloModule, hence ``XLA_FLAGS=--xla_dump_to``'s files (``module_0001.jit_step.*``).
    Every lowered module is named so: a saved trace lowers to the text its function did."""
    return "jit_" + (re.sub(r"[^\w.-]", "_", name) or "traced")


def _lower(trace: Trace, name, donate, spmd) -> LoweredModule:
    ctx = shared_context()
    in_avals = [trace.aval(v) for v in trace.inputs]
    out_avals = [trace.aval(v) for v in trace.outputs]
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        module.operation.attributes["sym_name"] = ir.StringAttr.get(module_name(name or trace.name))
        with ir.InsertionPoint(module.body):
            if spmd is not None:
                spmd.declare_mesh(module)
            ftype = ir.FunctionType.get([hlo.aval_type(a) for a in in_avals], [hlo.aval_type(a) for a in out_avals])
            main = func.FuncOp("main", ftype)
            main.attributes["sym_visibility"] = ir.StringAttr.get("public")
            if donate:
                jaxlib_compat.alias_arguments(main, len(in_avals), donate)
            if spmd is not None:
                spmd.annotate(main)
            block = main.add_entry_block()
        with ir.InsertionPoint(block), spmd.lowering() if spmd is not None else contextlib.nullcontext():
            env: dict[int, ir.Value] = dict(zip(trace.inputs, block.arguments, strict=True))
            _emit_constants(env, trace.constants, trace.constants, "")
            for index, record in enumerate(trace.records):
                _lower_record(trace, index, record, env, spmd)
            func.ReturnOp([env[v] for v in trace.outputs])
        _verify(module, trace, name or trace.name)
    return LoweredModule(module, in_avals, out_avals, name or trace.name)


# Where xla_trace writes every stage (hlotrace.jit reads the same variable).
DUMP_ENV = "HLOTRACE_DUMP_TO"


def _describe_diagnostic(trace: Trace, diagnostic) -> str:
    """``record 3 'add' at model.py:12 (in f): <message>`` when the location names a record."""
    match = re.search(r'"(?:[^"/]*/)?rec(\d+):', str(diagnostic.location))
    if match and int(match.group(1)) < len(trace.records):
        index = int(match.group(1))
        record = trace.records[index]
        return f"record {index} {record.op!r}{_at(record)}: {diagnostic.message}"
    return f"{diagnostic.location}: {diagnostic.message}"


def _verify(module: ir.Module, trace: Trace, name: str) -> None:
    """Run MLIR's verifier; a failure becomes a LoweringError naming the op and line.

    Each rule's result types are checked as it runs, so what reaches the verifier is an op
    that is internally inconsistent (bad dimension numbers, out-of-range slice bounds, ...).
    Its location ``rec<i>:<op>`` names the record; the last record lowered is named too.
    """
    try:
        module.operation.verify()
        return
    except ir.MLIRError as exc:
        diagnostics = [_describe_diagnostic(trace, d) for d in exc.error_diagnostics] or [str(exc)]
    last = ""
    if trace.records:
        index = len(trace.records) - 1
        record = trace.records[index]
        last = f"; the last op lowered was record {index} {record.op!r}{_at(record)}"
    directory = config.get(DUMP_ENV)
    if directory:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{name}.unverified.mlir")
        with open(path, "w") as f:
            f.write(module.operation.get_asm(enable_debug_info=True, print_generic_op_form=True))
        hint = f"the unverified module is in {path}"
    else:
        hint = f"set {DUMP_ENV}=DIR to write the unverified module to DIR/{name}.unverified.mlir"
    raise LoweringError(
        f"the lowered module {name!r} does not verify: {'; '.join(diagnostics)}{last}. A lowering rule built an "
        f"invalid op (the location rec<i>:<op> names its record); {hint}"
    )


def _emit_constants(env: dict, constants: dict, var_ids, prefix: str) -> None:
    """Each of ``var_ids``' captured data as a constant at the insertion point, located
    ``{prefix}const%<id>`` (``hlo.data_constant``: a -0.0 survives XLA's iota rewrite)."""
    for var_id in var_ids:
        with ir.Location.name(f"{prefix}const%{var_id}"):
            env[var_id] = hlo.data_constant(constants[var_id])


def _lower_record(trace: Trace, index: int, record, env: dict, spmd=None) -> None:
    fn = rule_for(record.op)  # an override, the platform's own rule, else the default
    if fn is None:
        raise _missing_rule(index, record)
    in_avals = tuple(trace.aval(v) for v in record.inputs)
    out_avals = tuple(trace.aval(v) for v in record.outputs)
    rule_ctx = LoweringRuleContext(in_avals, out_avals, record.op, index, record.location)
    with _location(
        index, record.op, record.location, index in trace.backward, trace.scopes.get(index), trace.paths.get(index)
    ):
        operands = [env[v] for v in record.inputs]
        if spmd is not None:  # layouts the partitioner must not choose (distributed.compile)
            operands = spmd.guard(record.op, operands, in_avals)
        try:
            results = fn(rule_ctx, *operands, **record.attrs)
        except LoweringError:
            raise
        except Exception as exc:
            raise LoweringError(
                f"lowering rule for {record.op!r} (record {index}){_at(record)} failed on inputs "
                f"{', '.join(map(str, in_avals))} with attrs {record.attrs}: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(results, list | tuple):
        results = [results]
    if len(results) != len(out_avals):
        raise LoweringError(
            f"lowering rule for {record.op!r} (record {index}){_at(record)} returned {len(results)} values, expected {len(out_avals)}"
        )
    if in_avals and all(0 in a.shape for a in in_avals):
        # The results do not depend on any data (a sum or matmul over an empty axis): XLA
        # folds them to a constant and then, e.g., 0.0 + y to y, which keeps y = -0.0 where
        # IEEE and NumPy give +0.0. Behind a barrier the constant is not seen.
        results = [
            v if 0 in aval.shape else hlo.hidden_from_folding(v) for v, aval in zip(results, out_avals, strict=False)
        ]
    for var_id, value, aval in zip(record.outputs, results, out_avals, strict=True):
        expected = hlo.aval_type(aval)
        if value.type != expected:
            raise LoweringError(
                f"lowering rule for {record.op!r} (record {index}){_at(record)} produced {value.type}, "
                f"but the recorded output is {aval} ({expected})"
            )
        env[var_id] = value


# -- regions (control flow): the same per-record lowering, inside a block ----------------


class _RegionView:
    """What the builder's record lowering reads of a trace, for one region's records: the
    var table's avals, and every record's location nested under ``prefix``."""

    def __init__(self, region, prefix: str):
        self.vars = region.table.vars
        self.backward: set = set()
        self.scopes: dict = {}
        self.paths = {i: prefix for i in range(len(region.records))}

    def aval(self, var_id: int) -> Aval:
        return self.vars[var_id].aval


def lower_region(region, name: str, args) -> list[ir.Value]:
    """Lower ``region``'s records at the current insertion point with ``args`` bound to its
    params; returns its results."""
    outer = ir.Location.current
    prefix = f"{outer.name_str}/{name}" if hasattr(outer, "name_str") else name
    env = dict(zip(region.params, args, strict=True))
    constants = region.table.constants
    used = {v for rec in region.records for v in rec.inputs} | set(region.results)
    _emit_constants(env, constants, sorted(v for v in used if v not in env and v in constants), f"{prefix}/")
    view = _RegionView(region, prefix)
    for index, record in enumerate(region.records):
        _lower_record(view, index, record, env)
    return [env[v] for v in region.results]
