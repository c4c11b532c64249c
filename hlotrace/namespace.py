"""``F``: the functions of :mod:`hlotrace.functional`, for the layers below it.

The op families' VJPs and ``Tensor``'s operators are written with user-level functions
(``F.multiply(ct, y)``, ``x + y`` -> ``F.add``), which ``hlotrace.functional`` gathers from
the families above them. Instead of importing upward, those layers hold this slot;
``hlotrace.functional`` binds itself into it as the last step of its import (``import
hlotrace`` always does), after which ``F.name`` is an ordinary attribute lookup.
"""

from __future__ import annotations


class LateModule:
    """A module's attributes, bound by that module when it finishes importing."""

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def bind(self, module) -> None:
        """Copy ``module``'s attributes into this namespace (later misses fall back to it)."""
        self._module = module
        self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})

    def __getattr__(self, name):  # a miss: not bound yet, or set on the module after binding
        module = self.__dict__.get("_module")
        if module is None:
            raise AttributeError(f"{self._name} is not imported yet (import hlotrace first), so F.{name} is unknown")
        return getattr(module, name)


F = LateModule("hlotrace.functional")
