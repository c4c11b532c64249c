"""``hlotrace fuzz``: random programs from the op registry against every oracle."""

from __future__ import annotations

import os
import sys
import time

from hlotrace import config
from hlotrace.ops.registry import OPS
from hlotrace.tools.checks import check_writable, finite_float, int_at_least
from hlotrace.tools.common import CliError, add_import_argument, import_arguments

DESCRIPTION = """\
Generate random programs of 1-30 ops from the op registry (each op's own sample strategy
draws its attributes and fresh inputs; earlier results feed later ops where inference
accepts them), and run each against every oracle: the eager NumPy result, the compiled
PJRT result, the compiled result with every registered pass switched on, the StableHLO
reference interpreter (in a subprocess), the program run eagerly by the device engine
(--eager-device: programs of at most 8 ops by default), and a float64 re-execution that
decides which side of a disagreement is wrong. Every disagreement is classified:

  rule bug          the compiled module computes something else than eager NumPy (which the
                    float64 re-execution confirms), or it does not lower or compile
  pass bug          the module agrees as lowered and disagrees after a pass
  spmd bug          with --devices N: the program compiled for a mesh of N devices, its
                    inputs placed at random, disagrees with one device (bitwise where only
                    elementwise ops compute an output, else within the tolerance, the sign
                    of zero aside), or does not compile or run there
  engine bug        run eagerly by the device engine (each op a one-op executable of its
                    lowering rule), the program disagrees with the compiled module (bitwise
                    where only elementwise ops compute an output, else within the tolerance)
                    or with eager NumPy, where the compiled module agrees with NumPy
  crash             the process checking a program died
  XLA disagreement  the interpreter and XLA disagree about the same StableHLO
  undefined input   the eager result is itself off at its precision (overflow, cancellation)

Rule, pass, spmd and engine bugs (and XLA disagreements) are shrunk to a small program and saved in --out
as trace files (the inputs included) that 'hlotrace replay' re-runs and 'hlotrace show'
prints. The same --seed gives the same programs in the same order.

An op without a sample strategy (your own) gets operands its inference accepts: the
number of them from OpDef(arity=N), else from the inference's signature, else (for
'def infer(*avals)') from the NumPy reference's; several dtypes, ranks and shapes are
tried. A program the generator could not build is counted as 'not generated', never as a
bug, and the throughput counts only programs that ran. Each op asked for (--ops; else each
op without a sample strategy) is tried alone first: one that cannot be built at all is an
error (exit 2) naming what it needs.

Exit status: 1 when a rule bug, pass bug, spmd bug or crash was found, 0 otherwise, 2 for bad
arguments or an op that cannot be generated."""

