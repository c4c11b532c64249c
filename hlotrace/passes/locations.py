"""Read back what the lowering wrote into each op's location.

Every op the lowering emits is located at ``[<module path>/]rec<i>:<op>[:bwd][@<scope>#<instance>]``
(around the user's ``file:line``): the record index and op name, ``:bwd`` when the record
was applied during a backward pass, the nn.Module path it ran in (``MLP.fc1``), and the outermost :func:`hlotrace.trace.scope` it was
recorded in. Constants hoisted by the lowering are at ``const%<var>``. Passes use this to
tell forward from backward ops (remat) and to name composites (fuse-elementwise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r'loc\("((?:([^"/]+)/)?rec(\d+):([^"@:]+)(:bwd)?(?:@([^"#]+)#(\d+))?)"')
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


def record_location(op) -> RecordLocation | None:
    """The record an op was lowered from, or None (constants, ops a pass made up)."""
    text = str(op.location)
    match = _NAME.search(text)
    if match is None:
        return None
    where = _FILE.search(text)
    return RecordLocation(
        name=match.group(1),
        record=int(match.group(3)),
        op=match.group(4),
        backward=match.group(5) is not None,
        scope=match.group(6),
        instance=int(match.group(7)) if match.group(7) else None,
        path=match.group(2),
        file=where.group(1) if where else None,
        line=int(where.group(2)) if where else None,
    )


def is_backward(op) -> bool:
    """Whether ``op`` was lowered from a record of a backward pass."""
    found = record_location(op)
    return found is not None and found.backward
