"""Pipelines: parse ``"simplify,fuse-reductions,cse,remat{policy=sqrt}"`` and run it.

:func:`run` clones the module, then runs each pass in order; after every pass it verifies
the module and checks that ``@main``'s signature is unchanged. A pass that raises, or leaves
a module that does not verify, is named in a :class:`PassError`, with the module before and
after it written to a directory (``dump_to``, else $HLOTRACE_DUMP_TO, else a new temporary
directory). Each pass is timed; with ``dump_to`` the module after every pass is written as
``NN.<pass>.mlir``.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass, replace

import hlotrace.passes.selection as selection
import hlotrace.runtime.jaxlib_compat as jaxlib_compat
from hlotrace import config
from hlotrace.errors import PassError
from hlotrace.passes.ir_helpers import clone_module, main_function, module_asm, top_level  # noqa: F401  (public here too)
from hlotrace.passes.op_count import count_ops
from hlotrace.passes.options import check_options
from hlotrace.passes.registry import PASSES, PassDef
from hlotrace.runtime.jaxlib_compat import ir

DUMP_ENV = "HLOTRACE_DUMP_TO"


@dataclass(frozen=True)
class PassSpec:
    """One pipeline element: a registered pass and its options (string values)."""

    name: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def option_dict(self) -> dict[str, str]:
        return dict(self.options)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        return self.name + "{" + " ".join(f"{k}={v}" for k, v in self.options) + "}"


@dataclass(frozen=True)
class PassTiming:
    """What one pass did: its wall time and the module's op count before and after (counted
    by :func:`hlotrace.passes.op_count.op_counts`'s rule)."""

    name: str
    seconds: float
    ops_before: int
    ops_after: int


_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _known() -> str:
    return ", ".join(sorted(PASSES))


def parse_pipeline(text: str | None) -> tuple[PassSpec, ...]:
    """``"a,b{k=v k2=v2},c"`` → PassSpecs (options may also be separated by commas).

    Unknown pass names are refused with the known ones listed, and every pass's options by
    :func:`hlotrace.passes.options.check_options` (the check ``hlotrace passes --check``
    makes). ``""`` (or None) is the empty pipeline.
    """
    _load_own_passes()
    text = (text or "").strip()
    specs: list[PassSpec] = []
    position = 0
    while position < len(text):
        match = _NAME.match(text, position)
        if not match:
            raise PassError(f"pipeline {text!r}: expected a pass name at column {position + 1}; passes: {_known()}")
        name = match.group(0)
        position = match.end()
        options: list[tuple[str, str]] = []
        if position < len(text) and text[position] == "{":
            end = text.find("}", position)
            if end < 0:
                raise PassError(f"pipeline {text!r}: the options of {name!r} have no closing '}}'")
            for item in re.split(r"[\s,]+", text[position + 1 : end].strip()):
                if not item:
                    continue
                key, eq, value = item.partition("=")
                if not eq or not key or not value:
                    raise PassError(f"pipeline {text!r}: option {item!r} of {name!r} is not key=value")
                options.append((key, value))
            position = end + 1
        definition = PASSES.get(name)
        if definition is None:
            raise PassError(f"unknown pass {name!r} in pipeline {text!r}; passes: {_known()}")
        check_options(definition, dict(options))
        specs.append(PassSpec(name, tuple(options)))
        while position < len(text) and text[position].isspace():
            position += 1
        if position < len(text):
            if text[position] != ",":
                raise PassError(f"pipeline {text!r}: expected ',' after {name!r} at column {position + 1}")
            position += 1
            while position < len(text) and text[position].isspace():
                position += 1
            if position == len(text):
                raise PassError(f"pipeline {text!r} ends with ','")
    return tuple(specs)


def _load_own_passes() -> None:
    """Register hlotrace's own passes (:mod:`hlotrace.passes.builtin`), on first use."""
    # In-function: importing the passes loads jaxlib's MLIR bindings, needed only from here on.
    import hlotrace.passes.builtin  # noqa: F401  (lazy: the passes load jaxlib's MLIR bindings, needed only from here on)


