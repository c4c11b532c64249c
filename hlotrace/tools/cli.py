"""The ``hlotrace`` command-line program.

::

    hlotrace lower model.py:step --input 'f32[64,1000]' --input 'i32[5]'   # StableHLO with loc(...)
    hlotrace lower model.py:step --input 'f32[8,8]' --compiled            # compiled HLO text
    hlotrace rules                                                       # op / rule / test coverage
    hlotrace show step.trace.json --lower                                # a saved trace, lowered
    hlotrace passes                                                      # the passes pipelines may name
    hlotrace export step.trace.json -o step.mlirbc                       # portable artifact, composites kept
    hlotrace fuzz --seconds 60                                           # random programs vs every oracle
    hlotrace replay fuzz-out/rule-bug-123.trace.json                     # re-run a saved repro

User mistakes (a missing or broken file, an unknown function, a malformed ``--input``, the
wrong number of inputs, a bad trace file, an hlotrace error while recording or lowering)
print one line ``hlotrace: error: ...`` on stderr and exit with status 2. ``main`` returns
the exit status instead of raising ``SystemExit`` (the console script passes it to
``sys.exit``), so tests can call ``main([...])`` in-process.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import sys
import traceback
from collections.abc import Sequence

PROG = "hlotrace"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

ACCEPTED_DTYPES = "f32, f64, f16, bf16, i32, i64, bool"
_SPEC_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[([^\[\]]*)\]\s*$")


class CliError(Exception):
    """A user mistake: reported as one ``hlotrace: error:`` line, exit status 2."""


# -- argument parsing -----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse usage errors: usage, then one error line, status 2
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


_FORMATTER = argparse.RawDescriptionHelpFormatter

_MAIN_DESCRIPTION = """\
Record NumPy-eager programs, lower them to StableHLO through hlotrace's per-op rule
registry, compile them with PJRT, and inspect the registries and saved traces."""

_MAIN_EPILOG = """\
examples:
  hlotrace lower model.py:forward --input 'f32[64,1000]'
  hlotrace lower model.py:step --input 'bf16[2,3]' --input 'f32[]' --compiled
  hlotrace rules --json
  hlotrace show forward.trace.json --lower
  hlotrace passes
  hlotrace fuzz --seconds 60 --ops matmul,add,exp

Run 'hlotrace COMMAND --help' for a command's options. User errors print one line
'hlotrace: error: ...' and exit with status 2."""

_LOWER_DESCRIPTION = f"""\
Import FILE.py, call FUNC once on random inputs while recording it with
hlotrace.jit.xla_trace, and print the lowered StableHLO module on stdout: with the
location of every op (record index, op name and your file:line) unless --no-locations,
or the compiled HLO with --compiled. FUNC may be a plain function or one already
decorated with @xla_trace. A summary (op counts, platform) goes to stderr.

Each --input is DTYPE[SHAPE], one per positional argument of FUNC, in order:
'f32[64,1000]', 'bf16[2,3]', 'i32[5]', 'bool[4,4]', and 'f32[]' for a scalar.
Accepted dtypes: {ACCEPTED_DTYPES} (also float32, float64, float16, bfloat16, int32, int64, pred).
Floats are drawn from a standard normal, integers uniformly from 0..9, bool at random."""

_LOWER_EPILOG = """\
examples:
  hlotrace lower model.py:forward --input 'f32[64,1000]'
  hlotrace lower model.py:attention --input 'bf16[2,8,16]' --input 'bf16[2,8,16]' --no-locations
  hlotrace lower model.py:step --input 'f32[8,8]' --input 'i32[8]' --seed 1 --compiled
  hlotrace lower model.py:forward --input 'f32[]' --trace-out forward.trace.json > forward.mlir
  hlotrace lower model.py:forward --input 'f32[64,1000]' --passes 'fuse-reductions,cse'

