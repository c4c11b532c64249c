"""Which pass pipeline a compiled call runs: the ``passes=`` given to ``xla_trace`` (checked
when the function is decorated), else ``$HLOTRACE_PASSES`` as set at the call (read on every
call, so changing it compiles again), else :data:`~hlotrace.passes.registry.DEFAULT_PIPELINE`;
and, the same way, which matmul precision it lowers with: ``precision=``, else
``$HLOTRACE_MATMUL_PRECISION``, else ``"highest"``.

Loads no MLIR bindings: a call on the hot path reads the variables' raw values (the cache keys
on them) and names its pipeline and precision only when it misses.

>>> pipeline_named(read_passes())   # $HLOTRACE_PASSES unset: the default
'simplify,...'
>>> precision_named(read_precision())   # $HLOTRACE_MATMUL_PRECISION unset: the default
'highest'
"""

from __future__ import annotations

import os

from hlotrace import config
from hlotrace.errors import argument_error
from hlotrace.passes.registry import DEFAULT_PIPELINE, PASSES_ENV

PRECISION_ENV = "HLOTRACE_MATMUL_PRECISION"

# $HLOTRACE_PASSES as set (bytes on POSIX, None when unset), by a C-level dict lookup.
read_passes = config.raw_reader(PASSES_ENV)
# $HLOTRACE_MATMUL_PRECISION as set, the same way.
read_precision = config.raw_reader(PRECISION_ENV)


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


def precision_named(raw) -> str:
    """The matmul precision a raw $HLOTRACE_MATMUL_PRECISION value (:data:`read_precision`), or
    a ``precision=`` already checked, names: ``"highest"`` when None; a ConfigError naming the
    variable when its value is none of ``highest``, ``high``, ``default``."""
    if raw in config.MATMUL_PRECISIONS:
        return raw
    return config.parse(PRECISION_ENV, None if raw is None else os.fsdecode(raw))


def check_precision(api: str, precision: str | None) -> str | None:
    """``precision=`` given to ``api`` (``xla_trace``, ``partial_trace``), lower-cased, when it
    names a matmul precision (None: chosen per call), else an ArgumentError at decoration."""
    if precision is None:
        return None
    if isinstance(precision, str) and precision.lower() in config.MATMUL_PRECISIONS:
        return precision.lower()
    raise argument_error(api, "precision", precision, " or ".join(map(repr, config.MATMUL_PRECISIONS)))
