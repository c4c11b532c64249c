"""Eager engines behind :func:`hlotrace.dispatch.apply`.

- ``device`` (the default): each op application as a cached one-op executable built from
  the op's own lowering rule, on the default device (:mod:`hlotrace.engines.device`).
- ``numpy``: each op's NumPy reference on the host -- the oracle every property test
  compares with (the engine of the ``hlotrace`` command and of the test suite, unless
  $HLOTRACE_EAGER is set).

Choose with ``HLOTRACE_EAGER=device|numpy`` (read when hlotrace is imported) or for a block::

    >>> with ht.eager_engine("numpy"):
    ...     y = (x * 2).sum()          # the NumPy references, on the host

Recording is orthogonal: an ``xla_trace`` first call records the same program whichever
engine computes its eager values.
"""

from __future__ import annotations

import contextlib

from hlotrace import config, dispatch
from hlotrace.errors import HlotraceError
from hlotrace.tensor import HOOKS

ENGINES = ("numpy", "device")
EAGER_ENV = "HLOTRACE_EAGER"
_device_engines: dict = {}  # platform -> DeviceEngine


def device_engine():
    """The process's device engine itself (made on first use): its ``settle()``, ``clear()``,
    ``len()`` -- what ``current_eager_engine()`` only names."""
    engine = _device_engines.get(None)
    if engine is None:
        from hlotrace.engines.device import DeviceEngine  # lazy: loads the lowering and runtime layers

        engine = _device_engines[None] = DeviceEngine()
    return engine


class _DeviceOnFirstUse:
    """The device engine before its first op: selecting it (at ``import hlotrace``) costs
    nothing; the first eager op or device copy loads jaxlib, makes the engine and puts it in
    this placeholder's slots."""

    def __call__(self, op, attrs, tensors, out_aval, key=None):
        return self._resolve()(op, attrs, tensors, out_aval, key)

    def copy(self, t):
        return self._resolve().copy(t)

    def cached(self, key, buffers):
        return None  # nothing is compiled before the engine exists

    def _resolve(self):
        engine = device_engine()
        if dispatch.ENGINE[0] is self:
            _select(engine)
        return engine


_LAZY_DEVICE = _DeviceOnFirstUse()


def _engine(name: str):
    if name not in ENGINES:
        raise HlotraceError(f"unknown eager engine {name!r}: expected one of {', '.join(ENGINES)}")
    if name == "numpy":
        return None
    return _device_engines.get(None) or _LAZY_DEVICE


def _select(engine) -> None:
    dispatch.ENGINE[0] = engine
    HOOKS.device_copy = None if engine is None else engine.copy


def set_eager_engine(name: str) -> None:
    """Make ``name`` ("numpy" or "device") the engine of every eager op from now on."""
    _select(_engine(name))


def current_eager_engine() -> str:
    return "numpy" if dispatch.ENGINE[0] is None else "device"


@contextlib.contextmanager
def eager_engine(name: str):
    """Run the block's eager ops with engine ``name``, then restore the previous one."""
    previous = dispatch.ENGINE[0]
    _select(_engine(name))
    try:
        yield
    finally:
        _select(previous)


def configure_from_environment() -> None:
    """Select the engine $HLOTRACE_EAGER names (device when unset; validated by hlotrace.config)."""
    set_eager_engine(config.get(EAGER_ENV))
