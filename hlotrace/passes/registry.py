"""The pass registry: every pass a pipeline string may name.

A pass is a function ``fn(module, options) -> None`` that rewrites ``module`` (an
``ir.Module`` holding ``func.func public @main``) in place; ``options`` is a dict of the
string values given in the pipeline's braces (``remat{policy=sqrt}`` → ``{"policy": "sqrt"}``),
checked against the option names the pass declared and by its ``validate`` function
(:func:`hlotrace.passes.options.check_options`, when the pipeline is parsed). Register it once::

    @register_pass("silu-composite", options={"name": "composite name"})
    def silu_composite(module, options):
        '''x * logistic(x) becomes one stablehlo.composite.'''
        ...

The first line of the docstring is what ``hlotrace passes`` prints. MLIR's own passes
(``cse``, ``canonicalize``, ...) are registered here too, with what they measurably do on
StableHLO.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import hlotrace.passes.options as checks
from hlotrace import config

PassFn = Callable[..., None]

PASSES_ENV = "HLOTRACE_PASSES"

# The part of the default pipeline every platform runs (what xla_trace runs when neither
# passes= nor $HLOTRACE_PASSES says otherwise); each pass earns its place in BENCHMARKS.md
# ("Passes"): simplify and cse shrink the module, and elide-guards + fuse-reductions make the
# NaN-exact softmax as fast as jax.jit's.
DEFAULT_PIPELINE = config.VARIABLES[PASSES_ENV].default  # declared in hlotrace/config.py
# Passes appended to DEFAULT_PIPELINE on one platform only, where they were measured to win
# there (keyed by the platform's name as its PJRT client reports it). layout on XLA:CPU: the
# ResNet-18 CIFAR step in 0.82-0.89x the time and compiled in 0.86x; not measured on a GPU yet.
PLATFORM_PASSES: dict[str, str] = {"cpu": "layout"}


def default_pipeline(platform: str | None) -> str:
    """The pipeline a compiled call on ``platform`` runs when neither ``passes=`` nor
    $HLOTRACE_PASSES chooses one: :data:`DEFAULT_PIPELINE`, then :data:`PLATFORM_PASSES`'
    entry for the platform (None, or a platform without one: DEFAULT_PIPELINE alone).

    >>> default_pipeline("cpu")
    'simplify,elide-guards,cse,fuse-reductions,layout'
    """
    extra = PLATFORM_PASSES.get("cuda" if platform == "gpu" else platform)  # jaxlib's CUDA client says "gpu"
    if not extra:
        return DEFAULT_PIPELINE
    return f"{DEFAULT_PIPELINE},{extra}" if DEFAULT_PIPELINE else extra


def platform_defaults() -> dict[str, str]:
    """The default pipeline of each platform hlotrace compiles for (``cpu``, ``cuda``, and any
    with passes of its own); any other PJRT plugin's platform gets DEFAULT_PIPELINE."""
    return {name: default_pipeline(name) for name in sorted({"cpu", "cuda", *PLATFORM_PASSES})}


@dataclass(frozen=True)
class PassDef:
    name: str
    fn: PassFn | None  # None: an MLIR pass run by name through MLIR's PassManager
    description: str  # one line
    options: dict[str, str] = field(default_factory=dict)  # option name -> one-line help
    exact: bool = True  # results are bitwise equal with and without the pass
    builtin: bool = False  # an MLIR pass (its options are checked by MLIR's parser too)
    module: str = ""  # where fn is defined
    validate: Callable[[dict], object] | None = None  # raises PassError for a bad option value


PASSES: dict[str, PassDef] = {}


def _first_line(doc: str | None) -> str:
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def register_pass(
    name: str,
    *,
    options: dict[str, str] | None = None,
    exact: bool = True,
    description: str = "",
    validate: Callable[[dict], object] | None = None,
):
    """Decorator: register ``fn(module, options)`` as the pass ``name`` (once only).

    ``options``: the option names the pass accepts, each with a one-line help; a pipeline
    naming another option is refused. ``validate``: ``validate(options)`` raises PassError
    naming the option, its bad value and the valid ones; parsing a pipeline calls it, so
    ``hlotrace passes --check`` refuses what running the pass would. ``exact=False`` declares that the pass may change
    arithmetic (results are then compared within tolerance, not bitwise, by the
    differential tests). ``description`` defaults to the first line of the docstring.
    """
    if not name or any(c in name for c in ",{} ="):
        raise ValueError(f"pass name {name!r} must be non-empty and contain none of ',{{}} ='")

    def register(fn: PassFn) -> PassFn:
        if name in PASSES:
            raise ValueError(f"a pass named {name!r} is already registered ({PASSES[name].module or 'MLIR'})")
        text = description or _first_line(fn.__doc__)
        if not text:
            raise ValueError(f"pass {name!r} needs a description (a docstring or description=)")
        PASSES[name] = PassDef(name, fn, text, dict(options or {}), exact, False, fn.__module__, validate)
        return fn

    return register


def unregister_pass(name: str) -> None:
    """Remove a user pass (tests, notebooks re-running a cell); MLIR's passes stay."""
    definition = PASSES.get(name)
    if definition is None or definition.builtin:
        raise ValueError(f"no user pass named {name!r}")
    del PASSES[name]


# MLIR's passes that are useful on StableHLO, with what they do there (measured with
# jaxlib 0.10.2: see JAXLIB_NOTES.md "Rewriting and passes"), and the options MLIR gives them.
_BUILTINS = {
    "cse": "MLIR common-subexpression elimination: identical ops on identical operands computed once",
    "canonicalize": "MLIR canonicalizer; on StableHLO it removes dead ops only (no algebraic folding)",
    "symbol-dce": "MLIR: remove private functions nothing calls",
    "remove-dead-values": "MLIR: remove unused results and ops that compute nothing used",
}
_BUILTIN_OPTIONS = {
    "canonicalize": {
        "max-iterations": ("N: at most N rounds of rewriting (-1: no limit)", checks.integer(-1)),
        "max-num-rewrites": ("N: at most N rewrites (-1: no limit)", checks.integer(-1)),
        "region-simplify": (
            "disabled | normal (default) | aggressive",
            checks.one_of("disabled", "normal", "aggressive"),
        ),
        "top-down": ("true | false: visit ops from the top", checks.boolean),
        "test-convergence": ("true | false: fail when rewriting does not converge", checks.boolean),
        "disable-patterns": ("NAME: a rewrite pattern not to apply", checks.text),
        "enable-patterns": ("NAME: apply only this rewrite pattern", checks.text),
    },
}
for _name, _text in _BUILTINS.items():
    _options = _BUILTIN_OPTIONS.get(_name, {})
    PASSES[_name] = PassDef(
        _name,
        None,
        _text,
        {k: help_text for k, (help_text, _) in _options.items()},
        True,
        True,
        "mlir",
        checks.checks_values(_name, {k: check for k, (_, check) in _options.items()}),
    )
