"""Which pass pipeline a compiled call runs: the ``passes=`` given to ``xla_trace`` (checked
when the function is decorated), else ``$HLOTRACE_PASSES`` as set at the call (read on every
call, so changing it compiles again), else the default pipeline of the platform it compiles
for (:func:`~hlotrace.passes.registry.default_pipeline`: ``layout`` is added on the CPU); and,
the same way, which matmul precision it lowers with: ``precision=``, else
``$HLOTRACE_MATMUL_PRECISION``, else ``"highest"``.

Loads no MLIR bindings: a call on the hot path reads the variables' raw values (the cache keys
on them) and names its pipeline and precision only when it misses; the pipeline it names (the
platform's default resolved) is in every compiled-entry key.

>>> pipeline_named(read_passes(), "cpu")   # $HLOTRACE_PASSES unset: the CPU's default
'simplify,...,layout'
>>> precision_named(read_precision())   # $HLOTRACE_MATMUL_PRECISION unset: the default
'highest'
"""

from __future__ import annotations

import os

from hlotrace import config
from hlotrace.errors import argument_error
from hlotrace.passes.registry import PASSES_ENV, default_pipeline

PRECISION_ENV = "HLOTRACE_MATMUL_PRECISION"
PLATFORM_ENV = "HLOTRACE_PLATFORM"

# $HLOTRACE_PASSES as set (bytes on POSIX, None when unset), by a C-level dict lookup.
read_passes = config.raw_reader(PASSES_ENV)
# $HLOTRACE_MATMUL_PRECISION as set, the same way.
read_precision = config.raw_reader(PRECISION_ENV)


# $HLOTRACE_PLATFORM as set, the same way (the platform a call compiles for, when not given).
read_platform = config.raw_reader(PLATFORM_ENV)
# (platform asked, $HLOTRACE_PLATFORM as set) -> the platform's name as its client reports it.
_PLATFORM_NAMES: dict[tuple, str] = {}


def pipeline_named(raw, platform: str | None = None) -> str:
    """The pipeline a raw $HLOTRACE_PASSES value (:data:`read_passes`) names: ``platform``'s
    default (a name as :func:`compile_platform` gives it; None: the part every platform runs)
    when unset."""
    if raw is None:
        return default_pipeline(platform)
    return os.fsdecode(raw) if isinstance(raw, bytes) else raw


def call_pipeline(raw, passes: str | None, platform: str | None, name_platform) -> str:
    """The pipeline of a compiled call: ``passes=`` when given, else the one ``raw`` (read by
    :data:`read_passes` now when None) names, else the default of the platform a compile for
    ``platform`` runs on (:func:`compile_platform`, with ``name_platform``)."""
    raw = passes if passes is not None else raw if raw is not None else read_passes()
    if raw is not None:
        return pipeline_named(raw)
    return default_pipeline(compile_platform(platform, name_platform))


def compile_platform(platform: str | None, name_platform) -> str:
    """The name of the platform a compile for ``platform`` runs on (None: $HLOTRACE_PLATFORM,
    else CUDA if present), as ``name_platform`` (``hlotrace.runtime.platform_name``, given by
    the caller: this layer is below the runtime) reports it; asked once per (``platform``,
    $HLOTRACE_PLATFORM as set), since the runtime's choice costs a client lookup per call."""
    key = (platform, read_platform())
    name = _PLATFORM_NAMES.get(key)
    if name is None:
        name = _PLATFORM_NAMES[key] = name_platform(platform)
    return name


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