EPILOG = """\
examples:
  hlotrace fuzz --seconds 60
  hlotrace fuzz --seconds 600 --seed 7 --ops matmul,add,exp,sum --out fuzz-out/
  hlotrace fuzz --seconds 120 --passes simplify,fuse-reductions
  hlotrace fuzz --import mylib.ops --ops my_op,add --seconds 60   # your own ops and rules
  hlotrace fuzz --devices 4 --seconds 60    # also each program on a random 4-device mesh
  hlotrace replay fuzz-out/rule-bug-123456.trace.json"""


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "fuzz",
        help="check random programs against every oracle; shrink and save what disagrees",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--seconds", type=finite_float, default=60.0, help="time budget (default: 60)")
    parser.add_argument(
        "--seed", type=int_at_least(0), default=0, help="session seed: the same seed, the same programs (default: 0)"
    )
    parser.add_argument(
        "--programs", type=int_at_least(1), metavar="N", help="stop after N programs (whatever the time)"
    )
    parser.add_argument("--ops", metavar="A,B", help="draw only these ops (default: every registered op)")
    parser.add_argument(
        "--passes", metavar="P,Q", help="check only these passes (default: every registered pass); '' for none"
    )
    parser.add_argument("--pipeline", metavar="PIPELINE", help="also check the module after this whole pipeline")
    add_import_argument(parser, ", so its ops, rules and passes are fuzzed")
    parser.add_argument("--out", default="fuzz-out", metavar="DIR", help="where shrunk repros go (default: fuzz-out)")
    parser.add_argument(
        "--jobs", type=int_at_least(1), default=os.cpu_count() or 1, help="worker processes (default: one per core)"
    )
    parser.add_argument("--max-ops", type=int_at_least(1), default=30, help="longest program (default: 30)")
    parser.add_argument("--no-interpreter", action="store_true", help="skip the StableHLO interpreter oracle")
    parser.add_argument("--stop-on-bug", action="store_true", help="stop at the first rule bug, pass bug or crash")
    parser.add_argument("--no-shrink", action="store_true", help="save failing programs as generated")
    parser.add_argument("--platform", choices=("cpu", "cuda"), help="PJRT platform (default: CUDA if present)")
    parser.add_argument(
        "--devices",
        type=int,
        metavar="N",
        help=f"also run each program on a mesh of N devices, its inputs placed at random, against one device "
        f"(the spmd oracle; 2 to {MAX_CPU_DEVICES}; on the CPU this sets {CPU_DEVICES_ENV})",
    )
    parser.add_argument(
        "--eager-device",
        choices=("short", "all", "off"),
        default="short",
        help="also run each program eagerly under the device engine (one-op executables) against the compiled "
        "module and NumPy: on programs of at most 8 ops (short, the default), on all, or off",
    )
    parser.set_defaults(handler=run)


MAX_CPU_DEVICES = 64
CPU_POOL = 8  # the spmd oracle draws each mesh's devices from at least this many
CPU_DEVICES_ENV = "HLOTRACE_CPU_DEVICES"


def check_devices(devices: int | None) -> None:
    """Validate ``--devices`` and, on the CPU, give hlotrace's client enough devices: it reads
    HLOTRACE_CPU_DEVICES once, when it is made, so the variable is set here (before any
    computation; worker processes inherit it). A client made already with fewer devices (a
    caller that computed before) leaves the variable alone: the oracle then takes a separate
    CPU client of N devices (hlotrace.runtime.cpu_client)."""
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    if devices is None:
        return
    if devices < 2:
        raise CliError(f"--devices must be at least 2 (one device is the compiled oracle), not {devices}")
    if devices > MAX_CPU_DEVICES:
        raise CliError(
            f"--devices {devices}: at most {MAX_CPU_DEVICES} (CPU devices are threads of one process; a mesh of "
            f"more compiles and runs too slowly to fuzz)"
        )
    have = config.get(CPU_DEVICES_ENV)  # a ConfigError when it is not a positive integer
    if have is not None:
        if have < devices:
            raise CliError(
                f"--devices {devices}, but {CPU_DEVICES_ENV}={have} gives the CPU only {have} device(s): "
                f"unset it (hlotrace fuzz then sets it) or set it to at least {devices}"
            )
    elif "cpu" not in runtime._client_cache:
        os.environ[CPU_DEVICES_ENV] = str(max(devices, CPU_POOL))


def _names(text):
    return None if text is None else tuple(n.strip() for n in text.split(",") if n.strip())


def check_pass_names(text: str | None) -> tuple[str, ...] | None:
    """The pass names of a --passes P,Q list (fuzz, replay); CliError naming an unknown one."""
    from hlotrace.passes.manager import parse_pipeline  # lazy: loads jax

    names = _names(text)
    if names:
        try:
            parse_pipeline(",".join(names))
        except Exception as exc:
            raise CliError(f"--passes: {exc}") from None
    return names


