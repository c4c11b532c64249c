"""jaxlib's per-call entry points: host-to-device puts and the executor (the hot path).

Split from :mod:`hlotrace.runtime.jaxlib_compat` (which re-exports the public names); the
same rule holds: every version-sensitive jaxlib call of the call path lives here. Checked
against jax/jaxlib 0.10.x (CPU) and 0.11.2 (CUDA; its ``array_result_handler`` has no
``_skip_checks``, see :func:`result_handler`). A path that falls back to a slower one warns
once. Importing it imports no jax; the functions do.
"""

from __future__ import annotations

import functools
import operator

import numpy as np


def _jax_aval(shape, dtype):
    from jax._src import core

    return core.ShapedArray(tuple(shape), np.dtype(dtype))


def _single_device_sharding(device):
    from jax.sharding import SingleDeviceSharding

    return SingleDeviceSharding(device)


def _is_64_bit(dtype) -> bool:
    return np.dtype(dtype).itemsize == 8


def _x64_scope():
    """A context in which jax keeps 64-bit dtypes on this thread only (jax's global
    ``jax_enable_x64`` flag is left alone: users' own jax code in this process must not
    change behaviour because hlotrace moved a float64 array)."""
    import jax

    scope = getattr(jax, "enable_x64", None)
    if callable(scope):  # jax 0.10: the config State, a thread-local context manager
        return scope(True)
    from jax.experimental import enable_x64  # pragma: no cover (old jax)

    return enable_x64()  # pragma: no cover


_warned_slow_paths: set[str] = set()


def _warn_slow_path(path: str, exc: Exception, cost: str) -> None:
    """Say once per ``path`` that a per-call path fell back to a slower one: a jaxlib that
    changed a signature made every call several times slower, unseen (jax 0.11's result
    handlers on a GPU, 2026-11)."""
    if path not in _warned_slow_paths:
        import logging

        _warned_slow_paths.add(path)
        logging.getLogger("hlotrace").warning(
            "hlotrace: jax's %s entry point could not be used here (%r); its fallback costs %s", path, exc, cost
        )


def _batched_put(shape, dtype, device):
    """``put(ndarray)`` through jax's batched entry point. 64-bit dtypes pass
    ``enable_x64=True`` to that one call: with x64 off jax would otherwise narrow them to
    32 bits while labelling the buffer 64-bit."""
    from jax._src.lib import xla_client as xc

    aval = _jax_aval(shape, dtype)
    sharding = _single_device_sharding(device)
    devices = [device]
    batched = xc.batched_device_put
    if _is_64_bit(dtype):

        def put_wide(array):
            return batched(aval, sharding, [array], devices, enable_x64=True)

        return put_wide

    def put(array):
        return batched(aval, sharding, [array], devices)

    return put


# A value of each 64-bit dtype that 32 bits cannot hold: a transfer that narrows changes it.
_WIDE_PROBES = {np.dtype(np.float64): 1.0 + 2.0**-40, np.dtype(np.int64): 2**40 + 1}
_wide_put_works: dict = {}


def _batched_put_keeps_64_bits(dtype, device) -> bool:
    key = (np.dtype(dtype), device)
    if key not in _wide_put_works:
        probe = np.array([_WIDE_PROBES[np.dtype(dtype)]], dtype)
        try:
            back = np.asarray(_batched_put((1,), dtype, device)(probe))
            _wide_put_works[key] = back.dtype == probe.dtype and bool(np.all(back == probe))
        except Exception:
            _wide_put_works[key] = False
    return _wide_put_works[key]


def make_host_to_device(shape, dtype, device):
    """Return ``put(ndarray) -> device buffer`` for arrays of one shape/dtype.

    ``jax.device_put`` costs ~100 µs here; the batched entry point jax itself uses costs
    ~13 µs. Falls back to ``jax.device_put`` where that entry point is missing (or, for
    64-bit dtypes, where it cannot be told to keep 64 bits; then inside a thread-local
    x64 scope).
    """
    try:
        if _is_64_bit(dtype) and not _batched_put_keeps_64_bits(dtype, device):
            raise TypeError("batched_device_put narrows 64-bit arrays here")
        put = _batched_put(shape, dtype, device)
        put(np.zeros(shape, dtype))  # probe once so a signature change falls back here
        return put
    except Exception as exc:
        import jax

        if not _is_64_bit(dtype):
            _warn_slow_path("batched device put", exc, "~100 us per host array put on the device (jax.device_put)")
            return functools.partial(jax.device_put, device=device)

        def put_in_x64_scope(array):
            with _x64_scope():
                return jax.device_put(array, device)

        return put_in_x64_scope


