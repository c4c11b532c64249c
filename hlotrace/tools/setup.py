"""``--setup FILE.py:FACTORY`` and ``--static NAME=VALUE``: the commands on a real step.

``hlotrace lower|show|stages|explain|graph model.py:train_step --setup model.py:make`` imports
the target's file, calls ``make()`` (a function of no arguments in FILE.py, which may be the
target's own file) and records ``train_step`` on what it returned, modules, optimizers and
GradManagers included, through the ahead-of-time API (``train_step.lower(*args, **kwargs)``:
from shapes only, nothing runs and no parameter or optimizer state changes). The factory
returns ``(args, kwargs)``: a tuple or list of the positional arguments and a dict of the
keyword arguments (``return (x, y, net, opt, gm), {}``).

``--static NAME=VALUE`` (repeatable) passes ``NAME=VALUE`` as a keyword argument, a static
value of the signature (a Python literal: ``3``, ``0.5``, ``True``, ``'mean'``, ``(2, 2)``;
any other text is a string), with --setup or with --input's random arguments.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys

from hlotrace.errors import HlotraceError
from hlotrace.jit import PartialTracedFunction, TracedFunction, xla_trace
from hlotrace.ops.registry import Aval
from hlotrace.tensor import Tensor
from hlotrace.tools.checks import check_source_file
from hlotrace.tools.common import (
    CliError,
    _describe,
    _find_function,
    _import_file,
    _split_target,
    _user_frame,
)

SETUP_FORM = "FILE.py:FACTORY"
RETURN_FORM = (
    "(args, kwargs): a tuple or list of the positional arguments and a dict of the keyword arguments, "
    "e.g. 'return (x, y, net, opt, gm), {}'"
)


def add_setup_arguments(parser) -> None:
    """--setup FILE.py:FACTORY and --static NAME=VALUE (repeatable)."""
    parser.add_argument(
        "--setup",
        metavar=SETUP_FORM,
        help="call FACTORY() in FILE.py (it may be the target's file) for the target's arguments: it returns "
        "(args, kwargs), modules, optimizers and GradManagers included; the target is recorded from their shapes "
        "(nothing runs, no state changes) instead of on random --input values",
    )
    parser.add_argument(
        "--static",
        dest="statics",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pass NAME=VALUE as a keyword argument, a static value (a Python literal such as 3, 0.5, True, "
        "'mean' or (2, 2); other text is a string); repeatable",
    )


def parse_static(text: str) -> tuple[str, object]:
    """``"scale=3"`` -> ``("scale", 3)``; a list literal becomes a tuple (static values are
    hashable). CliError for anything else, naming the value."""
    name, sep, value_text = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise CliError(f"malformed --static {text!r}: expected NAME=VALUE with NAME a keyword argument's name")
    try:
        value = ast.literal_eval(value_text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = value_text  # plain text: a string
    if isinstance(value, list):
        value = tuple(value)
    try:
        hash(value)
    except TypeError:
        raise CliError(
            f"--static {text!r}: {type(value).__name__} is not a static value; give a number, string, bool, None "
            "or tuple"
        ) from None
    return name, value


def parse_statics(texts) -> dict:
    statics: dict = {}
    for text in texts:
        name, value = parse_static(text)
        if name in statics:
            raise CliError(f"--static {text!r}: {name} is given twice")
        statics[name] = value
    return statics


def check_setup_options(args) -> None:
    """The option combinations --setup does not take, each one line."""
    if getattr(args, "setup", None) is None:
        return
    if getattr(args, "inputs", None):
        raise CliError(f"--setup {args.setup} makes the arguments; --input makes random ones: give one or the other")
    if getattr(args, "mesh", None) is not None:
        raise CliError(
            f"--setup {args.setup}: the factory places its own arguments (dist.shard) on its mesh; --mesh is for "
            "--input targets"
        )


def wrap_traced(obj, platform=None, passes=None):
    """``obj`` (a plain function, or one decorated with xla_trace) as a fresh TracedFunction
    compiling for ``platform`` under ``passes``, keeping the decorator's own options."""
    if isinstance(obj, PartialTracedFunction):
        obj = obj.forward
    if isinstance(obj, TracedFunction):
        passes = passes if passes is not None else obj.passes
        return xla_trace(
            obj.fn,
            capture_as_const=obj.capture_as_const,
            platform=platform or obj.platform,
            passes=passes,
            precision=obj.precision,
        )
    return xla_trace(obj, platform=platform, passes=passes)


