"""A module's settings: the number, string and None attributes its forward bakes into a
compiled program (``momentum``, ``eps``, ``p``, ``kernel_size``), part of the module tree's
static key (``Module._trace_state``), so assigning one after a step compiled selects another
program instead of running the stale value."""

from __future__ import annotations

_SETTING_TYPES = (int, float, bool, str, type(None))


def is_setting(value) -> bool:
    """A value a module's forward bakes into a compiled program: a number, a string, None,
    or a tuple of them (a kernel size)."""
    if type(value) is tuple:
        return all(type(v) in _SETTING_TYPES for v in value)
    return type(value) in _SETTING_TYPES


def settings_of(module) -> tuple:
    """``(class name, ((name, value), ...))``: ``module``'s public settings (:func:`is_setting`)."""
    found = tuple((k, v) for k, v in vars(module).items() if k[0] != "_" and k != "training" and is_setting(v))
    return type(module).__name__, found


class ModuleKey(tuple):
    """A module tree's static key, ``(training flags, settings)`` in pre-order; ``parts()``
    is what a recompile explanation compares (hlotrace.recompiles)."""

    __slots__ = ()

    def parts(self) -> dict[str, str]:
        flags, settings = self
        out = {"structure": repr(flags)}
        for i, (kind, found) in enumerate(settings):
            if found:
                out[f"settings of module {i} ({kind})"] = ", ".join(f"{k}={v!r}" for k, v in found)
        return out
