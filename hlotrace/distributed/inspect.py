"""What XLA's partitioner made of a program on a mesh: the collectives it inserted (with
their bytes and the user's source lines of the ops that caused them), and how many bytes
each device holds.

>>> from hlotrace.distributed.inspect import collectives, format_collectives, bytes_per_device
>>> step(x, y, net=net, opt=opt, gm=gm)              # an xla_trace'd step on a mesh
>>> print(format_collectives(collectives(step)))     # all-reduce 8.4 KB over data (4 devices) ...
>>> bytes_per_device(net.parameters())               # {0: 2176, 1: 2176, ...}

The collectives are read from the partitioned, optimized HLO (``executable.hlo_text()``):
every instruction whose opcode is one of :data:`KINDS` (or its ``-start`` half on
platforms that run them asynchronously). XLA keeps the ``op_name`` metadata hlotrace lowers
every op with (``rec<i>:<op>``, ``:bwd`` for a backward record); when it combines several
collectives into one (a data-parallel step's gradient all-reduce) the op_name lists all of
them, and every one is reported. Source lines come from the trace's records when the trace
is known (a compiled function), else from the HLO's own stack-frame table.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

import numpy as np

from hlotrace.errors import HlotraceError
from hlotrace.jit import TracedFunction

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_RECORD = re.compile(r"(?<![\w])rec(\d+):([A-Za-z_]\w*)(:bwd)?")
# replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_1'}  (the mesh XLA derived, and the axes used)
_MESH_GROUPS = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_IOTA_GROUPS = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?")
_LIST_GROUPS = re.compile(r"replica_groups=\{\{([\d,]*)\}")


@dataclass(frozen=True)
class Collective:
    """One collective in the partitioned program (sizes are per device).

    ``kind``: one of :data:`KINDS`; ``name``: the HLO instruction; ``shape``: its result;
    ``bytes``: the larger of its operands and its result, i.e. the buffer it moves on each
    device (an all-gather's gathered result, a reduce-scatter's input); ``group_size``: how
    many devices take part in each group (None when the HLO does not say); ``axes``: the
    mesh axes it runs over, when XLA's grouping matches the mesh; ``ops``: the recorded ops
    that caused it (``rec3:matmul:bwd``); ``lines``: their source lines (``model.py:12``).
    """

    kind: str
    name: str
    shape: str
    bytes: int
    operand_bytes: int
    result_bytes: int
    group_size: int | None
    axes: tuple[str, ...] | None
    ops: tuple[str, ...]
    lines: tuple[str, ...]
    computation: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "shape": self.shape,
            "bytes": self.bytes,
            "operand_bytes": self.operand_bytes,
            "result_bytes": self.result_bytes,
            "group_size": self.group_size,
            "axes": list(self.axes) if self.axes is not None else None,
            "ops": list(self.ops),
            "lines": list(self.lines),
            "computation": self.computation,
        }


def _hlo_and_trace(target, trace):
    """(HLO text, trace or None, mesh axes or None) of a TracedFunction, an executable or HLO text."""
    if isinstance(target, str):
        return target, trace, None
    if isinstance(target, TracedFunction):
        entry = target._latest()
        return entry.executable.hlo_text(), trace or entry.trace, mesh_axes(entry.executable)
    if hasattr(target, "hlo_text"):
        return target.hlo_text(), trace, mesh_axes(target)
    raise HlotraceError(
        f"collectives() takes a compiled function (xla_trace), an executable or HLO text, not {type(target).__name__}"
    )


def mesh_axes(executable):
    """((axis name, size), ...) of an SPMD executable's mesh, else None."""
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    shardings = getattr(executable, "in_shardings", None) or getattr(executable, "out_shardings", None)
    return jaxlib_spmd.mesh_axes_of(shardings[0]) if shardings else None


def _first_group(attributes: str) -> list[int] | None:
    """The device positions (in the executable's device assignment, i.e. flat mesh order)
    of an instruction's first replica group, in any of XLA's three spellings."""
    match = _MESH_GROUPS.search(attributes)
    if match:  # mesh['axis_0'=4,'axis_1'=2] {'axis_1'}: XLA's own grid of the devices
        names, sizes = [], []
        for part in match.group(1).split(","):
            name, _, size = part.partition("=")
            if not size.strip().isdigit():
                return None
            names.append(name.strip().strip("'"))
            sizes.append(int(size))
        used = [a.strip().strip("'") for a in match.group(2).split(",") if a.strip()]
        if any(a not in names for a in used):
            return None
        grid = np.arange(math.prod(sizes)).reshape(sizes)
        grid = grid.transpose([names.index(a) for a in used] + [i for i, a in enumerate(names) if a not in used])
        return [int(d) for d in grid.reshape(math.prod(sizes[names.index(a)] for a in used), -1)[:, 0]]
    match = _IOTA_GROUPS.search(attributes)
    if match:  # [G,S]<=[d0,d1]T(p0,p1)
        groups, size = int(match.group(1)), int(match.group(2))
        dims = [int(d) for d in match.group(3).split(",") if d]
        perm = [int(d) for d in match.group(4).split(",") if d] if match.group(4) else list(range(len(dims)))
        if math.prod(dims) != groups * size or sorted(perm) != list(range(len(dims))):
            return None
        return [int(d) for d in np.arange(math.prod(dims)).reshape(dims).transpose(perm).reshape(groups, size)[0]]
    match = _LIST_GROUPS.search(attributes)
    if match:  # {{0,1},{2,3}}
        return [int(d) for d in match.group(1).split(",") if d]
    return None


