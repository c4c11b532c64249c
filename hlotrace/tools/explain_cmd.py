"""``hlotrace explain``: which recorded ops and source lines each compiled XLA instruction
came from, what it costs, and which lines are the hottest."""

from __future__ import annotations

import json
import os
import re

from hlotrace.tools.checks import int_at_least
from hlotrace.tools.common import CliError, _write_stdout, add_mesh_argument, add_target_arguments, target_program
from hlotrace.tools.setup import add_setup_arguments

DESCRIPTION = """\
Compile a program (FILE.py:FUNC recorded once on random --input values, or a saved trace
file; after --passes, default what xla_trace runs on that platform) and explain XLA's
optimized module: for each instruction of its entry computation (a fusion, a dot, a copy,
...) the recorded ops it came from (record index and op name, from the locations hlotrace
lowers with) and your source lines, its flops and bytes, and the executable's memory
stats; the hottest source lines first.

An instruction computed inside a loop or a branch (a while's body, a conditional's branch)
is attributed to the control-flow record that holds the region, with the nested record and
its own line: op 'rec0:scan/body/rec2:tanh' is record 2 of the body of record 0 (a scan),
and its line reads 'prog.py:9 scan/body > prog.py:6' (line 6, in the body of the scan
called at line 9), as 'hlotrace diff' writes it.

Which numbers are XLA's: the totals (flops, bytes accessed: XLA's cost analysis of the
whole executable), the memory stats (temp, argument, output, alias bytes) and the
aliasing: which donated input buffers XLA writes which outputs into (a training step's
in-place parameter and optimizer-state updates; a saved trace keeps them). Per
instruction and per line, flops and bytes are estimates from the HLO's shapes (a dot is
2*M*N*K, a reduce one op per input element, elementwise ops one per output element; bytes
are the instruction's operands plus its result); an instruction that came from several
lines is split evenly between them.

With --mesh (and --input DTYPE[SHAPE]@SPEC placements, as 'hlotrace lower' takes them) the
program is compiled for a mesh of devices and the report is of the partitioned per-device
program: the memory stats are per device, and a table lists the collectives XLA's
partitioner inserted (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute) with the bytes each moves per device, the devices in each group, and
the recorded ops and source lines that caused them (several when XLA combined them).
The same list is available in Python: hlotrace.distributed.inspect.collectives(fn).

With --setup FILE.py:FACTORY instead of --input, FACTORY() (in FILE.py, which may be the
target's own file) returns (args, kwargs), modules, optimizers and GradManagers included, and
the target is recorded on them from their shapes (nothing runs, no state changes): your own
training step. --static NAME=VALUE passes a keyword argument as a static value."""

EPILOG = """\
examples:
  hlotrace explain examples/softmax_demo.py:fused_softmax --input 'f32[64,1000]'
  hlotrace explain model.py:step -i 'f32[8,784]' -i 'i32[8]' --top 5
  hlotrace explain dumps/step.1.trace.json --passes '' --json > explain.json
  hlotrace explain model.py:mlp --mesh 4x2:data,model -i 'f32[64,1000]@data' -i 'f32[1000,512]@None,model'
  hlotrace explain train.py:train_step --setup train.py:make --top 5"""

