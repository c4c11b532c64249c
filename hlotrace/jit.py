"""``xla_trace``: record on the first call, run the compiled PJRT executable afterwards.

>>> @xla_trace
... def step(x, w):
...     return F.tanh(x @ w)
>>> step(x, w)   # eager run, recorded, lowered, compiled
>>> step(x, w)   # compiled executable; outputs stay on the device
>>> step.cache_size, print(step.stablehlo_text)

Arguments may be nested tuples/lists/dicts of Tensors (NumPy arrays are accepted and
wrapped) plus hashable Python values; the signature (structure, shapes, dtypes, static
values) selects the compiled executable, and a new signature records and compiles again.
"""

from __future__ import annotations

import functools
import operator
import os
from dataclasses import dataclass

import numpy as np

from hlotrace.errors import TraceError
from hlotrace.ops.registry import _RECORDER
from hlotrace.tensor import Tensor
from hlotrace.trace import Recorder, Trace

DUMP_ENV = "HLOTRACE_DUMP_TO"  # also read by hlotrace.lowering.builder on a verifier failure


# -- argument flattening (the per-call hot path) -----------------------------------------


def _flatten(obj, leaves: list, key: list) -> None:
    kind = type(obj)
    if kind is Tensor:
        leaves.append(obj)
        key.append(obj.shape)
        key.append(obj.dtype)
    elif kind is tuple or kind is list:
        key.append((kind, len(obj)))
        for item in obj:
            _flatten(item, leaves, key)
    elif kind is dict:
        names = sorted(obj)
        key.append((dict, tuple(names)))
        for name in names:
            _flatten(obj[name], leaves, key)
    elif isinstance(obj, Tensor):
        leaves.append(obj)
        key.append(obj.shape)
        key.append(obj.dtype)
    elif kind is np.ndarray:
        raise _ArrayArgument
    else:
        try:
            hash(obj)
        except TypeError:
            raise TraceError(
                f"argument of type {kind.__name__} is neither a Tensor (or a tuple/list/dict of them) "
                f"nor a hashable static value; wrap arrays with hlotrace.tensor()"
            ) from None
        key.append((kind, obj))


class _ArrayArgument(Exception):
    """A NumPy array among the arguments: wrap them as Tensors and flatten again."""


def _wrap_arrays(obj):
    """Replace NumPy arrays in the argument structure by Tensors (once, on entry)."""
    kind = type(obj)
    if kind is np.ndarray:
        return Tensor._from_array(obj)
    if kind is tuple or kind is list:
        return kind(_wrap_arrays(item) for item in obj)
    if kind is dict:
        return {name: _wrap_arrays(value) for name, value in obj.items()}
    return obj


def _output_structure(obj, leaves: list):
    """Flatten outputs: returns a template in which Tensors are replaced by their index."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return _OutputSlot(len(leaves) - 1)
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind(_output_structure(item, leaves) for item in obj)
    if kind is dict:
        return {name: _output_structure(value, leaves) for name, value in obj.items()}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TraceError(
        f"a traced function may return Tensors, tuples/lists/dicts of them and plain Python "
        f"constants; got {type(obj).__name__}"
    )


class _OutputSlot:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _make_rebuild(template):
    """A function list_of_tensors -> the function's return structure."""
    if isinstance(template, _OutputSlot):
        return operator.itemgetter(template.index)
    kind = type(template)
    if kind is tuple or kind is list:
        parts = [_make_rebuild(item) for item in template]
        return lambda outs: kind(part(outs) for part in parts)
    if kind is dict:
        parts = {name: _make_rebuild(value) for name, value in template.items()}
        return lambda outs: {name: part(outs) for name, part in parts.items()}
    return lambda outs: template


# -- compiled entries ---------------------------------------------------------------------


@dataclass
class CompiledEntry:
    """One input signature's trace, lowered module and executable."""

    trace: Trace
    lowered: object  # hlotrace.lowering.LoweredModule
    executable: object  # hlotrace.runtime.Executable
    rebuild: object

    def __call__(self, leaves):
        exe = self.executable
        buffers = []
        for index, tensor in enumerate(leaves):
            buffer = tensor._device
            if buffer is None:
                buffer = tensor._device = exe.to_device(index, tensor._host)
            buffers.append(buffer)
        outputs = [_from_device(b) for b in exe.run(buffers)]
        return self.rebuild(outputs)


_from_device = Tensor._from_device


