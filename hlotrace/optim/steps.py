"""Step counts of the optimizers that keep one (SGD with momentum, Adam, AdamW, Adagrad):
one per parameter, as PyTorch keeps them, or one per parameter group (``step_per_group=True``).

A *count* is a 0-d float32 tensor; ``opt.state[p]["step"]`` is the count of parameter ``p``.
Per parameter, every parameter has its own. Per group, the parameters of a group that have
always been updated together hold the same tensor object: a compiled step then reads and
advances one count (and computes one set of bias corrections) per group instead of one per
parameter, which removes a scalar kernel per parameter from the program.

PyTorch skips a parameter whose ``.grad`` is None, and its count does not advance. Per group,
such a parameter, skipped while others of its group are updated, *splits off*: from then on
it has a count of its own, holding the value it had (PyTorch's value for it), shared with the
other parameters skipped in that step. So the results are PyTorch's in every case; a model
whose parameters all get gradients never splits.

A split made while a step is recorded must write a count the compiled program returns, so
each count of a group has a *spare*: a 0-d tensor the optimizer owns (one input of the
compiled step, written only by the program that splits). A split bumps the optimizer's
split counter, which is part of its static key: the program that recorded a split is never
run again for a later state, where the Python side would not split with it. A recording that
fails puts the tensors back (``hlotrace.state.Snapshot``), the spare's buffer included; the
split is then undone too (:func:`settle`, before the optimizer is next used).

``state_dict()`` writes a ``step`` entry per parameter (PyTorch's layout); ``load_state_dict()``
takes per-parameter counts: per group, parameters of one group with equal counts share one,
parameters with other values get a count of their own (nothing is averaged).
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace.errors import HlotraceError, TraceError
from hlotrace.recording import current_recorder
from hlotrace.tensor import Tensor
from hlotrace.versions import structure_changed

__all__ = ["advance", "counts_of", "ensure", "load", "settle", "spares_of"]


def _zero_count(recording: bool) -> Tensor:
    if recording:  # an optimizer constructed inside the recorded step: its counts start at 0 per call
        return F.full((), 0.0, dtype=dt.float32)
    return Tensor._from_array(np.zeros((), dt.float32), checked=True)


def _group_index(opt, group: dict) -> int:
    for i, g in enumerate(opt.param_groups):
        if g is group:
            return i
    raise HlotraceError(f"{type(opt).__name__}: a parameter group that is not in param_groups")


def counts_of(opt, group: dict) -> list[Tensor]:
    """The distinct count tensors of ``group``'s parameters, in parameter order."""
    seen: dict[int, Tensor] = {}
    for p in group["params"]:
        count = opt.state[p].get("step")
        if count is not None:
            seen.setdefault(id(count), count)
    return list(seen.values())


def spares_of(opt) -> list[Tensor]:
    """Every group's spare counts, group by group (the tensors ``_trace_state`` adds)."""
    return [t for spares in opt._spare_steps for t in spares]


def ensure(opt, group: dict, recording: bool) -> None:
    """Create the counts ``group``'s parameters lack (one per parameter, or one shared by all
    of them per group) and, per group, one spare per count."""
    missing = [p for p in group["params"] if "step" not in opt.state[p]]
    if missing:
        shared = _zero_count(recording) if opt._step_per_group else None
        for p in missing:
            opt.state[p]["step"] = shared if shared is not None else _zero_count(recording)
        structure_changed()
    if not opt._step_per_group or recording:
        # While recording, a missing spare is not made: a split then refuses (see advance).
        return
    spares = opt._spare_steps[_group_index(opt, group)]
    wanted = len(counts_of(opt, group))
    if len(spares) != wanted:
        del spares[wanted:]
        spares.extend(_zero_count(False) for _ in range(wanted - len(spares)))
        structure_changed()