_REC = re.compile(r"(?:^|/)rec(\d+):")
# One entry of XLA's ``input_output_alias={ {out}: (param, {}, may-alias), ... }``.
_ALIAS = re.compile(r"\{(\d*)\}: \((\d+), \{\}, (?:may|must)-alias\)")


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "explain",
        help="map each compiled XLA instruction to its recorded ops and source lines, with costs",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    add_target_arguments(parser)
    parser.add_argument("--passes", metavar="PIPELINE", help="the pass pipeline (default: what xla_trace runs there)")
    parser.add_argument(
        "--top", type=int_at_least(1), default=10, metavar="N", help="source lines to list (default: 10)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    add_mesh_argument(parser)
    add_setup_arguments(parser)
    parser.set_defaults(handler=run)


def explain(trace, pipeline: str, platform=None, executable=None) -> dict:
    """The report as a dict: totals, memory, instructions, lines (hottest first), the
    collectives and the devices. ``executable``: the one compiled from ``trace`` under
    ``pipeline`` (an SPMD one for a mesh); else it is compiled here, on one device."""
    import hlotrace.runtime.hlo_parse as hlo_parse  # lazy: loads runtime.hlo_parse (8 modules)
    from hlotrace import passes, runtime  # lazy: loads runtime (7 modules)
    from hlotrace.distributed.inspect import collectives  # lazy: loads distributed.inspect (16 modules)
    from hlotrace.lowering import lower_trace  # lazy: loads jax
    from hlotrace.passes.locations import location_from_name  # lazy: loads passes.locations (1 module)

    exe = executable
    if exe is None:
        # The step's in-place state updates, as it was compiled (a saved trace keeps them).
        lowered = passes.run(lower_trace(trace, donate=trace.donate or None), pipeline)
        exe = runtime.compile(lowered.text(), lowered.in_avals, lowered.out_avals, platform=platform)
    hlo_text = exe.hlo_text()
    module = hlo_parse.parse(hlo_text)
    by_name = module.instruction_map()
    instructions, lines = [], {}
    for inst in module.computations.get(module.entry, []):
        if inst.opcode in ("parameter", "constant", "tuple", "get-tuple-element"):
            continue
        inner = module.called(inst) or [inst]
        names = sorted({i.op_name for i in [inst, *inner] if i.op_name}, key=_record_index)
        found = [f for f in map(location_from_name, names) if f is not None]
        records = sorted({f.record for f in found})
        at = {f.name: _where(trace, f) for f in found}  # op name -> its line
        where = sorted({w for w in at.values() if w})
        nested = [
            {"op": f.name, "record": f.record, "nested": f.nested, "line": _where(trace, f)}
            for f in found if f.nested is not None
        ]  # fmt: skip
        flops = sum(hlo_parse.estimated_flops(i, by_name) for i in inner)
        moved = inst.bytes() + sum(by_name[o].bytes() for o in inst.operands if o in by_name)
        instructions.append(
            {"name": inst.name, "opcode": inst.opcode, "shape": inst.shape, "flops": flops, "bytes": moved,
             "ops": names, "records": records, "nested": nested, "lines": where}
        )  # fmt: skip
        for line in where or ["(no source line)"]:
            entry = lines.setdefault(line, {"line": line, "flops": 0.0, "bytes": 0.0, "ops": set()})
            entry["flops"] += flops / max(1, len(where))
            entry["bytes"] += moved / max(1, len(where))
            entry["ops"].update(n for n, w in at.items() if w == line or line == "(no source line)")
    hottest = sorted(lines.values(), key=lambda e: (-e["flops"], -e["bytes"], e["line"]))
    for entry in hottest:
        entry["ops"] = sorted(entry["ops"], key=_record_index)
    cost = exe.cost_analysis()
    totals = {k: cost.get(k) for k in ("flops", "bytes accessed", "transcendentals") if k in cost}
    return {
        "totals": totals,
        "memory": exe.memory_stats(),
        "aliasing": aliasing(hlo_text, trace),
        "devices": len(getattr(exe, "devices", ())) or 1,
        "instructions": instructions,
        "lines": hottest,
        "collectives": [c.to_dict() for c in collectives(exe, trace)],
    }


def aliasing(hlo_text: str, trace) -> list[dict]:
    """The executable's input/output aliasing, read from XLA's module header: one
    ``{"input", "output", "aval"}`` per donated input whose buffer an output is written into."""
    header = hlo_text.split("\n", 1)[0]
    start = header.find("input_output_alias={")
    if start < 0:
        return []
    found = []
    for output, param in _ALIAS.findall(header[start:]):
        input_index = int(param)
        aval = trace.aval(trace.inputs[input_index]) if input_index < len(trace.inputs) else None
        found.append({"input": input_index, "output": int(output or 0), "aval": str(aval) if aval else None})
    return sorted(found, key=lambda a: a["input"])


def _record_index(name: str):
    match = _REC.search(name)
    return (int(match.group(1)), name) if match else (1 << 30, name)


def _line(trace, index: int) -> str | None:
    if index >= len(trace.records) or trace.records[index].location is None:
        return None
    location = trace.records[index].location
    return f"{os.path.basename(location.file)}:{location.line}"


def _where(trace, found) -> str | None:
    """The source line of a located op: its record's ``file:line``; inside a region, the
    control-flow record's line and region, then the nested record's line
    (``prog.py:9 scan/body > prog.py:6``)."""
    line = _line(trace, found.record)
    if found.nested is None:
        return line
    record = trace.records[found.record] if found.record < len(trace.records) else None
    parts, here, op = [], line or f"rec{found.record}", found.op
    for region_name, index, inner_op in found.nested_records():
        region = _region(record, region_name)
        record = region.records[index] if region is not None and index < len(region.records) else None
        parts.append(f"{here} {op}/{region_name}")
        where = record.location if record is not None else None
        here = f"{os.path.basename(where.file)}:{where.line}" if where else f"rec{index}:{inner_op}"
        op = inner_op
    return " > ".join([*parts, here])


def _region(record, name: str):
    """Region ``name`` of a control-flow record, named as locations name them (``body``,
    ``cond``, ``branch1``), or None."""
    if record is None:
        return None
    value = record.attrs.get(name)
    if value is None and name.startswith("branch") and name[6:].isdigit():
        branches = record.attrs.get("branches") or ()
        value = branches[int(name[6:])] if int(name[6:]) < len(branches) else None
    return value if hasattr(value, "records") else None


def _human(n) -> str:
    n = float(n or 0)
    for unit in ("", "K", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


def format_report(report: dict, top: int) -> str:
    from hlotrace.distributed.inspect import (  # lazy: loads distributed.inspect (16 modules)
        Collective,
        format_collectives,
    )

    totals = ", ".join(f"{k} {_human(v)}" for k, v in report["totals"].items()) or "not available"
    memory = ", ".join(f"{k} {_human(v)}B" for k, v in report["memory"].items()) or "not available"
    devices = report.get("devices", 1)
    if devices > 1:
        out = [
            f"XLA cost analysis (one device's partitioned program, {devices} devices): {totals}",
            f"XLA memory stats (per device): {memory}",
            "",
            "collectives XLA's partitioner inserted (bytes per device; ops @ lines that caused them):",
            format_collectives(
                [Collective(**{**c, "axes": tuple(c["axes"]) if c["axes"] else None,
                               "ops": tuple(c["ops"]), "lines": tuple(c["lines"])})
                 for c in report["collectives"]]
            ),
            "",
        ]  # fmt: skip
    else:
        out = [f"XLA cost analysis (whole executable): {totals}", f"XLA memory stats: {memory}", ""]
    pairs = [f"in{a['input']} -> out{a['output']}" for a in report.get("aliasing", ())]
    out[-1:-1] = [f"aliasing (donated input -> the output written into its buffer): {', '.join(pairs) or 'none'}"]
    out.append(f"hottest source lines (estimated; top {top}):")
    out.append(f"  {'flops':>8} {'bytes':>8}  {'line':<28} ops")
    for entry in report["lines"][:top]:
        ops = " ".join(entry["ops"])
        out.append(f"  {_human(entry['flops']):>8} {_human(entry['bytes']):>8}  {entry['line']:<28} {ops}")
    out.append("")
    out.append("instructions (entry computation, in execution order; estimated costs):")
    out.append(f"  {'flops':>8} {'bytes':>8}  {'instruction':<34} {'opcode':<10} ops @ lines")
    for inst in report["instructions"]:
        where = ", ".join(inst["lines"]) or "-"
        out.append(
            f"  {_human(inst['flops']):>8} {_human(inst['bytes']):>8}  {inst['name']:<34} {inst['opcode']:<10} "
            f"{' '.join(inst['ops']) or '-'} @ {where}"
        )
    return "\n".join(out)


def run(args) -> int:
    if args.top < 1:
        raise CliError(f"--top must be at least 1, not {args.top}")
    from hlotrace.passes.manager import resolve  # lazy: loads jax
    from hlotrace.runtime import platform_name  # lazy: loads jax

    pipeline = resolve(args.passes, platform_name(args.platform))  # what xla_trace would run there
    try:
        trace, traced = target_program(args, pipeline)
        report = explain(trace, pipeline, args.platform, None if traced is None else traced.executable)
    except (ValueError, KeyError) as exc:  # a malformed pipeline
        raise CliError(f"--passes: {exc.args[0] if exc.args else exc}") from None
    _write_stdout(json.dumps(report, indent=1) if args.json else format_report(report, args.top))
    return 0
