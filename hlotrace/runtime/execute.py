"""Executables bound to their devices: the per-call path (execute, transfers) and what XLA
says about them (optimized HLO, memory plan, cost)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlotrace.metrics import COUNTS


class CompiledQueries:
    """What XLA says about a loaded executable (``self.loaded``): its optimized HLO (the
    per-device, partitioned program for a mesh), memory plan and cost estimate."""

    def hlo_text(self) -> str:
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

        return jaxlib_compat.compiled_hlo_text(self.loaded)

    def memory_stats(self):
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

        return jaxlib_compat.compiled_memory_stats(self.loaded)

    def cost_analysis(self) -> dict:
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

        return jaxlib_compat.cost_analysis(self.loaded)

    def wrapping_runner(self, wrap, single: bool = False):
        """``run`` with every output passed through ``wrap`` (the only one, alone, with
        ``single``); ``Executable`` fuses it into its executor."""
        run = self.run

        def run_wrapped(buffers):
            outputs = run(buffers)
            return wrap(outputs[0]) if single else list(map(wrap, outputs))

        return run_wrapped


@dataclass
class Executable(CompiledQueries):
    """A compiled module bound to one device, with its fast per-call path.

    ``run(buffers)`` takes device buffers in the module's argument order and returns the
    output buffers (still on the device).
    """

    loaded: object
    device: object
    in_avals: list
    out_avals: list
    compile_seconds: float  # compiling, or loading it from the disk cache
    run: object = field(repr=False, default=None)
    _puts: list = field(repr=False, default_factory=list)
    from_disk_cache: bool = False

    def to_device(self, index: int, array: np.ndarray):
        """Copy argument ``index``'s host array to this executable's device."""
        COUNTS["host_to_device_bytes"] += array.nbytes
        return self._puts[index](array)

    def wrapping_runner(self, wrap, single: bool = False):
        """``run`` whose outputs go through ``wrap`` (``tensor.from_device_buffer``) in the same
        closure: a list of them, or with ``single`` the only output alone. One Python call
        per execution instead of three (counted in ``executions`` like ``run``)."""
        import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

        shapes = [(a.shape, a.dtype) for a in self.out_avals]
        return jaxlib_compat.make_executor(self.loaded, shapes, self.device, counts=COUNTS, wrap=wrap, single=single)


def make_executable(loaded, device, in_avals, out_avals, seconds: float, from_disk: bool = False) -> Executable:
    """An Executable around a loaded one-device executable, with its per-call paths."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    exe = Executable(loaded, device, list(in_avals), list(out_avals), seconds, from_disk_cache=from_disk)
    shapes = [(a.shape, a.dtype) for a in out_avals]
    exe.run = jaxlib_compat.make_executor(loaded, shapes, device, counts=COUNTS)  # counts ``executions``
    exe._puts = [jaxlib_compat.make_host_to_device(a.shape, a.dtype, device) for a in in_avals]
    return exe