Quote the specs: brackets are glob characters in most shells."""

_RULES_DESCRIPTION = """\
List every registered op (sorted by family, then name) with its family, whether it has a
lowering rule, whether it has a property test (the generated property tests cover exactly
the ops that declare a sample strategy), its VJP (yes; n/a when the op is not
differentiable; MISSING) and its doc line; then the composites of hlotrace.functional,
which are recorded as the primitive ops they call. Every listed op is a primitive. Lowering
rules registered for no op (stale) are listed on stderr. Exit status 1 if any op lacks a
rule or a sample strategy, or a differentiable op lacks a VJP; 0 otherwise, so CI and
scripts can check coverage. --json fields per op: op, family, primitive, has_rule,
has_property_test, differentiable, has_vjp, vjp, doc."""

_RULES_EPILOG = """\
examples:
  hlotrace rules
  hlotrace rules --json | python -c 'import json,sys; print(json.load(sys.stdin)["missing_rules"])'
  hlotrace rules --json | python -c 'import json,sys; print([o["op"] for o in json.load(sys.stdin)["ops"] if o["has_vjp"]])'
  hlotrace rules > /dev/null || echo 'some op lacks a rule or a property test'"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=_MAIN_DESCRIPTION, epilog=_MAIN_EPILOG, formatter_class=_FORMATTER)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    lower = sub.add_parser(
        "lower",
        help="record a function in a Python file and print its StableHLO (or compiled HLO)",
        description=_LOWER_DESCRIPTION,
        epilog=_LOWER_EPILOG,
        formatter_class=_FORMATTER,
    )
    lower.add_argument("target", metavar="FILE.py:FUNC", help="the Python file and the function in it to record")
    lower.add_argument(
        "--input",
        "-i",
        dest="inputs",
        action="append",
        default=[],
        metavar="DTYPE[SHAPE]",
        help="type of the next positional argument, e.g. 'f32[64,1000]', 'i32[5]', 'f32[]' (repeat per argument)",
    )
    lower.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    lower.add_argument("--no-locations", action="store_true", help="print the module without loc(...) annotations")
    lower.add_argument(
        "--compiled",
        action="store_true",
        help="print the compiled HLO (after XLA's optimizations) instead of StableHLO",
    )
    lower.add_argument("--trace-out", metavar="PATH", help="also save the recorded trace as JSON (+ PATH.npz)")
    lower.add_argument(
        "--passes",
        metavar="PIPELINE",
        help="print the module after this pass pipeline (see 'hlotrace passes'); without it the module as "
        "lowered is printed and the compiled one ran $HLOTRACE_PASSES or the default pipeline",
    )
    lower.add_argument(
        "--platform",
        choices=("cpu", "cuda"),
        help="PJRT platform to compile for (default: $HLOTRACE_PLATFORM, else CUDA if present)",
    )
    lower.set_defaults(handler=_cmd_lower)

    rules = sub.add_parser(
        "rules",
        help="list registered ops with their lowering-rule and property-test coverage",
        description=_RULES_DESCRIPTION,
        epilog=_RULES_EPILOG,
        formatter_class=_FORMATTER,
    )
    rules.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    rules.set_defaults(handler=_cmd_rules)

    from hlotrace.tools import export_cmd, fuzz_cmd, passes_cmd, replay_cmd, show_cmd

    show_cmd.add_parser(sub, _FORMATTER)
    passes_cmd.add_parser(sub, _FORMATTER)
    export_cmd.add_parser(sub, _FORMATTER)
    fuzz_cmd.add_parser(sub, _FORMATTER)
    replay_cmd.add_parser(sub, _FORMATTER)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hlotrace")
    except Exception:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the program on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        print(f"{PROG}: error: a command is required (lower, rules, show, passes, export, fuzz or replay)", file=sys.stderr)
        return 2
    from hlotrace.errors import HlotraceError

    try:
        return args.handler(args)
    except (CliError, HlotraceError) as exc:
        _error_line(str(exc))
        return 2


def _error_line(message: str) -> None:
    one_line = " ".join(message.split()) or "unknown error"
    print(f"{PROG}: error: {one_line}", file=sys.stderr)


