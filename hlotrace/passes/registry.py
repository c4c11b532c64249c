"""The pass registry: every pass a pipeline string may name.

A pass is a function ``fn(module, options) -> None`` that rewrites ``module`` (an
``ir.Module`` holding ``func.func public @main``) in place; ``options`` is a dict of the
string values given in the pipeline's braces (``remat{policy=sqrt}`` → ``{"policy": "sqrt"}``),
checked against the option names the pass declared. Register it once::

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

PassFn = Callable[..., None]

PASSES_ENV = "HLOTRACE_PASSES"

# What xla_trace runs when neither passes= nor $HLOTRACE_PASSES says otherwise; each pass
# earns its place in BENCHMARKS.md ("Passes"): simplify and cse shrink the module, and
# elide-guards + fuse-reductions make the NaN-exact softmax as fast as jax.jit's.
DEFAULT_PIPELINE = "simplify,elide-guards,cse,fuse-reductions"


@dataclass(frozen=True)
class PassDef:
    name: str
    fn: PassFn | None  # None: an MLIR pass run by name through MLIR's PassManager
    description: str  # one line
    options: dict[str, str] = field(default_factory=dict)  # option name -> one-line help
    exact: bool = True  # results are bitwise equal with and without the pass
    builtin: bool = False  # an MLIR pass (options are handed to MLIR unchecked)
    module: str = ""  # where fn is defined


PASSES: dict[str, PassDef] = {}


def _first_line(doc: str | None) -> str:
    for line in (doc or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def register_pass(name: str, *, options: dict[str, str] | None = None, exact: bool = True, description: str = ""):
    """Decorator: register ``fn(module, options)`` as the pass ``name`` (once only).

    ``options``: the option names the pass accepts, each with a one-line help; a pipeline
    naming another option is refused. ``exact=False`` declares that the pass may change
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
        PASSES[name] = PassDef(name, fn, text, dict(options or {}), exact, False, fn.__module__)
        return fn

    return register


def unregister_pass(name: str) -> None:
    """Remove a user pass (tests, notebooks re-running a cell); MLIR's passes stay."""
    definition = PASSES.get(name)
    if definition is None or definition.builtin:
        raise ValueError(f"no user pass named {name!r}")
    del PASSES[name]


# MLIR's passes that are useful on StableHLO, with what they do there (measured with
# jaxlib 0.10.2: see JAXLIB_NOTES.md "Rewriting and passes").
_BUILTINS = {
    "cse": "MLIR common-subexpression elimination: identical ops on identical operands computed once",
    "canonicalize": "MLIR canonicalizer; on StableHLO it removes dead ops only (no algebraic folding)",
    "symbol-dce": "MLIR: remove private functions nothing calls",
    "remove-dead-values": "MLIR: remove unused results and ops that compute nothing used",
}
for _name, _text in _BUILTINS.items():
    PASSES[_name] = PassDef(_name, None, _text, {}, True, True, "mlir")
