"""Exceptions raised by hlotrace.

Every user-facing error derives from :class:`HlotraceError` and says, in its message,
which op failed, the shapes/dtypes involved and the user's source line.
"""

from __future__ import annotations


class HlotraceError(Exception):
    """Base class of every error hlotrace raises on purpose."""


class OpError(HlotraceError, TypeError):
    """An op was applied to inputs or attributes it does not accept."""


class TraceError(HlotraceError):
    """Recording a function failed (closed-over tensor, unsupported output, ...)."""


class LoweringError(HlotraceError):
    """A recorded op could not be lowered to StableHLO."""


class BackendError(HlotraceError):
    """Compiling or executing through PJRT failed."""


class ShapeDtypeError(ValueError):
    """Raised by op shape/dtype inference with a plain message.

    ``ops.apply`` turns it into an :class:`OpError` that adds the op name, the input
    shapes/dtypes and the user's source line.
    """


class PassError(HlotraceError):
    """A pass pipeline is malformed, or a pass failed or broke the module it rewrote."""


class ConfigError(HlotraceError, ValueError):
    """An ``HLOTRACE_*`` environment variable holds a value it does not accept (hlotrace.config)."""