def advance(opt, group: dict) -> dict[int, Tensor]:
    """Advance by one the count of every parameter of ``group`` whose ``.grad`` is set, once
    per count; returns ``{id(parameter): its count}`` for those parameters.

    A count shared with parameters that have no gradient splits first: they move to a spare
    holding the count's value before this step.
    """
    cohorts: dict[int, tuple[Tensor, list[Tensor], list[Tensor]]] = {}
    for p in group["params"]:
        count = opt.state[p]["step"]
        entry = cohorts.get(id(count))
        if entry is None:
            entry = cohorts[id(count)] = (count, [], [])
        entry[1 if p.grad is not None else 2].append(p)
    advanced: dict[int, Tensor] = {}
    for count, stepped, skipped in cohorts.values():
        if not stepped:
            continue
        if skipped:
            _split_off(opt, group, count, skipped)
        count._assign(count + 1)
        for p in stepped:
            advanced[id(p)] = count
    return advanced


def _split_off(opt, group: dict, count: Tensor, skipped: list[Tensor]) -> None:
    index = _group_index(opt, group)
    spares = opt._spare_steps[index]
    if not spares:
        position = next(i for i, p in enumerate(group["params"]) if p is skipped[0])
        raise HlotraceError(
            f"{type(opt).__name__}(step_per_group=True): parameter {position} of group {index} (shape "
            f"{skipped[0].shape}) has no gradient while others of its group do, and its step count "
            f"cannot split off inside this recording (a second split in one compiled step, or an "
            f"optimizer constructed inside it); use step_per_group=False"
        )
    spare = spares.pop()
    if current_recorder() is not None:  # undone by settle() if the recording fails
        opt._pending_splits.append((spare, spare._host, spare._device, count, skipped, index))
    spare._assign(count * 1)  # the count before this step: PyTorch's value for the skipped ones
    for p in skipped:
        opt.state[p]["step"] = spare
    opt._step_splits += 1
    structure_changed()


def settle(opt) -> None:
    """Undo the splits of a recording that failed (outside recording).

    A failed call restores every input's buffers, so a spare written by a split holds its very
    buffer objects from before the call again; then its parameters go back to the count they
    split from, and the spare back to its group.
    """
    pending, opt._pending_splits = opt._pending_splits, []
    for spare, host, device, count, skipped, index in pending:
        if spare._host is host and spare._device is device:
            for p in skipped:
                if opt.state[p].get("step") is spare:
                    opt.state[p]["step"] = count
            opt._spare_steps[index].append(spare)
            structure_changed()


def load(opt, values: dict[int, tuple[Tensor, np.ndarray]]) -> list[tuple[Tensor, Tensor]]:
    """Load per-parameter counts ``{id(parameter): (parameter, value)}`` (outside recording).

    Per parameter, each value goes into the parameter's own count. Per group, the group's
    parameters are partitioned by their count after the load (loaded, or kept when the state
    dict has none for them): parameters with equal values share one count. Returns the
    ``(count, parameter)`` pairs written, for placement on a mesh.
    """
    if current_recorder() is not None:
        raise TraceError(f"{type(opt).__name__}.load_state_dict cannot run while recording")
    written = []
    if not opt._step_per_group:
        for p, value in values.values():
            count = opt.state[p]["step"]
            _set_count(count, value)
            written.append((count, p))
        return written
    for group in opt.param_groups:
        by_value: dict[float, list[Tensor]] = {}
        for p in group["params"]:
            count = opt.state[p].get("step")
            if count is None:
                continue
            value = values[id(p)][1] if id(p) in values else count.numpy()
            by_value.setdefault(float(np.asarray(value, dt.float32)), []).append(p)
        users: dict[int, int] = {}
        for p in group["params"]:
            if "step" in opt.state[p]:
                users[id(opt.state[p]["step"])] = users.get(id(opt.state[p]["step"]), 0) + 1
        for value, members in by_value.items():
            count = opt.state[members[0]]["step"]
            same = all(opt.state[p]["step"] is count for p in members) and users[id(count)] == len(members)
            if same:  # the partition is unchanged here: the tensor keeps its identity
                _set_count(count, value)
            else:
                count = Tensor._from_array(np.array(value, dt.float32), checked=True)
                for p in members:
                    opt.state[p]["step"] = count
                structure_changed()
            written.extend((count, p) for p in members if id(p) in values)
    return written


def _set_count(count: Tensor, value) -> None:
    array = np.array(np.asarray(value).astype(count.dtype))
    array.flags.writeable = False
    count._host = array
    count._device = None
