"""The ``Optimizer`` base class: param groups, state tensors, hyper tensors and
``_trace_state`` (the package docstring, :mod:`hlotrace.optim`, explains the design)."""

from __future__ import annotations

import numpy as np

import hlotrace.optim.steps as steps
from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace import spmd_hooks
from hlotrace.errors import HlotraceError, TraceError, argument_error
from hlotrace.recording import current_recorder
from hlotrace.tensor import Tensor
from hlotrace.versions import GroupList, TrackedGroup, structure_changed

__all__ = ["Optimizer"]


def _set_value(t: Tensor, value) -> None:
    """Replace ``t``'s value in place without applying an op.

    Only for optimizer-owned tensors outside any recording (hyper tensors refreshed from
    Python values): ``Tensor._assign`` would record a constant and an assignment if a
    recording were active, and would be seen by autodiff tapes. The Tensor object is kept,
    so a compiled step that takes it as an input reads the new value on its next call.
    """
    array = np.array(value, dtype=t.dtype)
    array.flags.writeable = False
    t._host = array
    t._device = None


def _recorded_full(shape, value, dtype) -> Tensor:
    """A tensor made by a recorded op (``full``), for state created while recording."""
    return F.full(shape, float(value), dtype=dtype)


def _new_tensor(array: np.ndarray) -> Tensor:
    return Tensor._from_array(np.array(array), checked=True)