_handler_kwargs: list[dict] = []


def result_handler(aval, sharding):
    """jax's result handler for one output of ``aval`` laid out as ``sharding`` (committed),
    what jax.jit's own dispatch wraps results with. jax 0.10 takes ``_skip_checks=True``
    (the executable made the buffers for this very sharding, so jax's per-result Python
    checks, ~2 us each, are skipped as jax.jit does); jax 0.11 has no such argument (and no
    such checks): the first handler made tells which, once per process."""
    from jax._src.lib import xla_client as xc

    if _handler_kwargs:
        return xc.array_result_handler(aval, sharding, committed=True, **_handler_kwargs[0])
    for kwargs in ({"_skip_checks": True}, {}):
        try:
            handler = xc.array_result_handler(aval, sharding, committed=True, **kwargs)
        except TypeError:
            continue
        _handler_kwargs.append(kwargs)
        return handler
    return xc.array_result_handler(aval, sharding, committed=True)  # raises the real error


def make_executor(executable, out_shapes_dtypes, device, *, counts=None, wrap=None, single=False):
    """Return ``run(list_of_buffers) -> list_of_buffers`` for a loaded executable.

    Uses per-output result handlers (what jax.jit's dispatch uses) and falls back to
    ``disassemble_into_single_device_arrays``. float64/int64 outputs need no x64 mode: the
    handlers wrap the executable's 64-bit buffers as they are, and reading them back
    (``np.asarray``) keeps 64 bits.

    The per-call path is one closure, no layers (each Python call costs ~0.1 us, a few
    percent of a one-op call): ``counts["executions"]`` is incremented in it when
    ``counts`` is given; ``wrap`` is applied to every output (``run`` then returns the
    wrapped list), or to the only output when ``single`` (``run`` then returns it alone).
    """
    execute_sharded = executable.execute_sharded
    try:
        sharding = _single_device_sharding(device)
        handlers = [result_handler(_jax_aval(s, d), sharding) for s, d in out_shapes_dtypes]
    except Exception as exc:  # no result handlers in this jaxlib: disassemble the results instead
        _warn_slow_path("result handler", exc, "several microseconds per result on every compiled call (disassembled)")

        def disassembled(buffers):
            return [outs[0] for outs in execute_sharded(buffers).disassemble_into_single_device_arrays()]

        return _counted_executor(disassembled, counts, wrap, single)
    if counts is None:
        counts = {"executions": 0}
    if wrap is None:

        def run(buffers):
            counts["executions"] += 1
            return execute_sharded(buffers).consume_with_handlers(handlers)

    elif single:

        def run(buffers):
            counts["executions"] += 1
            return wrap(execute_sharded(buffers).consume_with_handlers(handlers)[0])

    else:

        def run(buffers):
            counts["executions"] += 1
            return list(map(wrap, execute_sharded(buffers).consume_with_handlers(handlers)))

    return run


def _counted_executor(outputs, counts, wrap, single):
    """``make_executor``'s counting and wrapping around another ``outputs(buffers)``."""
    counts = {"executions": 0} if counts is None else counts

    def run(buffers):
        counts["executions"] += 1
        results = outputs(buffers)
        if wrap is None:
            return results
        return wrap(results[0]) if single else list(map(wrap, results))

    return run


# The abstract value of a device buffer (jax's ``ShapedArray``): an immutable object for its
# shape and dtype. Buffers from one result handler or one host-to-device function share the
# same object, so its identity can key a cache (whoever keys on it keeps the object alive).
# An attrgetter, not a def: ``map(buffer_aval, buffers)`` then runs without Python frames.
buffer_aval = operator.attrgetter("aval")


def buffer_is_deleted(buffer) -> bool:
    """Whether a device buffer was deleted (donated to a call, or freed)."""
    return bool(buffer.is_deleted())
