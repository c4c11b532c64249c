"""Which pass pipeline a compiled call runs: the ``passes=`` given to ``xla_trace`` (checked
when the function is decorated), else ``$HLOTRACE_PASSES`` as set at the call (read on every
call, so changing it compiles again), else :data:`~hlotrace.passes.registry.DEFAULT_PIPELINE`.

Loads no MLIR bindings: a call on the hot path reads the variable's raw value (the cache keys
on it) and names its pipeline only when it misses.

>>> pipeline_named(read_passes())   # $HLOTRACE_PASSES unset: the default
'simplify,...'
"""

from __future__ import annotations

import os

from hlotrace import config
from hlotrace.passes.registry import DEFAULT_PIPELINE, PASSES_ENV

# $HLOTRACE_PASSES as set (bytes on POSIX, None when unset), by a C-level dict lookup.
read_passes = config.raw_reader(PASSES_ENV)


def pipeline_named(raw) -> str:
    """The pipeline a raw $HLOTRACE_PASSES value (:data:`read_passes`) names: the default
    when unset."""
    if raw is None:
        return DEFAULT_PIPELINE
    return os.fsdecode(raw) if isinstance(raw, bytes) else raw


def check_pipeline(passes: str | None) -> None:
    """An explicit ``passes=`` parsed at decoration: a bad pipeline fails there, naming the
    known passes (None: the pipeline is chosen per call)."""
    if passes is not None:
        from hlotrace.passes.manager import parse_pipeline  # lazy: loads jax

        parse_pipeline(passes)