def pipeline_text(specs) -> str:
    """The canonical pipeline string (what cache keys and dumps use)."""
    return ",".join(str(s) for s in specs)


def resolve(passes: str | None, platform: str | None = None) -> str:
    """The pipeline to run: ``passes`` when given, else $HLOTRACE_PASSES, else the default of
    ``platform`` (a name as ``hlotrace.runtime.platform_name()`` gives it; None: the part of the
    default every platform runs), as a compiled call on that platform would."""
    if passes is not None:
        return passes
    return selection.pipeline_named(selection.read_passes(), platform)


def run(lowered, pipeline: str | tuple = "", *, dump_to: str | None = None):
    """Run ``pipeline`` over a copy of ``lowered`` (a LoweredModule); return the new one.

    The result's ``pass_timings`` lists a :class:`PassTiming` per pass. With ``dump_to``
    (a directory) the input and the module after each pass are written there.

    >>> out = passes.run(step.lowered, "simplify,cse", dump_to="stages/")
    >>> [(t.name, t.ops_before, t.ops_after) for t in out.pass_timings]
    """
    specs = parse_pipeline(pipeline) if isinstance(pipeline, str) else tuple(pipeline)
    with lowered.module.context:
        module = clone_module(lowered.module)
        signature = str(main_function(module).type)
        timings = []
        if dump_to:
            _write(dump_to, "00.input.mlir", module)
        for number, spec in enumerate(specs, start=1):
            definition = PASSES[spec.name]
            before = module.operation.clone()  # ~1 ms per 1,000 ops; printed only on failure
            count = count_ops(module)
            start = time.perf_counter()
            try:
                _apply(definition, module, spec)
            except PassError:
                raise
            except Exception as exc:
                where = _dump_failure(dump_to, number, spec, before, module)
                raise PassError(
                    f"pass {str(spec)!r} (#{number} of {pipeline_text(specs)!r}) failed on {lowered.name!r}: "
                    f"{type(exc).__name__}: {exc}. {where}"
                ) from exc
            seconds = time.perf_counter() - start
            problem = _check(module, signature)
            if problem:
                where = _dump_failure(dump_to, number, spec, before, module)
                raise PassError(
                    f"pass {str(spec)!r} (#{number} of {pipeline_text(specs)!r}) broke {lowered.name!r}: {problem}. {where}"
                )
            timings.append(PassTiming(spec.name, seconds, count, count_ops(module)))
            if dump_to:
                _write(dump_to, f"{number:02d}.{spec.name}.mlir", module)
    return replace(lowered, module=module, pass_timings=tuple(timings))


def _apply(definition: PassDef, module: ir.Module, spec: PassSpec) -> None:
    if definition.builtin:
        options = " ".join(f"{k}={v}" for k, v in spec.options)
        jaxlib_compat.run_mlir_pass(module, definition.name + (f"{{{options}}}" if options else ""))
    else:
        definition.fn(module, spec.option_dict)


def _check(module: ir.Module, signature: str) -> str:
    try:
        module.operation.verify()
    except ir.MLIRError as exc:
        messages = [f"{d.location}: {d.message}" for d in exc.error_diagnostics] or [str(exc)]
        return "the module does not verify: " + "; ".join(messages)
    try:
        after = str(main_function(module).type)
    except PassError as exc:
        return str(exc)
    if after != signature:
        return f"@main's signature changed from {signature} to {after}"
    return ""


def _dump_failure(dump_to, number: int, spec: PassSpec, before, module: ir.Module) -> str:
    directory = dump_to or config.get(DUMP_ENV) or tempfile.mkdtemp(prefix="hlotrace-pass-")
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{number:02d}.{spec.name}")
    with open(f"{stem}.before.mlir", "w") as f:
        f.write(module_asm(before))
    with open(f"{stem}.after.mlir", "w") as f:
        f.write(module_asm(module, generic=True))
    return f"The module before and after it: {stem}.before.mlir, {stem}.after.mlir"


def _write(directory: str, name: str, module: ir.Module) -> None:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "w") as f:
        f.write(module_asm(module))
