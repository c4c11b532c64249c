"""Checking a pipeline's pass options: :func:`check_options` is the one function that both
``hlotrace passes --check`` and the pass manager (through ``parse_pipeline``) call, so a
pipeline the check accepts is one the manager runs, and one it refuses names the pass, the
option, the bad value and the values that would do.

A pass declares its option names with ``register_pass(options={name: help})`` and may
check their values with ``validate=fn``: ``fn(options)`` raises PassError for a bad value
(the remat pass hands the same function that reads its options). MLIR's own passes declare
theirs in :mod:`hlotrace.passes.registry` with value checks from here; the options they are
given are then also handed to MLIR's own parser, which has the last word.

>>> check_options(PASSES["remat"], {"policy": "wrong"})
PassError: pass 'remat': policy='wrong' is not one of none, every, sqrt, budget
"""

from __future__ import annotations

from collections.abc import Callable

from hlotrace.errors import PassError

# A value check: the value's problem ("is not an integer"), or None when it is fine.
ValueCheck = Callable[[str], str | None]


def integer(minimum: int | None = None) -> ValueCheck:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return "is not an integer" + (f" (expected an integer >= {minimum})" if minimum is not None else "")
        if minimum is not None and number < minimum:
            return f"must be >= {minimum}"
        return None

    return check


# What LLVM's option parser accepts for a boolean (MLIR's pass options go through it).
BOOLEANS = ("true", "false", "1", "0", "True", "False", "TRUE", "FALSE")


def boolean(value: str) -> str | None:
    return None if value in BOOLEANS else "is not a boolean (expected true, false, 1 or 0)"


def one_of(*choices: str) -> ValueCheck:
    def check(value: str) -> str | None:
        return None if value in choices else f"is not one of {', '.join(choices)}"

    return check


def text(value: str) -> str | None:
    return None


def checks_values(pass_name: str, checks: dict[str, ValueCheck]) -> Callable[[dict], None]:
    """A ``validate`` function for register_pass from one value check per option."""

    def validate(options: dict) -> None:
        for key, value in options.items():
            check = checks.get(key)
            problem = check(value) if check is not None else None
            if problem:
                raise PassError(f"pass {pass_name!r}: {key}={value!r} {problem}")

    return validate


def check_options(definition, options: dict[str, str]) -> None:
    """Refuse ``options`` for the pass ``definition`` (a PassDef) as running it would: an
    option it did not declare, or a value its ``validate`` (for MLIR's passes: MLIR's own
    option parser) refuses. PassError naming the pass, the option, the value and the valid
    ones; None when they are fine."""
    name = definition.name
    for key, value in options.items():
        if key not in definition.options:
            accepted = ", ".join(sorted(definition.options)) or "none"
            raise PassError(f"pass {name!r} has no option {key!r} (its options: {accepted}); got {key}={value}")
    if definition.validate is not None:
        definition.validate(dict(options))
    if definition.builtin and options:
        _check_with_mlir(definition, options)


def _check_with_mlir(definition, options: dict[str, str]) -> None:
    """Hand the options to MLIR's parser on an empty module (what the pipeline will do)."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax (passes.options is imported by import hlotrace)
    from hlotrace.runtime.jaxlib_compat import ir  # lazy: loads jax

    given = " ".join(f"{k}={v}" for k, v in options.items())
    module = ir.Module.parse("module {}", context=jaxlib_compat.shared_context())
    try:
        jaxlib_compat.run_mlir_pass(module, f"{definition.name}{{{given}}}")
    except Exception as exc:  # MLIR refuses an option or its value
        reason = " ".join(str(exc).split()) or type(exc).__name__
        accepted = ", ".join(f"{k} ({h})" for k, h in definition.options.items()) or "none"
        raise PassError(f"pass {definition.name!r}: MLIR refuses {given}: {reason} (its options: {accepted})") from None