class TracedFunction:
    """A function compiled per input signature; see :func:`xla_trace`."""

    def __init__(self, fn, *, capture_as_const: bool = False, platform: str | None = None):
        self.fn = fn
        self.capture_as_const = capture_as_const
        self.platform = platform
        self._cache: dict[tuple, CompiledEntry] = {}
        self._flat_cache: dict[tuple, CompiledEntry] = {}  # same entries, keyed for the hot path
        self._last: CompiledEntry | None = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if _RECORDER.get() is not None:
            # Called while another function is being recorded: inline it, so its ops
            # join the outer trace (as a nested jax.jit does).
            return self.fn(*args, **kwargs)
        if not kwargs:
            # Hot path: positional Tensors only. The key is (shape, dtype) per argument,
            # read straight from the array the Tensor holds.
            key = []
            for arg in args:
                if type(arg) is not Tensor:
                    break
                value = arg._host if arg._host is not None else arg._device
                key.append(value.shape)
                key.append(value.dtype)
            else:
                entry = self._flat_cache.get(tuple(key))
                if entry is not None:
                    return entry(args)
        leaves: list = []
        key = []
        try:
            _flatten(args, leaves, key)
            if kwargs:
                _flatten(kwargs, leaves, key)
        except _ArrayArgument:
            return self(*_wrap_arrays(args), **_wrap_arrays(kwargs))
        entry = self._cache.get(tuple(key))
        if entry is not None:
            return entry(leaves)
        return self._record_and_compile(tuple(key), args, kwargs, leaves)

    def _record_and_compile(self, key, args, kwargs, leaves):
        from hlotrace import lowering, runtime

        name = getattr(self.fn, "__name__", "traced")
        recorder = Recorder(name=name, capture_as_const=self.capture_as_const)
        # Each argument position gets its own proxy Tensor (sharing the value), so that a
        # tensor passed twice records two inputs and later calls with distinct tensors work.
        proxies = [Tensor._from_array(leaf.numpy(), checked=True) for leaf in leaves]
        with recorder:
            for proxy in proxies:
                recorder.trace.inputs.append(recorder.add_input(proxy))
            proxy_args, proxy_kwargs = _substitute_in_order((args, kwargs), iter(proxies))
            result = self.fn(*proxy_args, **proxy_kwargs)
            out_leaves: list = []
            template = _output_structure(result, out_leaves)
            recorder.set_outputs(out_leaves)
        trace = recorder.trace
        lowered = lowering.lower_trace(trace, name=name)
        text = lowered.text()
        executable = runtime.compile(text, lowered.in_avals, lowered.out_avals, platform=self.platform)
        entry = CompiledEntry(trace, lowered, executable, _make_rebuild(template))
        self._cache[key] = entry
        if not kwargs and all(type(a) is Tensor for a in args):
            self._flat_cache[tuple(k for leaf in leaves for k in (leaf.shape, leaf.dtype))] = entry
        self._last = entry
        _dump(name, len(self._cache), entry, text)
        return result

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
        """The LoweredModule of the most recent compilation."""
        return self._latest().lowered

    @property
    def stablehlo_text(self) -> str:
        """StableHLO (MLIR text with locations) of the most recent compilation."""
        return self._latest().lowered.text()

    @property
    def executable(self):
        return self._latest().executable

    def entries(self) -> list[CompiledEntry]:
        return list(self._cache.values())


def _substitute_in_order(obj, proxies):
    """Replace the Tensor leaves of ``obj`` by the next proxies, in _flatten's order."""
    if isinstance(obj, Tensor):
        return next(proxies)
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind(_substitute_in_order(item, proxies) for item in obj)
    if kind is dict:
        return {name: _substitute_in_order(obj[name], proxies) for name in sorted(obj)}
    return obj


def _dump(name: str, index: int, entry: CompiledEntry, text: str) -> None:
    directory = os.environ.get(DUMP_ENV)
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{name}.{index}")
    entry.trace.save(f"{stem}.trace.json")
    with open(f"{stem}.stablehlo.mlir", "w") as f:
        f.write(text)
    with open(f"{stem}.compiled.hlo.txt", "w") as f:
        f.write(entry.executable.hlo_text())


def xla_trace(fn=None, *, capture_as_const: bool = False, platform: str | None = None):
    """Decorator: record on the first call per input signature, then run compiled.

    Use bare (``@xla_trace``) or with options (``@xla_trace(capture_as_const=True)``).

    capture_as_const: tensors the function closes over are baked in as constants
      (otherwise using one is an error that says where that tensor was created).
    platform: ``"cpu"`` or ``"cuda"``; default $HLOTRACE_PLATFORM, else CUDA if present.
    """
    if fn is None:
        return functools.partial(xla_trace, capture_as_const=capture_as_const, platform=platform)
    return TracedFunction(fn, capture_as_const=capture_as_const, platform=platform)
