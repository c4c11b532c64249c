"""Exceptions raised by hlotrace.

Every user-facing error derives from :class:`HlotraceError` and says, in its message,
which op failed, the shapes/dtypes involved and the user's source line.
"""

from __future__ import annotations

import numbers
import os
import sysconfig

from hlotrace.source import user_location


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


class ArgumentError(HlotraceError, TypeError, ValueError):
    """A public function or constructor was given an argument it does not accept.

    The message names the function, the argument, the value given, what was expected and
    the user's source line (:func:`argument_error`). It is also a TypeError and a ValueError,
    so code written against Python's conventions still catches it.
    """


_REPR_LIMIT = 120
# Frames that are nobody's source line: Python's own modules (runpy under ``python -m``) and
# console scripts (``hlotrace``), which reach hlotrace without a user file in between.
_NOT_USER_CODE = tuple(sysconfig.get_paths()[key] for key in ("stdlib", "scripts"))


def _short_repr(value) -> str:
    """``repr(value)``, cut when long (a big list or array), except strings and paths: a path
    cut short names nothing."""
    text = repr(value)
    if isinstance(value, str | os.PathLike) or len(text) <= _REPR_LIMIT:
        return text
    return text[: _REPR_LIMIT - 3] + "..."


def argument_error(api: str, argument: str, value, expected: str) -> ArgumentError:
    """The :class:`ArgumentError` for ``api(argument=value)`` where ``expected`` was wanted:
    ``nn.Linear: out_features=-3: expected a positive int (at model.py:12 (in build))``.

    >>> raise argument_error("nn.Linear", "out_features", -3, "a positive int")
    """
    location = user_location(2)
    known = location is not None and not location.file.startswith(("<", *_NOT_USER_CODE))
    where = f" (at {location})" if known else ""
    return ArgumentError(f"{api}: {argument}={_short_repr(value)}: expected {expected}{where}")


def is_size(value, minimum: int = 1) -> bool:
    """Whether ``value`` is an int (Python's or NumPy's; bools are not sizes) >= ``minimum``."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= minimum


def positive_int(api: str, argument: str, value) -> int:
    """``value`` when it is an int >= 1, else the ArgumentError naming it."""
    if is_size(value):
        return int(value)  # a NumPy integer becomes a Python int
    raise argument_error(api, argument, value, "a positive int")


def int_tuple(api: str, argument: str, value, count: int, minimum: int = 1) -> tuple[int, ...]:
    """``value`` (an int, or a sequence of ``count`` ints) as ``count`` ints, each at least
    ``minimum`` (PyTorch's ``_pair``, checked); else the ArgumentError naming it.

    >>> int_tuple("nn.Conv2d", "stride", 2, 2)
    (2, 2)
    """
    items = list(value) if isinstance(value, tuple | list) else [value] * count
    if len(items) == count and all(is_size(v, minimum) for v in items):
        return tuple(int(v) for v in items)
    kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
    raise argument_error(api, argument, value, kind if count == 1 else f"{kind} or {count} of them")
