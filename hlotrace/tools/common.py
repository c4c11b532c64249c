"""What every ``hlotrace`` command shares: the one-line user error, input specs, importing
the user's file and finding the function in it, reading trace files, writing stdout."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
import traceback

from hlotrace import dtypes
from hlotrace.errors import HlotraceError
from hlotrace.jit import TracedFunction
from hlotrace.trace import Trace

PROG = "hlotrace"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

ACCEPTED_DTYPES = "f32, f64, f16, bf16, i32, i64, bool"
_SPEC_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*\[([^\[\]]*)\]\s*$")


class CliError(Exception):
    """A user mistake: reported as one ``hlotrace: error:`` line, exit status 2."""


def error_line(message: str) -> None:
    one_line = " ".join(message.split()) or "unknown error"
    print(f"{PROG}: error: {one_line}", file=sys.stderr)


def parse_input_spec(spec: str):
    """``"f32[64,1000]"`` → ``((64, 1000), dtype('float32'))``; ``"f32[]"`` is a scalar.

    Raises CliError naming the expected form and the accepted dtypes.
    """

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


def _check_arity(fn, func_name: str, inputs: list, statics: dict | None = None) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and the like: let the call decide
    try:
        signature.bind(*inputs, **(statics or {}))
    except TypeError as exc:
        if statics:
            given = ", ".join(f"{name}={value!r}" for name, value in statics.items())
            raise CliError(
                f"{func_name}{signature} cannot be called with {len(inputs)} input(s) and --static {given} ({exc})"
            ) from None
        params = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        raise CliError(
            f"{func_name}{signature} cannot be called with {len(inputs)} input(s) "
            f"({exc}); give one --input per positional argument ({len(params)} required: {', '.join(params) or 'none'})"
        ) from None


def _write_stdout(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def load_trace(path: str):
    """Trace.load with every malformed-file failure turned into a CliError."""
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


def _non_negative_int(text: str) -> int:
    from hlotrace.tools.checks import int_at_least  # cycle: tools.checks imports this module

    return int_at_least(0)(text)


_non_negative_int.__name__ = "int >= 0"


def add_input_arguments(parser) -> None:
    """--input (repeatable) and --seed: the random arguments a recorded function is called on."""
    parser.add_argument(
        "--input",
        "-i",
        dest="inputs",
        action="append",
        default=[],
        metavar="DTYPE[SHAPE]",
        help="type of the next positional argument, e.g. 'f32[64,1000]', 'i32[5]', 'f32[]' (repeat per argument)",
    )
    parser.add_argument("--seed", type=_non_negative_int, default=0, help="seed of the random inputs (default: 0)")


def add_import_argument(parser, purpose: str) -> None:
    """--import MODULE (repeatable): a module name or .py file imported before the command runs."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help=f"import MODULE (a name or a .py file) first{purpose} (repeatable)",
    )


def import_arguments(args) -> None:
    """Import every --import module; one that fails is a CliError."""
    from hlotrace.testing.fuzz.session import import_user_modules  # lazy: loads testing.fuzz.session (9 modules)

    for name in args.imports:
        try:
            import_user_modules([name])
        except Exception as exc:  # the user's module failed to import
            raise CliError(f"--import {name}: cannot import it: {_describe(exc)}") from None


def add_target_arguments(parser) -> None:
    """TARGET (FILE.py:FUNC or a trace file) with --input/--seed/--platform, as `lower` takes them."""
    parser.add_argument("target", metavar="FILE.py:FUNC|TRACE.json", help="a function to record, or a saved trace")
    add_input_arguments(parser)
    parser.add_argument("--platform", choices=("cpu", "cuda"), help="PJRT platform (default: CUDA if present)")


def check_trace_target(args, target: str) -> None:
    """A trace file takes no --input, --setup or --static: it knows its inputs."""
    for option, given in (
        ("--input", getattr(args, "inputs", None)),
        ("--setup", getattr(args, "setup", None)),
        ("--static", getattr(args, "statics", None)),
    ):
        if given:
            first = given[0] if isinstance(given, list) else given
            raise CliError(f"{option} {first!r} is for FILE.py:FUNC targets; a trace file ({target}) knows its inputs")


def target_trace(args):
    """The Trace named by ``args.target``: a saved trace file, or FILE.py:FUNC recorded once
    (on random --input values, or with --setup on its factory's arguments)."""
    if args.target.endswith(".json"):
        check_trace_target(args, args.target)
        return load_trace(args.target)
    if getattr(args, "setup", None) is not None:
        return setup_target(args, passes="").trace
    from hlotrace.tools.lower_cmd import record_target  # cycle: tools.lower_cmd imports this module

    return record_target(
        args.target, args.inputs, args.seed, args.platform, passes="", static=getattr(args, "statics", ())
    ).trace


def setup_target(args, passes):
    """``args.target`` recorded on the arguments ``--setup``'s factory returns (a
    hlotrace.tools.setup.SetupProgram)."""
    from hlotrace.tools.setup import check_setup_options, record_setup  # cycle: tools.setup imports this module

    check_setup_options(args)
    return record_setup(args.target, args.setup, args.statics, args.platform, passes)


# -- meshes and placed inputs (lower, stages, explain) ----------------------------------