def _factory_result(result, factory: str) -> tuple[tuple, dict]:
    if isinstance(result, tuple | list) and len(result) == 2:
        args, kwargs = result
        if isinstance(args, tuple | list) and isinstance(kwargs, dict):
            bad = [k for k in kwargs if not isinstance(k, str) or not k.isidentifier()]
            if bad:
                raise CliError(f"--setup {factory} returned keyword argument names that are not names: {bad!r}")
            return tuple(args), dict(kwargs)
    kind = type(result).__name__
    shown = f"a {kind} of {len(result)}" if isinstance(result, tuple | list) else f"{kind}"
    raise CliError(f"--setup {factory} returned {shown}; expected {RETURN_FORM}")


def _check_call(fn, func_name: str, args, kwargs, setup: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        given = f"{len(args)} positional and {len(kwargs)} keyword argument(s)"
        if kwargs:
            given += f" ({', '.join(kwargs)})"
        raise CliError(
            f"{func_name}{signature} cannot take what --setup {setup} (and --static) gave, {given}: {exc}"
        ) from None


class SetupProgram:
    """A target recorded from the factory's arguments (``Lowered``), as the commands use a
    recorded function: ``trace``, ``lowered``, ``optimized``, ``platform``, and
    ``executable`` (compiled on first use)."""

    def __init__(self, traced, lowered, func_name: str, args, kwargs):
        self.traced = traced
        self.aot = lowered
        self.func_name = func_name
        self.args, self.kwargs = args, kwargs
        self.trace = lowered.trace
        self.lowered = lowered.lowered
        self.optimized = lowered.optimized
        self.platform = traced.platform
        self._compiled = None

    @property
    def executable(self):
        if self._compiled is None:
            self._compiled = self.aot.compile()
        return self._compiled.executable

    def describe(self) -> str:
        """``f32[64,64], i32[64], net=MLP, opt=AdamW, gm=GradManager``: the arguments, short."""
        return ", ".join([*map(_short, self.args), *(f"{k}={_short(v)}" for k, v in self.kwargs.items())])


def _short(value) -> str:
    import numpy as np

    if isinstance(value, Tensor | np.ndarray):
        return str(Aval(tuple(value.shape), value.dtype))
    if isinstance(value, tuple | list):
        inner = ", ".join(map(_short, value))
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    return type(value).__name__


def record_setup(target: str, setup: str, statics=(), platform=None, passes=None) -> SetupProgram:
    """Import the target's file and the factory's, call the factory, and record the target on
    its arguments from their shapes (``lower``); every user mistake is a CliError."""
    path, func_name = _split_target(target)
    setup_path, sep, factory_name = setup.rpartition(":")
    if not sep or not setup_path or not factory_name:
        raise CliError(f"--setup: expected {SETUP_FORM} (e.g. model.py:make_step_args), got {setup!r}")
    static = parse_statics(statics)
    check_source_file(path)
    try:
        check_source_file(setup_path)
    except CliError as exc:
        raise CliError(f"--setup {setup}: {exc}") from None
    path, setup_path = os.path.abspath(path), os.path.abspath(setup_path)
    user_dirs = list(dict.fromkeys([os.path.dirname(path), os.path.dirname(setup_path)]))
    for directory in reversed(user_dirs):
        sys.path.insert(0, directory)
    try:
        module = _import_file(path)
        obj = _find_function(module, path, func_name)
        setup_module = module if setup_path == path else _import_file(setup_path)
        try:
            factory = _find_function(setup_module, setup_path, factory_name)
        except CliError as exc:
            raise CliError(f"--setup {setup}: {exc}") from None
        try:
            result = factory()
        except (Exception, SystemExit) as exc:
            frame = _user_frame(exc, os.path.dirname(setup_path))
            where = f" (at {frame.filename}:{frame.lineno})" if frame is not None else ""
            raise CliError(f"--setup {setup}: {factory_name}() raised {_describe(exc)}{where}") from None
        args, kwargs = _factory_result(result, setup)
        kwargs.update(static)
        traced = wrap_traced(obj, platform, passes)
        _check_call(traced.fn, func_name, args, kwargs, setup)
        try:
            lowered = traced.lower(*args, **kwargs)
        except HlotraceError:
            raise
        except Exception as exc:
            frames = [_user_frame(exc, directory) for directory in user_dirs]
            frame = next((f for f in frames if f is not None), None)
            if frame is None:
                raise  # an internal error: keep the traceback
            raise CliError(f"{func_name} raised {_describe(exc)} (at {frame.filename}:{frame.lineno})") from None
        return SetupProgram(traced, lowered, func_name, args, kwargs)
    finally:
        for directory in user_dirs:
            try:
                sys.path.remove(directory)
            except ValueError:
                pass
