"""Read back what the lowering wrote into each op's location.

Every op the lowering emits is located at ``[<module path>/]rec<i>:<op>[:bwd][@<scope>#<instance>]``
(around the user's ``file:line``): the record index and op name, ``:bwd`` when the record
was applied during a backward pass, the nn.Module path it ran in (``MLP.fc1``), and the outermost :func:`hlotrace.trace.scope` it was
recorded in. Constants hoisted by the lowering are at ``const%<var>``. Passes use this to
tell forward from backward ops (remat) and to name composites (fuse-elementwise).

An op lowered from a record inside a control-flow region is located under the record that
holds the region: ``rec12:scan/body/rec3:add`` (regions nest: ``.../branch1/rec0:scan/body/
rec0:multiply``; a constant a region reads is at ``rec12:scan/body/const%7``). It belongs to
the top-level record (12, the scan): ``record``, ``op``, ``backward`` and ``scope`` are that
record's, and ``nested`` keeps the rest (``scan/body/rec3:add``), so that a nested op is
never mistaken for top-level record 3. ``file``/``line`` are the nested record's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r'loc\("((?:([^"/]+)/)?rec(\d+):([^"@:/]+)(:bwd)?(?:@([^"#]+)#(\d+))?(?:/([^"]+))?)"')
_LEVEL = re.compile(r"rec(\d+):([^@:]+)(?::bwd)?(?:@.*)?")
_FILE = re.compile(r'\("([^"]+)":(\d+):\d+')


@dataclass(frozen=True)
class RecordLocation:
    name: str  # the whole location name, e.g. "rec12:exp:bwd@hlotrace.softmax#3"
    record: int  # index of the trace record the op was lowered from
    op: str  # the recorded op's name
    backward: bool  # recorded during a backward pass
    scope: str | None  # outermost named scope (e.g. "hlotrace.softmax"), if any
    instance: int | None  # which entry into that scope
    file: str | None  # the user's source file and line, when known
    line: int | None
    path: str | None = None  # the nn.Module path it was recorded in ("MLP.fc1"), if any
    # Inside a control-flow region: the path from ``op`` down to the nested record
    # ("scan/body/rec2:tanh"); None for an op of a top-level record.
    nested: str | None = None

    def nested_records(self) -> list[tuple[str, int, str]]:
        """``(region, record index, op)`` for each level of ``nested``, outermost first:
        ``scan/body/rec3:switch/branch1/rec0:add`` -> ``[("body", 3, "switch"), ("branch1", 0, "add")]``.
        Empty for a top-level op; a region's constant (``scan/body/const%7``) gives the
        levels above it."""
        if self.nested is None:
            return []
        levels, region = [], None
        for part in self.nested.split("/")[1:]:
            match = _LEVEL.fullmatch(part)
            if match is None:
                region = part
                continue
            levels.append((region, int(match.group(1)), match.group(2)))
        return levels


def record_location(op) -> RecordLocation | None:
    """The record an op was lowered from, or None (constants, ops a pass made up)."""
    text = str(op.location)
    match = _NAME.search(text)
    if match is None:
        return None
    where = _FILE.search(text)
    return _from_match(match, where.group(1) if where else None, int(where.group(2)) if where else None)


def location_from_name(name: str, file: str | None = None, line: int | None = None) -> RecordLocation | None:
    """The same, from a location's name alone (XLA's ``op_name`` metadata), e.g.
    ``location_from_name("rec0:scan/body/rec2:tanh").nested == "scan/body/rec2:tanh"``."""
    match = _NAME.fullmatch(f'loc("{name}"')
    return None if match is None else _from_match(match, file, line)


def _from_match(match, file: str | None, line: int | None) -> RecordLocation:
    return RecordLocation(
        name=match.group(1),
        record=int(match.group(3)),
        op=match.group(4),
        backward=match.group(5) is not None,
        scope=match.group(6),
        instance=int(match.group(7)) if match.group(7) else None,
        path=match.group(2),
        file=file,
        line=line,
        nested=f"{match.group(4)}/{match.group(8)}" if match.group(8) else None,
    )


def is_backward(op) -> bool:
    """Whether ``op`` was lowered from a record of a backward pass."""
    found = record_location(op)
    return found is not None and found.backward