def settings_from(args):
    """Settings from parsed arguments; bad names are CliErrors."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise CliError(
            "hlotrace fuzz draws from the ops' hypothesis strategies: pip install 'hlotrace[fuzz]'"
        ) from None
    from hlotrace.testing.fuzz.generate import select_ops  # lazy: loads testing.fuzz.generate (11 modules)
    from hlotrace.testing.fuzz.session import Settings  # lazy: loads testing.fuzz.session (9 modules)

    check_devices(getattr(args, "devices", None))
    import_arguments(args)
    ops = _names(args.ops)
    try:
        selected = select_ops(ops)
    except KeyError as exc:
        raise CliError(f"--ops: {exc.args[0]}") from None
    passes = check_pass_names(args.passes)
    if args.pipeline:
        from hlotrace.passes.manager import parse_pipeline  # lazy: loads jax

        try:
            parse_pipeline(args.pipeline)
        except Exception as exc:
            raise CliError(f"--pipeline: {exc}") from None
    if args.max_ops < 1:
        raise CliError(f"--max-ops must be at least 1, not {args.max_ops}")
    if ops:
        _check_generatable(selected, "--ops: ")
    else:  # every op: those of the --import modules without a sample strategy
        _check_generatable([n for n in selected if OPS[n].sample is None], "")
    return Settings(
        seed=args.seed,
        ops=ops,
        passes=passes,
        pipeline=args.pipeline,
        imports=tuple(args.imports),
        out_dir=args.out,
        interpreter=not args.no_interpreter,
        max_ops=args.max_ops,
        platform=args.platform,
        shrink=not args.no_shrink,
        devices=getattr(args, "devices", None),
        eager_device=args.eager_device,
    )


def _check_generatable(names, prefix: str) -> None:
    """Each of ``names`` alone must build (a user's op whose inference refuses every operand
    set the generator offers would give a session of nothing but unbuilt programs)."""
    from hlotrace.testing.fuzz.generate import cannot_generate  # lazy: loads testing.fuzz.generate (11 modules)

    for name in names:
        why = cannot_generate(name)
        if why is not None:
            raise CliError(f"{prefix}{why}")


class Progress:
    """A one-line progress bar on a terminal; a line every 10 s otherwise."""

    def __init__(self, seconds: float, stream=None):
        self.seconds = seconds
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last = 0.0

    def __call__(self, report) -> None:
        now = time.perf_counter()
        if now - self.last < (0.25 if self.tty else 10.0):
            return
        self.last = now
        rate = report.programs / report.seconds if report.seconds else 0.0
        done = min(1.0, report.seconds / self.seconds) if self.seconds else 1.0
        bar = "#" * int(done * 20)
        others = sum(report.classes.values()) - report.bugs
        line = (
            f"[{bar:<20}] {report.seconds:4.0f}/{self.seconds:.0f} s  {report.programs} programs ({rate:.1f}/s)  "
            f"bugs {report.bugs}  other findings {others}  not generated {report.not_generated}"
        )
        self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def run(args) -> int:
    from hlotrace.testing.fuzz.session import fuzz  # lazy: loads testing.fuzz.session (9 modules)

    if args.seconds <= 0 and not args.programs:
        raise CliError("--seconds must be positive")
    if args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, not {args.jobs}")
    check_writable(args.out, "--out", directory=True)  # now, not after the first bug an hour in
    # Random programs never repeat: storing each in the persistent compile cache would only
    # fill it (and cost a write per program). HLOTRACE_CACHE_DIR set explicitly wins; the
    # worker processes inherit the setting.
    os.environ.setdefault("HLOTRACE_CACHE_DIR", "off")
    settings = settings_from(args)
    progress = Progress(args.seconds)
    seconds = args.seconds if args.seconds > 0 else float("inf")
    report = fuzz(
        settings, seconds, jobs=args.jobs, max_programs=args.programs, progress=progress, stop_on_bug=args.stop_on_bug
    )
    progress.close()
    if not report.programs and report.not_generated:  # nothing ran: the error is the report
        first = report.not_generated_example
        raise CliError(
            f"no program could be generated ({report.not_generated} tried; seed {first.seed}: "
            f"{first.not_generated}); give the op a sample strategy (OpDef(sample=...)) or OpDef(arity=N)"
        )
    print(report.table())
    return 1 if report.bugs else 0
