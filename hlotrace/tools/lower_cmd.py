"""``hlotrace lower``: record a function of a Python file and print its StableHLO."""

from __future__ import annotations

import contextlib
import os
import sys

from hlotrace.config import MATMUL_PRECISIONS
from hlotrace.errors import HlotraceError
from hlotrace.ops.registry import Aval
from hlotrace.passes.op_count import RULE as OP_COUNT_RULE
from hlotrace.passes.op_count import op_counts
from hlotrace.passes.selection import PRECISION_ENV, precision_named, read_precision
from hlotrace.tools.checks import check_source_file, check_writable, random_inputs
from hlotrace.tools.common import (
    ACCEPTED_DTYPES,
    PROG,
    CliError,
    _check_arity,
    _describe,
    _find_function,
    _import_file,
    _split_target,
    _user_frame,
    _write_stdout,
    add_input_arguments,
    add_mesh_argument,
    make_mesh,
    parse_input_spec,
    place_inputs,
    setup_target,
    split_input,
)
from hlotrace.tools.setup import add_setup_arguments, parse_statics, wrap_traced

DESCRIPTION = f"""\
Import FILE.py, call FUNC once on random inputs while recording it with
hlotrace.jit.xla_trace, and print the lowered StableHLO module on stdout: with the
location of every op (record index, op name and your file:line) unless --no-locations,
or the compiled HLO with --compiled. FUNC may be a plain function or one already
decorated with @xla_trace. A summary (op counts, platform) goes to stderr: {OP_COUNT_RULE},
as in every hlotrace command.

Each --input is DTYPE[SHAPE], one per positional argument of FUNC, in order:
'f32[64,1000]', 'bf16[2,3]', 'i32[5]', 'bool[4,4]', and 'f32[]' for a scalar.
Accepted dtypes: {ACCEPTED_DTYPES} (also float32, float64, float16, bfloat16, int32, int64, pred).
Floats are drawn from a standard normal, integers uniformly from 0..9, bool at random.

With --mesh the program is compiled for a mesh of devices through XLA's SPMD partitioner
(see README, "Many devices (SPMD)"): an input written DTYPE[SHAPE]@SPEC is laid out across
the mesh, SPEC giving per dimension an axis name, None (replicated) or a+b (split over
both axes), e.g. 'f32[64,1000]@data' or 'f32[1000,512]@None,model'; inputs without '@' are
replicated. The module then carries its Shardy annotations (sdy.mesh, sdy.sharding), and
--compiled prints the partitioned per-device HLO with the collectives XLA inserted.

With --setup FILE.py:FACTORY instead of --input, FACTORY() (in FILE.py, which may be the
target's own file) returns (args, kwargs), modules, optimizers and GradManagers included, and
the target is recorded on them from their shapes (nothing runs, no state changes): your own
training step. --static NAME=VALUE passes a keyword argument as a static value."""

EPILOG = """\
examples:
  hlotrace lower model.py:forward --input 'f32[64,1000]'
  hlotrace lower model.py:attention --input 'bf16[2,8,16]' --input 'bf16[2,8,16]' --no-locations
  hlotrace lower model.py:step --input 'f32[8,8]' --input 'i32[8]' --seed 1 --compiled
  hlotrace lower model.py:forward --input 'f32[]' --trace-out forward.trace.json > forward.mlir
  hlotrace lower model.py:forward --input 'f32[64,1000]' --passes 'fuse-reductions,cse'
  hlotrace lower model.py:forward --input 'f32[64,1000]' --precision default
  hlotrace lower model.py:mlp --mesh 4x2:data,model -i 'f32[64,1000]@data' -i 'f32[1000,512]@None,model'
  hlotrace lower model.py:mlp --mesh data=8 -i 'f32[64,1000]@data' -i 'f32[1000,512]' --compiled
  hlotrace lower train.py:train_step --setup train.py:make --static scale=0.5

Quote the specs: brackets are glob characters in most shells."""


