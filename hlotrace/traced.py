"""``xla_trace`` and ``TracedFunction``: record on the first call, run the compiled PJRT
executable afterwards (the public names are in :mod:`hlotrace.jit`).

>>> @xla_trace
... def step(x, w):
...     return F.tanh(x @ w)
>>> step(x, w)   # eager run, recorded, lowered, compiled
>>> step(x, w)   # compiled executable; outputs stay on the device
>>> step.cache_size, print(step.stablehlo_text)
>>> step.lower(x, w).compile()   # ahead of time, from shapes only (hlotrace.aot)

Arguments may be nested tuples/lists/dicts of Tensors (NumPy arrays are accepted and
wrapped) plus hashable Python values; the signature (structure, shapes, dtypes, static
values) selects the compiled executable, and a new signature records and compiles again.
State (modules, optimizers, random generators' keys; see hlotrace.state) is read and written
back in place on every call (hlotrace.compiled), whether passed or closed over: before a call
that misses the hot path, the holders and Parameters the function closes over are found
again (hlotrace.captures.Closure) and join the arguments' holders, their identities in the key.
"""

from __future__ import annotations

import functools
import itertools
from operator import is_

from hlotrace import recompiles, state
from hlotrace import spmd_hooks as _spmd
from hlotrace.arguments import ArrayArgument, flatten, wrap_arrays
from hlotrace.build import FIRST_CALLS as FIRST_CALLS  # (hlotrace.jit re-exports it)
from hlotrace.build import build_entry, check_first_call, check_megengine_options, choosing_precision
from hlotrace.captures import CaptureGuard, Closure, check_mode
from hlotrace.compiled import CompiledEntry
from hlotrace.errors import TraceError, argument_error
from hlotrace.overrides import OVERRIDES as _OVERRIDES
from hlotrace.overrides import override_token
from hlotrace.passes.selection import call_pipeline, check_pipeline, check_precision, read_passes, read_precision
from hlotrace.platforms import check_platform
from hlotrace.recording import RECORDER
from hlotrace.source import user_location
from hlotrace.tensor import Tensor
from hlotrace.trace import Trace

FAST_KEYS = 64  # aval-identity keys remembered per traced function (see _remember_fast)


def _aval_of(buffer):
    """Replaced by ``jaxlib_compat.buffer_aval`` when a first key is remembered (importing
    it earlier would load jaxlib with hlotrace); until then no key exists to look up."""
    raise AttributeError("no aval-keyed entry yet")


_NONES = itertools.repeat(None)  # map(is_, buffers, _NONES): which buffers are None, at C speed


# -- compiled entries ---------------------------------------------------------------------


