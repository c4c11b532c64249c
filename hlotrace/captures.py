"""What a compiled function baked in from outside its arguments, and whether it went stale.

``xla_trace(capture_as_const=True)`` bakes the tensors a function closes over into the
program as constants (MegEngine's semantics), and any function bakes in the ``training``
flag of a module it closes over (a parameterless ``Dropout``, say). Training that model
afterwards, or switching it to ``eval()``, would leave the compiled program computing with
the old values, silently. A :class:`CaptureGuard` remembers, per traced function, each
captured tensor's buffers and each closed-over module's flag at recording time; before a call
it checks them (only after some value or module structure changed anywhere:
``hlotrace.versions``), and on a change either warns once per function, naming the tensor
and where it was created (``capture_as_const=True``), or asks for a new recording
(``capture_as_const="refresh"``).
"""

from __future__ import annotations

import warnings

from hlotrace.versions import VERSIONS

REFRESH = "refresh"
CAPTURE_MODES = (False, True, REFRESH)


class StaleCaptureWarning(UserWarning):
    """A compiled function runs with a captured value or module flag that has since changed."""


def check_mode(value):
    """``capture_as_const``'s value, checked (False, True or "refresh")."""
    from hlotrace.errors import TraceError

    if value is None:
        return False
    if isinstance(value, bool) or value == REFRESH:
        return value
    raise TraceError(f"capture_as_const must be True, False or {REFRESH!r}, not {value!r}")


class CaptureGuard:
    """The captured tensors and closed-over module flags of one traced function's entries."""

    def __init__(self, name: str, mode):
        self.name = name
        self.mode = mode
        self.tensors: list = []  # (tensor, host, device, label) at recording time
        self.modules: list = []  # (module, training, label)
        self.seen = None  # the version counters when last found fresh
        self.warned = False

    def add(self, recorder, holders) -> None:
        """Remember what ``recorder`` captured; modules reachable through ``holders`` (the
        call's arguments) are not closed over: their flags are part of the cache key."""
        held = {id(m) for h in holders if callable(getattr(h, "modules", None)) for m in h.modules()}
        closed = [m for m in recorder.called_modules.values() if id(m) not in held]
        names = _parameter_names(closed)
        for t in recorder.captured_tensors:
            self.tensors.append((t, t._host, t._device, _describe(t, names)))
        for m in closed:
            self.modules.append((m, m.training, names.get(id(m), type(m).__name__)))
        self.seen = (VERSIONS.values, VERSIONS.structure)

    def __bool__(self) -> bool:
        return bool(self.tensors or self.modules)

    def stale(self) -> bool:
        """Whether a captured value or flag changed since recording (warns once when the
        mode is not "refresh"); cheap while no version counter moved."""
        now = (VERSIONS.values, VERSIONS.structure)
        if now == self.seen:
            return False
        self.seen = now
        changes = [label for t, host, device, label in self.tensors if not _same_value(t, host, device)]
        changes += [
            f"module {label} (recorded in {'training' if flag else 'eval'} mode, now in "
            f"{'training' if m.training else 'eval'} mode)"
            for m, flag, label in self.modules
            if m.training != flag
        ]
        if not changes:
            return False
        if self.mode == REFRESH:
            return True
        if not self.warned:
            self.warned = True
            shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
            warnings.warn(
                f"{self.name}: the compiled program still uses the value it captured when it was recorded, "
                f"but {shown} changed since. Pass the module (or tensor) as an argument so every call reads "
                f"it, or decorate with xla_trace(capture_as_const={REFRESH!r}) to re-record when it changes "
                f"(warned once per function)",
                StaleCaptureWarning,
                stacklevel=3,
            )
        return False


def _same_value(t, host, device) -> bool:
    """Every in-place update and write-back rebinds a tensor's buffers, so the value is the
    recorded one while one of them is still the object seen at recording time."""
    return (host is not None and t._host is host) or (device is not None and t._device is device)


def _parameter_names(modules) -> dict[int, str]:
    """id -> a readable name (``Net.fc1.weight``) for the closed-over modules, their
    submodules and their state, outermost module first."""
    names: dict[int, str] = {}
    for root in modules:
        prefix = type(root).__name__
        names.setdefault(id(root), prefix)
        for path, m in root.named_modules() if hasattr(root, "named_modules") else ():
            names.setdefault(id(m), f"{prefix}.{path}" if path else prefix)
        for path, t in root._named_state() if hasattr(root, "_named_state") else ():
            names.setdefault(id(t), f"{prefix}.{path}")
    return names


def _describe(t, names) -> str:
    kind = type(t).__name__.lower()
    name = names.get(id(t))
    what = f"{kind} {name}" if name else f"a {kind}"
    where = f" created at {t._origin}" if t._origin else ""
    return f"{what} of shape {list(t.shape)}{where}"
