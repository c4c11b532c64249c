"""The pieces of a recorded program: :class:`Var`, :class:`OpRecord` and the closed
:class:`Region` a control-flow record holds as an attribute, and :func:`adopt_regions`,
which moves regions into another var table. :class:`hlotrace.trace.Trace` holds them (and
re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hlotrace.avals import Aval
from hlotrace.source import SourceLocation

if TYPE_CHECKING:
    from hlotrace.trace import Trace

__all__ = ["REGIONS_TAG", "OpRecord", "Region", "Var", "adopt_regions", "regions_of"]

# OpDef.tags entry of ops whose attributes hold Regions (control flow, hlotrace.ops.control_flow).
REGIONS_TAG = "regions"


@dataclass(frozen=True)
class Var:
    id: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def aval(self) -> Aval:
        return Aval(self.shape, self.dtype)


@dataclass(frozen=True)
class OpRecord:
    """One op application: ``outputs = op(*inputs, **attrs)`` at ``location``."""

    op: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    location: SourceLocation | None = None


@dataclass(eq=False)
class Region:
    """A closed sub-program of a control-flow record: ``results = f(*params)``.

    ``params`` and ``results`` are var ids and ``records`` its ops, all in the var table of
    ``table`` (the Trace the region lives in, whose ``constants`` it may read). Tensors the
    recorded callable closed over are trailing params, fed by the record's trailing inputs.
    """

    params: tuple[int, ...]
    records: list[OpRecord]
    results: tuple[int, ...]
    table: Trace

    def __repr__(self) -> str:
        return f"Region({len(self.params)} params, {len(self.records)} records, {len(self.results)} results)"


def adopt_regions(attrs: dict, table: Trace) -> dict:
    """``attrs`` with every Region that lives in another var table copied into ``table``
    (its vars renumbered, the constants it reads copied)."""
    if not any(regions_of(v) for v in attrs.values()):
        return attrs
    mapping: dict[int, dict[int, int]] = {}
    return {k: _moved(v, table, mapping) for k, v in attrs.items()}


def regions_of(value) -> list:
    if isinstance(value, Region):
        return [value]
    if isinstance(value, tuple):
        return [r for v in value for r in regions_of(v)]
    return []


def _moved(value, table: Trace, mapping: dict):
    if isinstance(value, tuple):
        return tuple(_moved(v, table, mapping) for v in value)
    if not isinstance(value, Region) or value.table is table:
        return value
    source = value.table
    renumbered = mapping.setdefault(id(source), {})  # regions from several tables may meet

    def var(v: int) -> int:
        new = renumbered.get(v)
        if new is None:
            old = source.vars[v]
            new = renumbered[v] = table.new_var(old.shape, old.dtype)
            if v in source.constants:
                table.constants[new] = source.constants[v]
        return new

    records = [
        OpRecord(
            r.op,
            {k: _moved(a, table, mapping) for k, a in r.attrs.items()},
            tuple(map(var, r.inputs)),
            tuple(map(var, r.outputs)),
            r.location,
        )
        for r in value.records
    ]
    return Region(tuple(map(var, value.params)), records, tuple(map(var, value.results)), table)