# -- lower ----------------------------------------------------------------------------------


def parse_input_spec(spec: str):
    """``"f32[64,1000]"`` → ``((64, 1000), dtype('float32'))``; ``"f32[]"`` is a scalar.

    Raises CliError naming the expected form and the accepted dtypes.
    """
    from hlotrace import dtypes

    def bad(why: str) -> CliError:
        return CliError(
            f"malformed --input {spec!r}: {why}; expected DTYPE[SHAPE] such as 'f32[64,1000]', "
            f"'i32[5]' or 'f32[]' (scalar), with DTYPE one of {ACCEPTED_DTYPES}"
        )

    match = _SPEC_RE.match(spec)
    if match is None:
        raise bad("not of the form DTYPE[d0,d1,...]")
    name, dims = match.group(1), match.group(2).strip()
    dtype = dtypes.from_name(name)
    if dtype is None:
        raise bad(f"unknown dtype {name!r}")
    shape: list[int] = []
    if dims:
        for part in dims.split(","):
            part = part.strip()
            if not part.isdigit():
                raise bad(f"dimension {part!r} is not a non-negative integer")
            shape.append(int(part))
    return tuple(shape), dtype


def random_input(shape: tuple[int, ...], dtype, rng):
    """Random NumPy array: floats standard normal, integers in 0..9, bool fair coin flips."""
    from hlotrace import dtypes

    if dtype == dtypes.bool_:
        return rng.random(shape) < 0.5
    if dtype in dtypes.INTEGER:
        return rng.integers(0, 10, size=shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def _split_target(target: str) -> tuple[str, str]:
    path, sep, func = target.rpartition(":")
    if not sep or not path or not func:
        raise CliError(f"expected FILE.py:FUNC (e.g. model.py:forward), got {target!r}")
    return path, func


def _user_frame(exc: BaseException, user_dir: str) -> traceback.FrameSummary | None:
    """The innermost traceback frame in the user's directory, or None if hlotrace raised it.

    Frames in third-party packages (NumPy, ...) are skipped: an exception NumPy raises
    for the user's own call is the user's; one it raises for hlotrace's call is internal.
    """
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        filename = os.path.abspath(frame.filename)
        if filename.startswith(_PACKAGE_DIR):
            return None
        if "site-packages" in filename or any(filename.startswith(p + os.sep) for p in prefixes):
            continue
        if filename.startswith(user_dir + os.sep):
            return frame
    return None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _import_file(path: str):
    """Import ``path`` as a module; its directory must already be on sys.path."""
    name = os.path.splitext(os.path.basename(path))[0]
    module_name = name if name.isidentifier() else "hlotrace_user_module"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        if previous is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = previous
        where = ""
        frame = _user_frame(exc, os.path.dirname(path))
        if frame is not None and not isinstance(exc, SyntaxError):
            where = f" (at {frame.filename}:{frame.lineno})"
        raise CliError(f"cannot import {path}: {_describe(exc)}{where}") from None
    return module


def _callables_in(module) -> list[str]:
    from hlotrace.jit import TracedFunction

    names = []
    for attr, value in vars(module).items():
        if attr.startswith("_"):
            continue
        if isinstance(value, TracedFunction) or (
            callable(value) and getattr(value, "__module__", None) == module.__name__
        ):
            names.append(attr)
    return sorted(names)


def _find_function(module, path: str, func_name: str):
    obj = module
    for part in func_name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            break
    if obj is None or not callable(obj):
        found = _callables_in(module)
        what = "not found" if obj is None else f"is not callable (it is a {type(obj).__name__})"
        have = f"; callables defined there: {', '.join(found)}" if found else "; it defines no functions"
        raise CliError(f"{func_name!r} {what} in {path}{have}")
    return obj


def _check_arity(fn, func_name: str, inputs: list) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and the like: let the call decide
    try:
        signature.bind(*inputs)
    except TypeError as exc:
        params = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        raise CliError(
            f"{func_name}{signature} cannot be called with {len(inputs)} input(s) "
            f"({exc}); give one --input per positional argument ({len(params)} required: {', '.join(params) or 'none'})"
        ) from None


def _summary(lowered, platform: str, func_name: str, avals: str) -> str:
    counts = {name: n for name, n in lowered.op_counts().items() if name != "func.return"}
    total = sum(counts.values())
    ops = ", ".join(
        f"{name.removeprefix('stablehlo.')} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"{PROG}: {func_name}({avals}): {total} stablehlo ops ({ops or 'none'}); platform {platform}"


def _write_stdout(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def _cmd_lower(args) -> int:
    path, func_name = _split_target(args.target)
    specs = [parse_input_spec(spec) for spec in args.inputs]
    if not os.path.exists(path):
        raise CliError(f"no such file: {path}")
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory, expected a Python file")
    path = os.path.abspath(path)
    user_dir = os.path.dirname(path)

    sys.path.insert(0, user_dir)
    try:
        module = _import_file(path)
        obj = _find_function(module, path, func_name)
        return _lower_function(args, obj, func_name, specs, user_dir)
    finally:
        try:
            sys.path.remove(user_dir)
        except ValueError:
            pass


def _lower_function(args, obj, func_name: str, specs, user_dir: str) -> int:
    import numpy as np

    import hlotrace
    from hlotrace import runtime
    from hlotrace.errors import HlotraceError
    from hlotrace.jit import TracedFunction, xla_trace
    from hlotrace.ops.registry import Aval

    if isinstance(obj, TracedFunction):
        fn = obj.fn
        passes = args.passes if args.passes is not None else obj.passes
        traced = xla_trace(
            fn, capture_as_const=obj.capture_as_const, platform=args.platform or obj.platform, passes=passes
        )
    else:
        fn = obj
        traced = xla_trace(fn, platform=args.platform, passes=args.passes)

    rng = np.random.default_rng(args.seed)
    inputs = [hlotrace.tensor(random_input(shape, dtype, rng), dtype=dtype) for shape, dtype in specs]
    _check_arity(fn, func_name, inputs)

    try:
        traced(*inputs)
    except HlotraceError:
        raise
    except Exception as exc:
        frame = _user_frame(exc, user_dir)
        if frame is None:
            raise  # an internal error: keep the traceback
        raise CliError(f"{func_name} raised {_describe(exc)} (at {frame.filename}:{frame.lineno})") from None

    if args.trace_out:
        try:
            traced.trace.save(args.trace_out)
        except OSError as exc:
            raise CliError(f"cannot write trace to {args.trace_out}: {exc.strerror or exc}") from None

    lowered = traced.lowered if args.passes is None else traced.optimized
    text = traced.executable.hlo_text() if args.compiled else lowered.text(debug_info=not args.no_locations)
    _write_stdout(text)
    avals = ", ".join(str(Aval(shape, dtype)) for shape, dtype in specs)
    print(_summary(lowered, runtime.platform_name(traced.platform), func_name, avals), file=sys.stderr)
    return 0


# -- show -----------------------------------------------------------------------------------


def load_trace(path: str):
    """Trace.load with every malformed-file failure turned into a CliError."""
    from hlotrace.errors import HlotraceError
    from hlotrace.trace import Trace

    if not os.path.exists(path):
        raise CliError(f"no such file: {path}")
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory, expected a trace JSON file")
    try:
        return Trace.load(path)
    except HlotraceError as exc:
        raise CliError(f"bad trace file {path}: {exc}") from None
    except KeyError as exc:
        raise CliError(f"bad trace file {path}: missing or unknown key {exc}") from None
    except (TypeError, ValueError, AttributeError, IndexError, OSError) as exc:
        raise CliError(f"bad trace file {path}: {_describe(exc)}") from None


def _cmd_rules(args) -> int:
    from hlotrace.tools.rules_cmd import run_rules

    return run_rules(args, _write_stdout)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
