"""A reader of XLA's HLO text (``Executable.hlo_text()``): instructions, the computations
fusions call, and where each came from (the ``op_name`` metadata hlotrace's locations
become, ``rec<i>:<op>``, and the stack-frame tables that hold the user's file:line).

Only what ``hlotrace explain`` needs; the text format is XLA's and not a stable API, so
anything unrecognized is skipped rather than guessed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")
_SHAPE = re.compile(r"\b(pred|[suf]\d+|bf16)\[([\d,]*)\]")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_CALLS = re.compile(r"(?:calls|body|condition|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TO_APPLY = re.compile(r"to_apply=%?([\w.\-]+)")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CONTRACTING = re.compile(r"lhs_contracting_dims=\{([\d,]*)\}")

_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4}
_BYTES |= {"s64": 8, "u64": 8, "f64": 8}
# Opcodes that move or rename data without arithmetic.
_NO_FLOPS = {
    "parameter", "constant", "broadcast", "reshape", "transpose", "copy", "slice", "concatenate", "pad", "bitcast",
    "tuple", "get-tuple-element", "iota", "dynamic-slice", "dynamic-update-slice", "gather", "scatter", "reverse",
    "fusion", "call", "while", "conditional", "after-all", "opt-barrier", "custom-call", "convert",
}  # fmt: skip


@dataclass
class Instruction:
    name: str
    shape: str  # the result shape text, e.g. "f32[4,8]{1,0}"
    opcode: str
    operands: list[str]
    calls: list[str]
    op_name: str = ""
    frame: int | None = None
    contracting: list[int] = field(default_factory=list)

    def elements(self) -> int:
        return sum(math.prod(dims) for _, dims in shapes(self.shape))

    def bytes(self) -> int:
        return sum(math.prod(dims) * _BYTES.get(t, 4) for t, dims in shapes(self.shape))


@dataclass
class HloModule:
    computations: dict[str, list[Instruction]]
    entry: str
    frames: dict[int, tuple[str, int]]  # stack frame id -> (file, line)

    def instruction_map(self) -> dict[str, Instruction]:
        return {i.name: i for body in self.computations.values() for i in body}

    def called(self, instruction: Instruction) -> list[Instruction]:
        """Every instruction of the computations ``instruction`` calls, transitively."""
        found, stack, seen = [], list(instruction.calls), set()
        while stack:
            name = stack.pop()
            if name in seen or name not in self.computations:
                continue
            seen.add(name)
            for inner in self.computations[name]:
                found.append(inner)
                stack.extend(inner.calls)
        return found


def shapes(text: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(t, tuple(int(d) for d in dims.split(",") if d)) for t, dims in _SHAPE.findall(text)]


def _tables(text: str) -> dict[int, tuple[str, int]]:
    """Stack frame id -> (file, line) from the FileNames/FileLocations/StackFrames tables."""
    sections: dict[str, dict[int, str]] = {}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = sections.setdefault(stripped, {})
            continue
        if not stripped or current is None:
            if not stripped:
                current = None
            continue
        key, _, value = stripped.partition(" ")
        if key.isdigit():
            current[int(key)] = value
    files = {k: v.strip('"') for k, v in sections.get("FileNames", {}).items()}
    locations = {}
    for k, v in sections.get("FileLocations", {}).items():
        file_id = re.search(r"file_name_id=(\d+)", v)
        line = re.search(r"\bline=(\d+)", v)
        if file_id and line:
            locations[k] = (files.get(int(file_id.group(1)), "?"), int(line.group(1)))
    frames = {}
    for k, v in sections.get("StackFrames", {}).items():
        location = re.search(r"file_location_id=(\d+)", v)
        if location and int(location.group(1)) in locations:
            frames[k] = locations[int(location.group(1))]
    return frames


def parse(text: str) -> HloModule:
    computations: dict[str, list[Instruction]] = {}
    entry, current = "", None
    for line in text.splitlines():
        match = _COMPUTATION.match(line)
        if match:
            current = computations.setdefault(match.group(2), [])
            if match.group(1):
                entry = match.group(2)
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is None:
            continue
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        _, name, shape, opcode, rest = match.groups()
        arguments, _, attributes = rest.partition("), ")
        op_name = _OP_NAME.search(attributes)
        frame = _FRAME_ID.search(attributes)
        contracting = _CONTRACTING.search(attributes)
        current.append(
            Instruction(
                name=name,
                shape=shape,
                opcode=opcode,
                operands=_OPERAND.findall(arguments),
                calls=_calls(opcode, attributes),
                op_name=op_name.group(1) if op_name else "",
                frame=int(frame.group(1)) if frame else None,
                contracting=[int(d) for d in contracting.group(1).split(",") if d] if contracting else [],
            )
        )
    return HloModule(computations, entry, _tables(text))


def _calls(opcode: str, attributes: str) -> list[str]:
    """The computations an instruction runs: a fusion's, a while's condition and body, every
    branch of a conditional, and a ``call``'s (XLA:CPU wraps a while in one); not a reduce's
    ``to_apply``, which is the reduction's combiner, counted in the reduce."""
    calls = _CALLS.findall(attributes)
    for branches in _BRANCHES.findall(attributes):
        calls.extend(name.strip().lstrip("%") for name in branches.split(",") if name.strip())
    if opcode == "call":
        calls.extend(_TO_APPLY.findall(attributes))
    return calls


def estimated_flops(instruction: Instruction, by_name: dict[str, Instruction]) -> int:
    """Floating-point operations of one (non-fusion) instruction, estimated from shapes:
    a dot is 2·M·N·K, a reduce one op per input element, other arithmetic one per output
    element; data movement none."""
    if instruction.opcode in _NO_FLOPS:
        return 0
    if instruction.opcode == "dot" and instruction.operands:
        lhs = by_name.get(instruction.operands[0])
        if lhs is not None:
            (_, dims), *_ = shapes(lhs.shape) or [("", ())]
            k = math.prod(dims[d] for d in instruction.contracting if d < len(dims)) if instruction.contracting else 1
            return 2 * instruction.elements() * k
    if instruction.opcode in ("reduce", "reduce-window") and instruction.operands:
        source = by_name.get(instruction.operands[0])
        return source.elements() if source is not None else instruction.elements()
    if instruction.opcode == "convolution" and len(instruction.operands) > 1:
        kernel = by_name.get(instruction.operands[1])
        if kernel is not None:
            (_, dims), *_ = shapes(kernel.shape) or [("", ())]
            # output elements x (kernel elements / output features): the window's products
            per_output = math.prod(dims) // max(1, max(dims)) if dims else 1
            return 2 * instruction.elements() * per_output
    return instruction.elements()