MESH_FORMS = "'4x2:data,model' (sizes, then axis names) or 'data=4,model=2'"
_AXIS_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_mesh(text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``"4x2:data,model"`` or ``"data=4,model=2"`` → ``((4, 2), ("data", "model"))``.

    Raises CliError naming what is wrong and the accepted forms.
    """

    def bad(why: str) -> CliError:
        return CliError(f"malformed --mesh {text!r}: {why}; expected {MESH_FORMS}")

    text = text.strip()
    if "=" in text:
        pairs = [part.partition("=") for part in text.split(",")]
        names = tuple(name.strip() for name, _, _ in pairs)
        sizes = [size.strip() for _, _, size in pairs]
    else:
        sizes_text, sep, names_text = text.partition(":")
        if not sep:
            raise bad("no axis names (the part after ':')")
        sizes = [size.strip() for size in sizes_text.lower().split("x")]
        names = tuple(name.strip() for name in names_text.split(","))
    for size in sizes:
        if not size.isdigit() or int(size) < 1:
            raise bad(f"axis size {size!r} is not a positive integer")
    for name in names:
        if not _AXIS_RE.match(name):
            raise bad(f"axis name {name!r} is not an identifier")
    if len(sizes) != len(names):
        raise bad(f"{len(sizes)} axis size(s) but {len(names)} axis name(s)")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise bad(f"axis name(s) {', '.join(map(repr, repeated))} repeated")
    return tuple(int(s) for s in sizes), names


def split_input(spec: str) -> tuple[str, str | None]:
    """``"f32[8,4]@data"`` → ``("f32[8,4]", "data")``; no ``@``: ``(spec, None)``."""
    value, sep, placement = spec.partition("@")
    return (value, placement) if sep else (spec, None)


def parse_placement(text: str, spec: str):
    """The ``@...`` part of an --input: per dimension an axis name, ``None`` or ``_``
    (replicated) or ``a+b`` (split over both), comma-separated → ``dist.P``."""
    from hlotrace.distributed.mesh import P  # lazy: loads distributed.mesh (15 modules)

    entries: list = []
    for part in text.split(",") if text.strip() else []:
        part = part.strip()
        if part in ("None", "none", "_", ""):
            entries.append(None)
            continue
        axes = tuple(a.strip() for a in part.split("+"))
        for axis in axes:
            if not _AXIS_RE.match(axis):
                raise CliError(
                    f"malformed --input {spec!r}: {axis!r} is not an axis name; after '@' give, per dimension, an "
                    f"axis name, None (replicated) or a+b (split over both), e.g. 'f32[64,1000]@data,None'"
                )
        entries.append(axes if len(axes) > 1 else axes[0])
    return P(*entries)


def add_mesh_argument(parser) -> None:
    """--mesh: run the program on a device mesh, with --input DTYPE[SHAPE]@SPEC placements."""
    parser.add_argument(
        "--mesh",
        metavar="MESH",
        help=f"compile for a mesh of devices, {MESH_FORMS}; place inputs with --input 'f32[64,1000]@data' "
        "(per dimension an axis name, None, or a+b; inputs without '@' are replicated). On the CPU the mesh's "
        "devices come from a CPU client of that many devices",
    )


MAX_CLI_CPU_DEVICES = 64


def make_mesh(text: str | None, platform=None):
    """The dist.Mesh of a --mesh string, or None. On the CPU a mesh larger than hlotrace's
    client takes a separate CPU client of that many devices (as HLOTRACE_CPU_DEVICES would),
    up to MAX_CLI_CPU_DEVICES."""
    if text is None:
        return None
    import math

    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax
    from hlotrace import runtime  # lazy: loads runtime (7 modules)
    from hlotrace.distributed.mesh import Mesh, devices  # lazy: loads distributed.mesh (15 modules)

    shape, names = parse_mesh(text)
    size = math.prod(shape)
    found = devices(platform)
    if len(found) < size and runtime.platform_name(platform) == "cpu" and size <= MAX_CLI_CPU_DEVICES:
        found = list(jaxlib_compat.client_devices(runtime.cpu_client(size)))
    return Mesh(shape, names, devices=found[:size] if len(found) >= size else found)


def place_inputs(inputs, input_specs, mesh):
    """Each input laid out on ``mesh`` as its --input's ``@SPEC`` says (replicated without
    one); without a mesh an ``@SPEC`` is a CliError."""
    placed = []
    for tensor, spec in zip(inputs, input_specs, strict=True):
        placement = split_input(spec)[1]
        if mesh is None:
            if placement is not None:
                raise CliError(f"--input {spec!r} places an input on a mesh: give --mesh too (e.g. --mesh 4:data)")
            placed.append(tensor)
            continue
        import hlotrace.distributed as dist  # lazy: loads distributed (15 modules)

        try:
            sharding = dist.NamedSharding(mesh, parse_placement(placement or "", spec))
            sharding.check(tensor.shape, f"--input {spec!r}")
        except HlotraceError as exc:
            raise CliError(f"--input {spec!r}: {exc}") from None
        placed.append(dist.shard(tensor, sharding))
    return placed


def target_program(args, passes: str):
    """(trace, compiled function or None) of ``args.target``: with --mesh, FILE.py:FUNC
    recorded on its placed inputs and compiled for the mesh under ``passes``."""
    if getattr(args, "setup", None) is not None and not args.target.endswith(".json"):
        program = setup_target(args, passes)
        return program.trace, program
    if getattr(args, "mesh", None) is None:
        return target_trace(args), None
    if args.target.endswith(".json"):
        raise CliError(
            "--mesh needs a FILE.py:FUNC target (its inputs are placed with --input 'DTYPE[SHAPE]@SPEC'); "
            "a trace file has no placements"
        )
    from hlotrace.tools.lower_cmd import record_target  # cycle: tools.lower_cmd imports this module

    traced = record_target(
        args.target,
        args.inputs,
        args.seed,
        args.platform,
        passes=passes,
        mesh=args.mesh,
        static=getattr(args, "statics", ()),
    )
    return traced.trace, traced
