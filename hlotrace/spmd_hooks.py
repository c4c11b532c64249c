"""What the one-device layers (``xla_trace``, ``load_state_dict``, the device eager engine) call into
:mod:`hlotrace.distributed`, behind one flag. ``active`` turns True the first time anything is
placed on a mesh in this process; while it is False, ``xla_trace`` pays one attribute read per
call and nothing else. The functions are bound by ``hlotrace.distributed.hooks`` when it is
imported (a placement imports it), so these layers never import the distributed package.
"""

from __future__ import annotations

active = False
# Bumped by every placement (dist.shard and what inherits one): distributed.compile.prepare
# re-derives what it caches per holders when it moved.
placements = 0

_SLOTS = (
    "prepare",
    "plan",
    "eager_layout",
    "eager_plan",
    "placed",
    "spans_processes",
    "agree_on_module",
    "keep_placements",
    "peer_failure",
)


def _unbound(*args, **kwargs):
    raise RuntimeError("hlotrace.distributed is not imported: nothing is placed on a mesh")


prepare = plan = eager_layout = eager_plan = placed = spans_processes = agree_on_module = keep_placements = _unbound


def peer_failure():  # bound by hlotrace.distributed: which other process stopped, if one did
    return None


def bind(**functions) -> None:
    """Fill the slots (``prepare``, ``plan``, ``eager_layout``, ``eager_plan``, ``placed``, ``spans_processes``,
    ``agree_on_module``, ``keep_placements``, ``peer_failure``): see hlotrace.distributed.hooks."""
    unknown = set(functions) - set(_SLOTS)
    if unknown:
        raise TypeError(f"unknown SPMD hooks {sorted(unknown)}")
    globals().update(functions)
