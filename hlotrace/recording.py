"""Recording state shared by every layer above the values: who is recording, which tapes are
active, which module and scope an op runs in, and which tensors are implicit state.

Two recorders implement :class:`Recorder`: :class:`hlotrace.trace.Recorder` (a whole traced
function) and :class:`hlotrace.regions.RegionRecorder` (a control-flow body). While one is
active (``RECORDER``), :func:`hlotrace.dispatch.apply` hands it every op application, and
``Tensor`` hands it every in-place update and detach.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Protocol

# The active recorder, or None when running eagerly.
RECORDER: contextvars.ContextVar = contextvars.ContextVar("hlotrace_recorder", default=None)

# Active autodiff tapes (hlotrace.autodiff.Tape), innermost last; apply() records into each.
TAPES: list = []

# How many Tape.backward calls are running: ops applied meanwhile belong to a backward pass
# (the Recorder marks their records; the remat pass tells forward from backward by it).
BACKWARD_DEPTH = [0]

# Named scopes entered with hlotrace.trace.scope(): (name, instance) pairs, outermost first.
# The Recorder tags each record with the outermost one (fuse-elementwise names composites by it).
SCOPES: list = []

# The nn.Modules being called, outermost first (their attribute names in the caller, the
# root by class name): the Recorder tags each record with the dotted path ("MLP.fc1"), and
# the lowering puts it in front of the location name ("MLP.fc1/rec3:matmul").
MODULE_PATH: list = []


def current_recorder():
    """The active recorder, or None."""
    return RECORDER.get()


class Recorder(Protocol):
    """What :func:`hlotrace.dispatch.apply` and ``Tensor`` ask of the active recorder."""

    abstract: bool  # ops apply their inference only (no values: first_call="compiled", regions)
    called_modules: dict  # nn modules whose __call__ ran while recording, by id
    # The var table (an hlotrace.trace.Trace) records go into; a region recorded inside this
    # recording puts its vars there too, and records holding regions are adopted into it.
    table: object

    def var_of(self, tensor, used_by: str, location) -> int:
        """The recorded value ``tensor`` names (capturing or refusing one from outside)."""

    def add_constant(self, tensor) -> int:
        """Record ``tensor``'s value as a constant of the program."""

    def record(self, op, attrs: dict, inputs, outputs, location) -> None:
        """Append one op application; ``outputs`` is its Tensor, or the tuple of them of an
        op with several results (control flow), whose regions ``attrs`` holds."""

    def alias(self, tensor, same_as) -> None:
        """``tensor`` names the same recorded value as ``same_as`` (detach, no op)."""

    def assign(self, tensor, value, location) -> None:
        """``tensor`` now holds ``value`` (an in-place update)."""


# -- implicit state -------------------------------------------------------------------------
# A tensor a step reaches without any argument leading to it: the key of the default random
# generator. A recording binds one as a late input the first time the function reads it
# (hlotrace.trace.Recorder.var_of); the compiled step then reads and writes it like a
# holder's state, on every call.

_IMPLICIT: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def register_implicit(tensor) -> None:
    """Make ``tensor`` implicit state: read by a recording, it becomes a late input."""
    _IMPLICIT[id(tensor)] = tensor


def is_implicit(tensor) -> bool:
    return _IMPLICIT.get(id(tensor)) is tensor


def implicit_tensors() -> list:
    """Every implicit state tensor alive now."""
    return list(_IMPLICIT.values())


# -- refusing random draws ------------------------------------------------------------------

# Why drawing random numbers is refused right now (see refusing_draws), or None.
_REFUSED: contextvars.ContextVar[str | None] = contextvars.ContextVar("hlotrace_random_refused", default=None)


def draws_refused() -> str | None:
    """Why a random draw is refused here (a region body, a partial_trace backward), or None."""
    return _REFUSED.get()


@contextlib.contextmanager
def refusing_draws(reason: str):
    """Within this block every draw raises TraceError ``... not supported {reason}``."""
    token = _REFUSED.set(reason)
    try:
        yield
    finally:
        _REFUSED.reset(token)
