"""Passes over lowered StableHLO modules: a registry, pipelines, and hlotrace's own passes.

>>> from hlotrace import passes
>>> out = passes.run(step.lowered, "simplify,fuse-reductions,cse", dump_to="stages/")
>>> @passes.register_pass("my-pass")
... def my_pass(module, options):
...     '''One line for `hlotrace passes`.'''

See README.md ("Passes") for the pipeline syntax and every pass's measured effect.
Importing this package loads no MLIR bindings (eager use never imports jaxlib); the
manager's functions load them on first use.
"""

import importlib

from hlotrace.passes.registry import (
    DEFAULT_PIPELINE,
    PASSES,
    PASSES_ENV,
    PLATFORM_PASSES,
    PassDef,
    default_pipeline,
    platform_defaults,
    register_pass,
    unregister_pass,
)

_MANAGER = ("PassSpec", "PassTiming", "count_ops", "main_function", "parse_pipeline", "pipeline_text", "resolve", "run")


def __getattr__(name):
    if name in _MANAGER:
        return getattr(importlib.import_module("hlotrace.passes.manager"), name)
    raise AttributeError(f"module 'hlotrace.passes' has no attribute {name!r}")


__all__ = [
    "DEFAULT_PIPELINE",
    "PASSES",
    "PASSES_ENV",
    "PLATFORM_PASSES",
    "PassDef",
    "PassSpec",
    "PassTiming",
    "count_ops",
    "default_pipeline",
    "main_function",
    "parse_pipeline",
    "pipeline_text",
    "platform_defaults",
    "register_pass",
    "resolve",
    "run",
    "unregister_pass",
]