class Optimizer:
    """Base class: parameter groups, state, hyper tensors, ``step``/``clear_grad``.

    ``params`` is an iterable of Tensors, or of dicts ``{"params": [...], "lr": ...}``
    (one *parameter group* each; keys a group omits take the constructor's defaults)::

        opt = optim.SGD([{"params": net.body.parameters()},
                         {"params": net.head.parameters(), "lr": 1e-2}], lr=1e-3)

    Subclasses define ``_hyper_names`` (names of the hyper tensors), ``_hyper_values(group)``,
    ``_state_names(group)``, ``_group_key(group)`` (the static structure) and
    ``_update_group(group, hyper)``. A subclass with a ``step`` state advances the counts with
    :meth:`_advance_steps`; ``step_per_group`` chooses one count per parameter or per group
    (:mod:`hlotrace.optim.steps`).
    """

    _hyper_names: tuple[str, ...] = ()

    def __init__(self, params, defaults: dict, step_per_group: bool = False):
        if not isinstance(step_per_group, bool):
            raise argument_error(f"optim.{type(self).__name__}", "step_per_group", step_per_group, "True or False")
        self.defaults = dict(defaults)
        self._step_per_group = step_per_group
        self._spare_steps: list[list[Tensor]] = []  # per group: spare counts (step_per_group)
        self._step_splits = 0  # parameters' counts split off a group's so far (part of the static key)
        self._pending_splits: list[tuple] = []  # splits made while recording (steps.settle)
        # Tracked: a change to the groups is seen by compiled steps in O(1) (hlotrace.versions).
        self.param_groups: list[dict] = GroupList()
        # Tensor (identity hash) -> {state name: Tensor}
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        self._hyper: list[dict[str, Tensor]] = []  # per group: name -> 0-d hyper tensor
        self._hyper_synced: list[dict[str, float]] = []  # per group: name -> value it holds
        if isinstance(params, Tensor):
            raise HlotraceError(
                f"{type(self).__name__}: params must be an iterable of Tensors or of group dicts, "
                f"got a single Tensor (wrap it in a list)"
            )
        if isinstance(params, str | dict) or not hasattr(params, "__iter__"):
            wanted = "an iterable of Tensors or of group dicts (e.g. net.parameters())"
            raise argument_error(f"optim.{type(self).__name__}", "params", params, wanted)
        groups = list(params)
        if not groups:
            raise HlotraceError(f"{type(self).__name__}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    # -- groups ---------------------------------------------------------------------------
    def add_param_group(self, group: dict) -> None:
        """Add a group (``{"params": [...], **hyper-parameters}``); its state is created now."""
        if not isinstance(group, dict) or "params" not in group:
            raise HlotraceError(f"{type(self).__name__}: a parameter group is a dict with a 'params' entry")
        group = TrackedGroup(group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in params:
            if not isinstance(p, Tensor):
                raise HlotraceError(f"{type(self).__name__}: parameters must be Tensors, got {type(p).__name__}")
            if not dt.is_floating(p.dtype):
                raise HlotraceError(f"{type(self).__name__}: a {p.dtype} tensor of shape {p.shape} cannot be optimized")
            if id(p) in seen:
                raise HlotraceError(
                    f"{type(self).__name__}: a parameter of shape {p.shape} appears twice (in one group or in two)"
                )
            seen.add(id(p))
        group["params"] = params  # a TrackedList (TrackedGroup.__setitem__)
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._validate_group(group)
        self.param_groups.append(group)
        self._hyper.append({})
        self._hyper_synced.append({})
        self._spare_steps.append([])
        self._ensure_state()
        self._sync_hyper()

    @property
    def step_per_group(self) -> bool:
        """True: one step count per parameter group (:mod:`hlotrace.optim.steps`); False: one
        per parameter, as PyTorch keeps them. Set by the constructor."""
        return self._step_per_group

    def _all_params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def _validate_group(self, group: dict) -> None:
        for name, value in self._hyper_values(group).items():
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise HlotraceError(
                    f"{type(self).__name__}: {name} must be a number, got {type(value).__name__} {value!r}"
                ) from None
            if not np.isfinite(value) or value < 0:
                raise HlotraceError(f"{type(self).__name__}: {name} must be finite and >= 0, got {value}")

    def _hyper_dtype(self, group: dict) -> np.dtype:
        # float32, or float64 when the group has float64 parameters (so their math stays in float64)
        wide = any(p.dtype == np.float64 for p in group["params"])
        return np.dtype(np.float64) if wide else dt.float32

    # -- subclass hooks -------------------------------------------------------------------
    def _hyper_values(self, group: dict) -> dict[str, float]:
        return {name: group[name] for name in self._hyper_names}

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return ()

    def _group_key(self, group: dict) -> tuple:
        return ()

    def _initial_state(self, group: dict, name: str) -> float:
        """The value a new state tensor ``name`` starts at (0; Adagrad's accumulator differs)."""
        return 0.0

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        raise NotImplementedError

    # -- hyper tensors and state --------------------------------------------------------
    def _sync_hyper(self) -> None:
        """Refresh each hyper tensor whose Python value in ``param_groups`` changed.

        Outside recording only (the values of a recording's inputs are fixed while it
        runs); called by :meth:`step` and :meth:`_trace_state`. While recording it only
        creates missing hyper tensors (an optimizer constructed inside the step), as
        recorded constants.
        """
        recording = current_recorder() is not None
        for group, tensors, synced in zip(self.param_groups, self._hyper, self._hyper_synced, strict=True):
            values = self._hyper_values(group)
            dtype = self._hyper_dtype(group)
            validated = False
            for name, value in values.items():
                old = tensors.get(name)
                if recording:
                    if old is None:
                        # An optimizer constructed inside the recorded step: its hyper-parameters
                        # are constants of that program, as they are Python values of its body.
                        tensors[name] = _recorded_full((), value, dtype)
                        structure_changed()
                        synced[name] = value
                    continue
                if old is not None and synced.get(name) == value and old.dtype == dtype:
                    continue
                if not validated:  # refuse a bad value before any hyper tensor changes
                    self._validate_group(group)
                    validated = True
                value = float(value)
                if old is None or old.dtype != dtype:
                    tensors[name] = _new_tensor(np.array(value, dtype=dtype))
                    structure_changed()
                else:
                    _set_value(old, value)
                synced[name] = value

    def _ensure_state(self) -> None:
        """Create the (zero) state tensors the current settings need and that do not exist yet."""
        recording = current_recorder() is not None
        if self._pending_splits and not recording:
            steps.settle(self)
        for group in self.param_groups:
            names = self._state_names(group)
            for p in group["params"]:
                state = self.state.setdefault(p, {})
                for name in names:
                    if name in state or name == "step":
                        continue
                    if recording:
                        # Only an optimizer constructed inside the recorded step gets here (one
                        # passed in had its state created by _trace_state first): its state
                        # starts at zero on every call, eagerly and compiled alike.
                        state[name] = _recorded_full(p.shape, self._initial_state(group, name), p.dtype)
                        structure_changed()
                    else:
                        state[name] = _new_tensor(np.full(p.shape, self._initial_state(group, name), p.dtype))
                        structure_changed()
            if "step" in names:
                steps.ensure(self, group, recording)

    def _static_key(self) -> tuple:
        key = (
            type(self).__name__,
            tuple(self._group_key(g) for g in self.param_groups),
            tuple(len(g["params"]) for g in self.param_groups),
            tuple(str(self._hyper_dtype(g)) for g in self.param_groups),
        )
        # Per group, a program that split a count off is never run again (hlotrace.optim.steps).
        return (*key, ("step_per_group", self._step_splits)) if self._step_per_group else key

    def _trace_state(self) -> tuple[tuple, list[Tensor]]:
        """``(static_key, tensors)`` for ``xla_trace``.

        Syncs the hyper tensors and creates any missing state first (so call it outside
        recording). ``static_key`` is hashable: the class name, per group the structural
        choices (:meth:`_group_key`), the number of parameters per group and the hyper
        tensors' dtype. ``tensors``, in this fixed order: every parameter of every group
        (group order, then parameter order); then, per parameter in the same order, its
        state tensors in :meth:`_state_names` order (a step count shared by several parameters
        only at its first one); then, per group, its hyper tensors in ``_hyper_names`` order;
        then, with ``step_per_group``, every group's spare counts. A compiled step reads all
        of them and writes back the parameters and state tensors it updates (hyper tensors
        are read only).
        """
        self._sync_hyper()
        self._ensure_state()
        tensors: list[Tensor] = self._all_params()
        shared: set[int] = set()
        for group in self.param_groups:
            names = self._state_names(group)
            for p in group["params"]:
                state = self.state[p]
                for name in names:
                    t = state[name]
                    if name == "step" and self._step_per_group:
                        if id(t) in shared:
                            continue
                        shared.add(id(t))
                    tensors.append(t)
        for hyper in self._hyper:
            tensors.extend(hyper[name] for name in self._hyper_names)
        tensors.extend(steps.spares_of(self))
        return self._static_key(), tensors

    def _advance_steps(self, group: dict) -> dict[int, Tensor]:
        """Advance the step count of each parameter of ``group`` that has a ``.grad`` (once per
        count); ``{id(parameter): count}`` for them. See :mod:`hlotrace.optim.steps`."""
        return steps.advance(self, group)

    # -- stepping -------------------------------------------------------------------------
    def step(self) -> Optimizer:
        """Update every parameter whose ``.grad`` is not None, in place; returns self.

        >>> opt.step().clear_grad()
        """
        if current_recorder() is None:
            self._sync_hyper()
        self._ensure_state()
        for group, hyper in zip(self.param_groups, self._hyper, strict=True):
            self._update_group(group, hyper)
        return self

    def clear_grad(self) -> Optimizer:
        """Set every parameter's ``.grad`` to None; returns self."""
        for p in self._all_params():
            p.grad = None
        return self

    zero_grad = clear_grad

    # -- state dicts ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {name: array}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are numbered across groups in order; arrays are NumPy copies, the other
        values plain Python, so :func:`hlotrace.save` stores it without pickle.
        """
        if self._pending_splits and current_recorder() is None:
            steps.settle(self)
        state: dict[int, dict[str, np.ndarray]] = {}
        groups = []
        index = 0
        for group in self.param_groups:
            entry = {k: v for k, v in group.items() if k != "params"}
            entry["params"] = list(range(index, index + len(group["params"])))
            groups.append(entry)
            for p in group["params"]:
                st = self.state.get(p, {})
                if st:
                    state[index] = {name: np.array(t.numpy(), copy=True) for name, t in st.items()}
                index += 1
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load hyper-parameters and state (copied in place into the existing tensors).

        The group layout (number of groups and of parameters in each) and every state
        array's shape must match; nothing changes unless everything fits.
        """
        name = type(self).__name__
        try:
            groups = list(state_dict["param_groups"])
            loaded_state = {int(k): v for k, v in dict(state_dict["state"]).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise HlotraceError(f"{name}.load_state_dict: not an optimizer state dict ({exc})") from None
        if len(groups) != len(self.param_groups):
            raise HlotraceError(
                f"{name}.load_state_dict: the state dict has {len(groups)} parameter groups, "
                f"the optimizer {len(self.param_groups)}"
            )
        new_groups = []
        params_by_index: dict[int, Tensor] = {}
        names_by_index: dict[int, tuple[str, ...]] = {}
        for i, (saved, group) in enumerate(zip(groups, self.param_groups, strict=True)):
            indices = list(saved.get("params", []))
            if len(indices) != len(group["params"]):
                raise HlotraceError(
                    f"{name}.load_state_dict: group {i} has {len(indices)} parameters in the state dict, "
                    f"{len(group['params'])} in the optimizer"
                )
            merged = dict(group)
            merged.update({k: v for k, v in saved.items() if k != "params"})
            self._validate_group(merged)
            new_groups.append(merged)
            for idx, p in zip(indices, group["params"], strict=True):
                params_by_index[int(idx)] = p
                names_by_index[int(idx)] = self._state_names(merged)
        updates = []
        loaded_steps: dict[int, tuple[Tensor, np.ndarray]] = {}  # id(parameter) -> (it, its count)
        for idx, entries in loaded_state.items():
            if idx not in params_by_index:
                raise HlotraceError(f"{name}.load_state_dict: state for parameter {idx}, which no group lists")
            p = params_by_index[idx]
            expected = set(names_by_index[idx])
            if set(entries) != expected:
                raise HlotraceError(
                    f"{name}.load_state_dict: parameter {idx} has state {sorted(entries)} in the state dict, "
                    f"the optimizer expects {sorted(expected)}"
                )
            for state_name, value in entries.items():
                array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
                shape = () if state_name == "step" else p.shape
                if array.shape != shape:
                    raise HlotraceError(
                        f"{name}.load_state_dict: state {state_name!r} of parameter {idx} has shape "
                        f"{tuple(array.shape)} in the state dict, {tuple(shape)} in the optimizer"
                    )
                if state_name == "step":
                    loaded_steps[id(p)] = (p, array)
                else:
                    updates.append((p, state_name, array))
        for group, merged in zip(self.param_groups, new_groups, strict=True):
            group.update({k: v for k, v in merged.items() if k != "params"})
        self._sync_hyper()
        self._ensure_state()
        for p, state_name, array in updates:
            target = self.state[p][state_name]
            _set_or_assign(target, array)
        written = steps.load(self, loaded_steps)
        self._ensure_state()  # per group: one spare per count again
        if spmd_hooks.active:  # state of a parameter on a mesh goes back onto it
            placed = [(self.state[p][state_name], p) for p, state_name, _ in updates]
            spmd_hooks.keep_placements([*placed, *written])

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in group.items() if k != "params")
        return "\n".join([*lines, ")"])


def _set_or_assign(target: Tensor, array: np.ndarray) -> None:
    """Load ``array`` into state tensor ``target`` (eagerly, outside recording)."""
    if current_recorder() is not None:
        raise TraceError("Optimizer.load_state_dict cannot run while recording")
    _set_value(target, np.asarray(array).astype(target.dtype))