def _groups(attributes: str, mesh_axes) -> tuple[int | None, tuple[str, ...] | None]:
    """(devices per group, the mesh axes the group spans) from an instruction's attributes;
    the axes are None when the group is no product of whole mesh axes."""
    group = _first_group(attributes)
    if not group:
        return None, None
    if mesh_axes is None:
        return len(group), None
    shape = tuple(n for _, n in mesh_axes)
    if max(group) >= math.prod(shape):
        return len(group), None
    coords = np.array(np.unravel_index(group, shape)).T
    spans = tuple(i for i in range(len(shape)) if len(set(coords[:, i])) > 1)
    if math.prod(shape[i] for i in spans) != len(group):
        return len(group), None
    return len(group), tuple(mesh_axes[i][0] for i in spans)


def _records(op_name: str) -> list[tuple[int, str]]:
    """(record index, label) of every recorded op named in an HLO op_name."""
    found = []
    for match in _RECORD.finditer(op_name):
        label = f"rec{match.group(1)}:{match.group(2)}{match.group(3) or ''}"
        if (int(match.group(1)), label) not in found:
            found.append((int(match.group(1)), label))
    return found


def _line_of(trace, index: int) -> str | None:
    if trace is None or index >= len(trace.records) or trace.records[index].location is None:
        return None
    location = trace.records[index].location
    return f"{os.path.basename(location.file)}:{location.line}"


def collectives(target, trace=None) -> list[Collective]:
    """The collectives XLA's SPMD partitioner inserted, in program order.

    ``target``: a compiled function (``xla_trace``; its most recent executable), an
    executable (``hlo_text()``) or the HLO text itself; ``trace``: the recording whose
    records the op names refer to (taken from a compiled function when not given). A
    one-device program has none.

    >>> [c.kind for c in collectives(step)]
    ['all-gather', 'all-gather', 'all-reduce']
    """
    import hlotrace.runtime.hlo_parse as hlo_parse  # lazy: loads runtime.hlo_parse (1 module)

    text, trace, mesh_axes = _hlo_and_trace(target, trace)
    module = hlo_parse.parse(text)
    by_name = module.instruction_map()
    attributes = {}
    for line in text.splitlines():
        match = re.match(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", line)
        if match:
            attributes[match.group(1)] = line
    found = []
    for computation, body in module.computations.items():
        for inst in body:
            kind = inst.opcode.removesuffix("-start")
            if kind not in KINDS:
                continue
            operand_bytes = sum(by_name[o].bytes() for o in inst.operands if o in by_name)
            result_bytes = inst.bytes()
            if inst.opcode.endswith("-start"):  # (operands, results) tuple: count the results half
                result_bytes = max(0, result_bytes - operand_bytes)
            group_size, axes = _groups(attributes.get(inst.name, ""), mesh_axes)
            records = _records(inst.op_name)
            lines = [_line_of(trace, index) for index, _ in records]
            if not any(lines) and inst.frame in module.frames:
                file, number = module.frames[inst.frame]
                lines = [f"{os.path.basename(file)}:{number}"]
            found.append(
                Collective(
                    kind=kind,
                    name=inst.name,
                    shape=inst.shape,
                    bytes=max(operand_bytes, result_bytes),
                    operand_bytes=operand_bytes,
                    result_bytes=result_bytes,
                    group_size=group_size,
                    axes=axes,
                    ops=tuple(label for _, label in records),
                    lines=tuple(dict.fromkeys(line for line in lines if line)),
                    computation=computation,
                )
            )
    return found


def human_bytes(n) -> str:
    n = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def _over(c: Collective) -> str:
    if c.axes:
        return f"over {','.join(c.axes)} ({c.group_size} devices)"
    return f"over {c.group_size} devices" if c.group_size else ""


def format_collectives(found: list[Collective], indent: str = "  ") -> str:
    """A table: kind, bytes per device, group, the ops and source lines that caused it."""
    if not found:
        return f"{indent}(none: XLA inserted no collectives)"
    total = sum(c.bytes for c in found)
    rows = [f"{indent}{len(found)} collective(s), {human_bytes(total)} per device in all:"]
    for c in found:
        ops = " ".join(c.ops) or "-"
        where = ", ".join(c.lines) or "-"
        rows.append(f"{indent}{c.kind:<18} {human_bytes(c.bytes):>9}  {_over(c):<28} {ops} @ {where}")
    return "\n".join(rows)


def bytes_per_device(tensors) -> dict[int, int]:
    """Bytes each device holds of ``tensors`` (device id -> bytes), read from their device
    arrays: a tensor split over 4 devices counts a quarter on each, a replicated one its
    whole size on every device of its mesh, a one-device one on its device; a tensor that
    lives on the host only (not yet placed, or just loaded) counts on none.

    >>> bytes_per_device(net.parameters())
    {0: 2176, 1: 2176, 2: 2176, 3: 2176}
    """
    import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd  # lazy: loads jax

    held: dict[int, int] = {}
    seen = set()
    for tensor in tensors:
        buffer = getattr(tensor, "_device", None)
        if buffer is None or id(buffer) in seen:
            continue
        seen.add(id(buffer))
        for device_id, nbytes in jaxlib_spmd.shard_bytes(buffer):
            held[device_id] = held.get(device_id, 0) + nbytes
    return dict(sorted(held.items()))