class TracedFunction:
    """A function compiled per input signature; see :func:`xla_trace`."""

    def __init__(
        self,
        fn,
        *,
        capture_as_const: bool = False,
        platform: str | None = None,
        passes: str | None = None,
        explain_recompiles: bool | None = None,
        first_call: str | None = None,
        tiered_compile: bool | None = None,
        precision: str | None = None,
    ):
        self.fn = fn
        self.precision = check_precision("xla_trace", precision)  # None: $HLOTRACE_MATMUL_PRECISION per call
        self.explain_recompiles = explain_recompiles
        self.first_call = check_first_call(first_call)
        self.tiered_compile = tiered_compile
        self._signatures: list[dict[str, str]] = []  # recompiles.describe() of each compiled signature
        self._descriptions: dict[tuple, dict[str, str]] = {}  # the same, by cache key (describe_entries)
        self.capture_as_const = check_mode(capture_as_const)
        # Closed-over holders join each call's holders (hlotrace.captures.Closure), unless
        # the function bakes what it closes over in (capture_as_const).
        self._closure = Closure(fn) if self.capture_as_const is False else None
        self._guard: CaptureGuard | None = None  # what the entries baked in (hlotrace.captures)
        self.platform = check_platform("xla_trace", platform)
        check_pipeline(passes)  # a bad pipeline fails at decoration, naming the known passes
        self.passes = passes
        self._cache: dict[tuple, CompiledEntry] = {}
        # The hot paths, for stateless one-device entries called with positional Tensors
        # only (no .grad): by (pipeline, precision, shape, dtype, ...) of the arguments, and by
        # (pipeline, precision, id of each argument buffer's aval, ...) -> entry.run_buffers.
        self._flat_cache: dict[tuple, CompiledEntry] = {}
        self._fast: dict[tuple, object] = {}
        self._fast_avals: dict[tuple, tuple] = {}  # keeps the avals whose ids key _fast alive
        self._flat_entries: set[int] = set()  # ids of the entries in _flat_cache (they live as long)
        self._last: CompiledEntry | None = None
        self._holders: dict = {}  # holder ids -> state.HolderState (the per-call state cache)
        self._placement_memo: list = [None]  # the last call's placements (distributed.compile.prepare)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if RECORDER.get() is not None:
            # Called while another function is being recorded: inline it, so its ops
            # join the outer trace (as a nested jax.jit does).
            return self.fn(*args, **kwargs)
        if self._guard is not None and self._guard.stale():  # capture_as_const="refresh"
            self._forget_entries()
        # Pipeline and precision are in every key: the hot path's raw settings, else the pipeline named.
        raw = self.passes if self.passes is not None else read_passes()
        precision = self.precision or read_precision()
        if not kwargs:
            # Hot path: positional Tensors without a .grad, each buffer's aval (an immutable
            # shape and dtype, shared by the buffers one executable makes) keying the entry by
            # identity; the avals are kept alive beside the key (_remember_fast). One and two
            # arguments are unrolled: every bytecode counts here (a one-op call costs ~1.2x
            # jax.jit's C++ dispatch, of which this is the Python part).
            buffers = run = None
            count_args = len(args)
            try:
                if count_args == 2:
                    a, b = args
                    if type(a) is Tensor and type(b) is Tensor and a._grad is None and b._grad is None:
                        buffers = [a._device, b._device]
                        run = self._fast.get((raw, precision, id(_aval_of(buffers[0])), id(_aval_of(buffers[1]))))
                elif count_args == 1:
                    a = args[0]
                    if type(a) is Tensor and a._grad is None:
                        buffers = [a._device]
                        run = self._fast.get((raw, precision, id(_aval_of(buffers[0]))))
                else:
                    buffers = []
                    for arg in args:
                        if type(arg) is not Tensor or arg._grad is not None:
                            buffers = None
                            break
                        buffers.append(arg._device)
                    else:
                        run = self._fast.get((raw, precision, *map(id, map(_aval_of, buffers))))
            except AttributeError:  # a host value (no buffer yet) among them
                pass
            if buffers is not None and not _OVERRIDES and not (_spmd.active and _spmd.placed(args)):
                if run is not None:
                    return run(buffers)
                # Key by (shape, dtype); the entry copies host values to the device once.
                pipeline = self._pipeline(raw)
                key = [pipeline, precision]
                for arg in args:
                    value = arg._host if arg._host is not None else arg._device
                    key.append(value.shape)
                    key.append(value.dtype)
                entry = self._flat_cache.get(tuple(key))
                if entry is not None:
                    result = entry(args)
                    self._remember_fast((raw, precision), args, entry)
                    return result
        pipeline = self._pipeline(raw)
        try:
            key, leaves, holders, held, slots, inputs, placements = self._key(args, kwargs, pipeline)
        except ArrayArgument:
            return self(*wrap_arrays(args), **wrap_arrays(kwargs))
        entry = self._cache.get(key)
        if entry is not None:
            result = entry(inputs)
            if entry.run_buffers is not None and id(entry) in self._flat_entries and len(inputs) == len(args):
                self._remember_fast((raw, precision), args, entry)
            return result
        signature = recompiles.describe(pipeline, args, kwargs, held, slots)
        if self._closure is not None:  # which objects it closes over (a rebinding shows)
            signature.update(self._closure.describe())
        if self._signatures and recompiles.enabled(self.explain_recompiles):
            recompiles.explain(getattr(self.fn, "__name__", "traced"), user_location(2), signature, self._signatures)
        snapshot = state.Snapshot(inputs)
        num_state = len(held.tensors) if held is not None else 0
        name = getattr(self.fn, "__name__", "traced")
        try:
            _, result = build_entry(
                self.fn,
                args,
                kwargs,
                inputs,
                state.state_positions(len(leaves), num_state, slots),
                snapshot,
                pipeline,
                placements,
                name=name,
                number=len(self._cache) + 1,
                keep=lambda entry, recorder, flat: self._keep(
                    key, name, holders, pipeline, inputs, entry, recorder, flat
                ),
                first_call=self.first_call,
                capture_as_const=self.capture_as_const,
                platform=self.platform,
                tiered_compile=self.tiered_compile,
                precision=precision,
            )
            self._described_new(key, signature)
            return result
        except BaseException:
            # The first call runs eagerly and updates state as it goes: a failure (in the
            # function, the lowering or the compiler, or Ctrl-C) puts every tensor back.
            snapshot.restore()
            raise

    def _key(self, args, kwargs, pipeline: str):
        """``(key, leaves, holders, held, slots, inputs, placements)`` of a call: its cache key
        (everything that selects a compiled entry), its argument leaves, the state holders
        among the arguments and their cached state, the aliasing slots, the distinct input
        tensors and their placements over a mesh (None: one device). Raises ArrayArgument
        when a NumPy array is among the arguments (wrap them and ask again)."""
        leaves: list = []
        key = [pipeline, self.precision or read_precision()]  # the precision as __call__ keys it
        holders: list = []
        flatten(args, leaves, key, holders)
        if kwargs:
            flatten(kwargs, leaves, key, holders)
        # One Tensor object is one input however often the step reaches it (twice among the
        # arguments, as an argument and as a module's parameter, tied weights): the aliasing
        # pattern is part of the key, and so are the shapes/dtypes of every input's .grad.
        # The holders' state is cached between calls (O(1) unless something structural
        # changed, see hlotrace.versions).
        if self._closure is not None:
            # What the function closes over joins the arguments' holders, its identity the key.
            closed = self._closure.holders()
            if closed:
                holders.extend(closed)
                key.append(tuple(map(id, closed)))
        held = None
        if holders:
            held = state.holder_state(self._holders, holders)
            key.append(held.token)
        inputs, slots = state.inputs_of(leaves, held)
        key.append(slots)
        for leaf in leaves:
            if leaf._grad is not None:
                key.append(tuple(None if t._grad is None else (t._grad.shape, t._grad.dtype) for t in leaves))
                break
        if _OVERRIDES:  # lowering.override(...) active: its rules are part of the program
            key.append(override_token())
        placements = None
        if _spmd.active and (placements := _spmd.prepare(inputs, holders, self._placement_memo)) is not None:
            key.append(placements)  # inputs on a mesh (hlotrace.distributed)
        return tuple(key), leaves, holders, held, slots, inputs, placements

    def _keep(self, key, name, holders, pipeline, inputs, entry: CompiledEntry, recorder, flat: bool) -> None:
        """Cache a new entry (build_entry calls it before the entry first runs): under its
        full key, under its arguments' shapes and dtypes when ``flat``, and what it baked in."""
        self._cache[key] = entry
        if recorder.captured_tensors or recorder.called_modules:
            guard = self._guard or CaptureGuard(name, self.capture_as_const)
            guard.add(recorder, holders)
            self._guard = guard or None
        if flat and not holders:  # holders here: closed over (flat arguments hold none)
            self._flat_cache[(pipeline, key[1], *(k for t in inputs for k in (t.shape, t.dtype)))] = entry
            self._flat_entries.add(id(entry))
        self._last = entry

    def _remember_fast(self, raw_settings, args, entry: CompiledEntry) -> None:
        """Key ``entry`` by the identity of its argument buffers' avals (the hottest path),
        after a call of it with ``args`` succeeded. The avals are kept alive beside the key,
        so no other object can take their ids while the key exists."""
        global _aval_of
        from hlotrace.runtime.jaxlib_compat import buffer_aval as _aval_of  # lazy: loads jax

        buffers = [a._device for a in args]
        if any(map(is_, buffers, _NONES)):
            return
        avals = tuple(map(_aval_of, buffers))
        key = (*raw_settings, *map(id, avals))
        if len(self._fast) >= FAST_KEYS:  # e.g. arrays of fresh avals on every call: start over
            self._fast.clear()
            self._fast_avals.clear()
        self._fast[key] = entry.run_buffers
        self._fast_avals[key] = avals

    def _forget_entries(self) -> None:
        """Drop every compiled entry: the next call records again."""
        self._cache.clear()
        self._flat_cache.clear()
        self._fast.clear()
        self._fast_avals.clear()
        self._flat_entries.clear()
        self._descriptions.clear()
        self._guard = None

    def _described_new(self, key, signature: dict[str, str]) -> None:
        """Remember the description of a newly compiled signature (recompile warnings,
        describe_entries)."""
        self._signatures.append(signature)
        self._descriptions[key] = signature

    def _pipeline(self, raw=None) -> str:
        """The pass pipeline a call made now would use (``raw``: $HLOTRACE_PASSES as read)."""
        from hlotrace.runtime.client import platform_name  # lazy: loads jax (a module: cheaper per call)

        return call_pipeline(raw, self.passes, self.platform, platform_name)

    # -- ahead of time (hlotrace.aot) --------------------------------------------------
    def lower(self, *args, **kwargs):
        """Record for these arguments from their shapes and dtypes only -- nothing runs, no
        parameter, optimizer state, ``.grad`` or random key changes -- lower, and run the
        pass pipeline: a :class:`hlotrace.aot.Lowered` (``.as_text()``, ``.trace``,
        ``.compile()``), as ``jax.jit(f).lower(...)``.

        >>> print(step.lower(x, w).as_text())
        >>> compiled = step.lower(x, w).compile()  # step(x, w) then runs it, no compile
        """
        from hlotrace import aot  # lazy: loads jax (the ahead-of-time API)

        with choosing_precision(self.precision or read_precision()):
            return aot.lower(self, args, kwargs)

    # -- inspection ----------------------------------------------------------------------
    @property
    def cache_size(self) -> int:
        """How many input signatures have been compiled."""
        return len(self._cache)

    def _latest(self) -> CompiledEntry:
        if self._last is None:
            raise TraceError(f"{getattr(self.fn, '__name__', 'function')} has not been called yet: nothing is recorded")
        return self._last

    @property
    def trace(self) -> Trace:
        """The Trace recorded by the most recent compilation."""
        return self._latest().trace

    @property
    def lowered(self):
        """The LoweredModule of the most recent compilation, as lowered (before the passes)."""
        return self._latest().lowered

    @property
    def optimized(self):
        """The LoweredModule that was compiled: ``lowered`` after the pass pipeline (its
        ``pass_timings`` say what each pass took)."""
        return self._latest().optimized

    @property
    def stablehlo_text(self) -> str:
        """StableHLO (MLIR text with locations) of the most recent compilation, before the passes."""
        return self._latest().lowered.text()

    @property
    def optimized_text(self) -> str:
        """StableHLO text of what was compiled (after the pass pipeline)."""
        return self._latest().optimized.text()

    def memory_stats(self) -> dict[str, int]:
        """XLA's memory plan of the most recent executable, in bytes: ``temp`` (scratch),
        ``argument``, ``output``, ``alias`` (outputs written into donated inputs) and
        ``generated_code``."""
        return self.executable.memory_stats()

    @property
    def executable(self):
        """The most recent entry's executable (the optimized one: after a tiered first call,
        waiting for its background compile)."""
        entry = self._latest()
        entry.settle()
        return entry.executable

    def entries(self) -> list[CompiledEntry]:
        """The compiled entries, one per signature, oldest first (``describe_entries()``
        says what each is)."""
        return list(self._cache.values())

    def describe_entries(self) -> str:
        """One line per compiled signature, oldest first: each argument's shape and dtype or
        static value, the state holders' structure, aliasing, the pass pipeline, the number of
        recorded ops and the executable's state (compiled, from the disk cache, a tiered
        quick one whose optimized executable is compiling).

        >>> print(step.describe_entries())
        1. args[0]: f32[2,3], args[1]: f32[3,4], passes 'simplify,...' -- 2 ops, compiled
        """
        from hlotrace.aot import describe_entry  # lazy: loads jax

        lines = [
            describe_entry(number, entry, self._descriptions.get(key))
            for number, (key, entry) in enumerate(self._cache.items(), start=1)
        ]
        return "\n".join(lines) or f"{getattr(self.fn, '__name__', 'function')}: no compiled signature yet"