def add_parser(sub, formatter) -> None:
    lower = sub.add_parser(
        "lower",
        help="record a function in a Python file and print its StableHLO (or compiled HLO)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    lower.add_argument("target", metavar="FILE.py:FUNC", help="the Python file and the function in it to record")
    add_input_arguments(lower)
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
    lower.add_argument(
        "--precision",
        choices=MATMUL_PRECISIONS,
        help="the precision of float32 matmuls and convolutions (default: $HLOTRACE_MATMUL_PRECISION, else "
        "highest; README, 'Matmul precision')",
    )
    add_mesh_argument(lower)
    add_setup_arguments(lower)
    lower.set_defaults(handler=run)


def _summary(lowered, platform: str, func_name: str, avals: str) -> str:
    counts = op_counts(lowered.module)
    total = sum(counts.values())
    ops = ", ".join(
        f"{name.removeprefix('stablehlo.')} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"{PROG}: {func_name}({avals}): {total} stablehlo ops ({ops or 'none'}); platform {platform}"


def _mesh_summary(traced) -> str:
    """``mesh data=4,model=2 (8 devices): 2 collectives (all-reduce 2)`` for the summary line."""
    from hlotrace.distributed.inspect import collectives, mesh_axes  # lazy: loads distributed.inspect (16 modules)

    exe = traced.executable
    axes = mesh_axes(exe)
    mesh = ",".join(f"{name}={size}" for name, size in axes) if axes else "one device"
    found = collectives(traced)
    kinds: dict[str, int] = {}
    for c in found:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    listed = ", ".join(f"{k} {n}" for k, n in kinds.items())
    return f"mesh {mesh}: {len(found)} collectives" + (f" ({listed})" if listed else "")


def record_target(target: str, input_specs, seed: int = 0, platform=None, passes=None, mesh=None, static=()):
    """Import FILE.py, find FUNC, call it once on random inputs of ``input_specs`` (strings
    such as 'f32[8,8]', or 'f32[8,8]@data' with ``mesh``, a --mesh string) and the keyword
    arguments of ``static`` (--static NAME=VALUE texts) under xla_trace and return the
    TracedFunction (compiled, with its trace). Every user mistake is a CliError."""
    path, func_name = _split_target(target)
    statics = parse_statics(static)
    specs = [parse_input_spec(split_input(spec)[0]) for spec in input_specs]
    for spec in input_specs:  # before importing the user's file: an '@' needs --mesh
        if mesh is None and split_input(spec)[1] is not None:
            raise CliError(f"--input {spec!r} places an input on a mesh: give --mesh too (e.g. --mesh 4:data)")
    mesh = make_mesh(mesh, platform)
    check_source_file(path)
    path = os.path.abspath(path)
    user_dir = os.path.dirname(path)

    sys.path.insert(0, user_dir)
    try:
        module = _import_file(path)
        obj = _find_function(module, path, func_name)
        return _record(obj, func_name, specs, user_dir, seed, platform, passes, (mesh, input_specs), statics)
    finally:
        try:
            sys.path.remove(user_dir)
        except ValueError:
            pass


def _record(obj, func_name: str, specs, user_dir: str, seed: int, platform, passes, placement=(None, ()), statics=None):
    statics = statics or {}
    traced = wrap_traced(obj, platform, passes)
    fn = traced.fn

    mesh, input_specs = placement
    texts = [split_input(text)[0] for text in input_specs] or [f"{dtype}{list(shape)}" for shape, dtype in specs]
    inputs = random_inputs(specs, texts, seed)
    _check_arity(fn, func_name, inputs, statics)
    if mesh is not None:
        inputs = place_inputs(inputs, input_specs, mesh)

    try:
        traced(*inputs, **statics)
    except HlotraceError:
        raise
    except Exception as exc:
        frame = _user_frame(exc, user_dir)
        if frame is None:
            raise  # an internal error: keep the traceback
        raise CliError(f"{func_name} raised {_describe(exc)} (at {frame.filename}:{frame.lineno})") from None
    return traced


@contextlib.contextmanager
def _precision_setting(precision: str | None):
    """$HLOTRACE_MATMUL_PRECISION set to ``precision`` (--precision) inside the block, as before after it."""
    before = read_precision()
    if precision is not None:
        os.environ[PRECISION_ENV] = precision
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PRECISION_ENV, None)
        else:
            os.environ[PRECISION_ENV] = os.fsdecode(before)


def run(args) -> int:
    with _precision_setting(args.precision):
        return _run(args)


def _run(args) -> int:
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    if args.trace_out:
        check_writable(args.trace_out, "--trace-out")
    if args.setup is not None:
        traced = setup_target(args, args.passes)
    else:
        traced = record_target(
            args.target, args.inputs, args.seed, args.platform, args.passes, args.mesh, static=args.statics
        )
    if args.trace_out:
        try:
            traced.trace.save(args.trace_out)
        except OSError as exc:
            raise CliError(f"cannot write trace to {args.trace_out}: {exc.strerror or exc}") from None

    lowered = traced.lowered if args.passes is None else traced.optimized
    text = traced.executable.hlo_text() if args.compiled else lowered.text(debug_info=not args.no_locations)
    _write_stdout(text)
    func_name = _split_target(args.target)[1]
    if args.setup is not None:
        avals = traced.describe()
    else:
        avals = ", ".join(
            str(Aval(shape, dtype)) for shape, dtype in (parse_input_spec(split_input(s)[0]) for s in args.inputs)
        )
        avals = ", ".join(filter(None, [avals, *args.statics]))
    summary = _summary(lowered, runtime.platform_name(traced.platform), func_name, avals)
    function = getattr(traced, "traced", traced)  # --setup: the SetupProgram's TracedFunction
    summary += f"; matmul precision {precision_named(function.precision or read_precision())}"
    if args.mesh is not None:
        summary += "; " + _mesh_summary(traced)
    print(summary, file=sys.stderr)
    return 0
