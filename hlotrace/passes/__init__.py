"""Passes over lowered StableHLO modules: a registry, pipelines, and hlotrace's own passes.

>>> from hlotrace import passes
>>> out = passes.run(step.lowered, "simplify,fuse-reductions,cse", dump_to="stages/")
>>> @passes.register_pass("my-pass")
... def my_pass(module, options):
...     '''One line for `hlotrace passes`.'''

See README.md ("Passes") for the pipeline syntax and every pass's measured effect.
"""

from hlotrace.passes.manager import (
    DEFAULT_PIPELINE,
    PASSES_ENV,
    PassSpec,
    PassTiming,
    count_ops,
    main_function,
    parse_pipeline,
    pipeline_text,
    resolve,
    run,
)
from hlotrace.passes.registry import PASSES, PassDef, register_pass, unregister_pass

__all__ = [
    "DEFAULT_PIPELINE",
    "PASSES",
    "PASSES_ENV",
    "PassDef",
    "PassSpec",
    "PassTiming",
    "count_ops",
    "main_function",
    "parse_pipeline",
    "pipeline_text",
    "register_pass",
    "resolve",
    "run",
    "unregister_pass",
]