def xla_trace(
    fn=None,
    *,
    capture_as_const: bool = False,
    platform: str | None = None,
    passes: str | None = None,
    explain_recompiles: bool | None = None,
    first_call: str | None = None,
    tiered_compile: bool | None = None,
    precision: str | None = None,
    without_host: bool = True,
    symbolic_shape: bool = False,
):
    """Decorator: record on the first call per input signature, then run compiled.

    Use bare (``@xla_trace``) or with options (``@xla_trace(capture_as_const=True)``).

    capture_as_const: tensors the function closes over are baked in as constants
      (otherwise using one is an error that says where that tensor was created, and the
      modules, optimizers, GradManagers and Parameters it closes over are state, read and
      written back on every call as if passed; see hlotrace.captures.closed_over). A call
      after a captured tensor changed (trained, reloaded) or a closed-over module switched
      train()/eval() warns once (StaleCaptureWarning); ``"refresh"`` re-records instead.
    platform: ``"cpu"`` or ``"cuda"``; default $HLOTRACE_PLATFORM, else CUDA if present.
      A name this installation cannot compile for (``"tpu"``, ``"cuda"`` without a CUDA
      PJRT plugin, an unregistered plugin's name) is an ArgumentError here, at decoration.
    passes: the pass pipeline run over the lowered module before compiling, e.g.
      ``"simplify,fuse-reductions,cse,remat{policy=sqrt}"`` (``""`` runs none); default
      $HLOTRACE_PASSES, else the platform's default (CPU: with ``layout``; see ``hlotrace
      passes --default``). ``hlotrace passes`` lists the passes.
    explain_recompiles: log why each compile after the first happened (the logger
      ``"hlotrace"``); default $HLOTRACE_EXPLAIN_RECOMPILES.
    first_call: ``"eager"`` (default; MegEngine's semantics: the first call runs the NumPy
      references and records) or ``"compiled"``: the first call records from shapes and
      dtypes only, then compiles and runs the executable, so its results are the compiled
      ones (much faster for real models; a value needed while recording, ``.numpy()``, is a
      TraceError). Default $HLOTRACE_FIRST_CALL, else ``"eager"``.
    tiered_compile: ``True``: with ``first_call="compiled"`` on the CPU, the first call
      runs an executable XLA compiled quickly (LLVM -O0: ~5x faster to compile, 2-3x slower
      to run) while the optimized one compiles in a background thread; the second call
      waits for it and every later call runs it. The first call's results may then differ
      from the optimized executable's in the last bits. Default $HLOTRACE_TIERED_COMPILE,
      else off; see :mod:`hlotrace.runtime.tiered`.
    precision: float32 matmuls at ``"highest"``, ``"high"`` or ``"default"`` (README); $HLOTRACE_MATMUL_PRECISION.
    without_host, symbolic_shape: MegEngine's, with its meaning and the one value each that its
      ``xla_trace`` takes too: ``without_host=True`` (Python runs on the recording call only)
      and ``symbolic_shape=False`` (static shapes: another shape compiles another program).
    """
    if fn is not None and not callable(fn):
        raise argument_error("xla_trace", "fn", fn, "a function or a module to compile (or options only)")
    check_megengine_options("xla_trace", without_host, symbolic_shape)
    check_platform("xla_trace", platform)  # at decoration, also for @xla_trace(platform=...)
    options = {
        "capture_as_const": capture_as_const,
        "platform": platform,
        "passes": passes,
        "explain_recompiles": explain_recompiles,
        "first_call": first_call,
        "tiered_compile": tiered_compile,
        "precision": precision,
    }
    if fn is None:
        return functools.partial(xla_trace, **options)
    return TracedFunction(fn, **options)
