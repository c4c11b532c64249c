"""Tensor: an eager NumPy value, a device buffer, or both.

Every operation on a Tensor goes through :func:`hlotrace.dispatch.apply` (its operators call
the functions of :mod:`hlotrace.functional`), which runs the op's NumPy reference and, while a
function is being recorded, appends an OpRecord. Tensor imports neither: it sits below them,
and what it needs from layers above (those functions, a mesh placement, DLPack export) is
bound into slots here by the layers that define it (:data:`HOOKS`, ``hlotrace.namespace.F``).
Outputs of compiled functions hold only a device buffer; ``.numpy()`` copies it to the
host once and keeps the copy.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import OpError, ShapeDtypeError, TraceError
from hlotrace.metrics import COUNTS as _metric_counts
from hlotrace.namespace import F
from hlotrace.recording import TAPES, current_recorder
from hlotrace.source import user_location
from hlotrace.tensor_methods import TensorMethods
from hlotrace.versions import VERSIONS


class AbstractValue:
    """What an op's output holds while a function is recorded without values
    (``xla_trace(first_call='compiled')``): its shape and dtype only."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape, self.dtype = shape, dtype


class Tensor(TensorMethods):
    """A dense array of one of the supported dtypes (see :mod:`hlotrace.dtypes`).

    Create one with :func:`hlotrace.tensor`::

        x = ht.tensor([[1.0, 2.0]])
        (x * 2).sum().numpy()   # array(6., dtype=float32)
    """

    __slots__ = ("__weakref__", "_device", "_grad", "_host", "_origin")
    __array_priority__ = 100  # ndarray <op> Tensor defers to Tensor's reflected operators

    def __init__(self):
        raise TypeError("create tensors with hlotrace.tensor(array_like, dtype=None)")

    @classmethod
    def _from_array(cls, array: np.ndarray, checked: bool = False) -> Tensor:
        """Wrap a NumPy array (made read-only so shared copies cannot change)."""
        if not checked:
            dtype = dt.canonicalize(array.dtype)
            if array.dtype != dtype:
                array = array.astype(dtype)
        if array.flags.writeable:
            array.flags.writeable = False
        self = object.__new__(cls)
        self._host = array
        self._device = None
        self._origin = None
        self._grad = None
        return self

    @classmethod
    def _abstract(cls, shape, dtype) -> Tensor:
        """A tensor with a shape and dtype but no value (a ``first_call='compiled'`` recording)."""
        self = object.__new__(cls)
        self._host = AbstractValue(tuple(shape), np.dtype(dtype))
        self._device = None
        self._origin = None
        self._grad = None
        return self

    @classmethod
    def _from_device(cls, buffer) -> Tensor:
        """Wrap a device buffer produced by the runtime (no host copy yet)."""
        self = object.__new__(cls)
        self._host = None
        self._device = buffer
        self._origin = None
        self._grad = None
        return self

    # -- properties -------------------------------------------------------------------
    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by ``GradManager.backward`` (None until then)."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        old = self._grad
        # A compiled step's state signature includes every .grad's presence, shape and
        # dtype: a change there is structural (hlotrace.versions), a new value is not.
        if old is None or value is None:
            if old is not value:
                VERSIONS.structure += 1
        elif old.shape != value.shape or old.dtype != value.dtype:
            VERSIONS.structure += 1
        self._grad = value

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._host if self._host is not None else self._device).shape

    @property
    def dtype(self) -> np.dtype:
        return (self._host if self._host is not None else self._device).dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def sharding(self):
        """Its ``hlotrace.distributed.NamedSharding`` when laid out across a mesh, else None."""
        return HOOKS.sharding_of(self)

    def numpy(self) -> np.ndarray:
        """The value as a read-only NumPy array (copied from the device once)."""
        host = self._host
        if host is None:
            try:
                array = np.asarray(self._device)
            except RuntimeError:  # part of it lives in another process (hlotrace.distributed)
                if HOOKS.host_value is None:
                    raise
                array = HOOKS.host_value(self)
            _metric_counts["device_to_host_bytes"] += array.nbytes
            if array.flags.writeable:
                array.flags.writeable = False
            self._host = array
        elif type(host) is AbstractValue:
            loc = user_location(2)
            raise TraceError(
                f"a tensor of shape {host.shape} and dtype {host.dtype} has no value while recording with "
                f"first_call='compiled' (only shapes and dtypes are known until the program runs)"
                + (f" at {loc}" if loc else "")
                + "; compute with tensor ops, or record with xla_trace(first_call='eager')"
            )
        return self._host

    def block_until_ready(self) -> Tensor:
        """Wait until the value is computed (a compiled call returns as soon as the executable
        is enqueued); returns self. A host value is always ready.

        >>> step(x).block_until_ready()   # e.g. before reading a timer
        """
        if self._device is not None:
            self._device.block_until_ready()
        return self

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (``np.from_dlpack(t)``, ``torch.from_dlpack(t)``): see hlotrace.interop."""
        return HOOKS.to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return HOOKS.dlpack_device(self)

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        if dtype is not None:
            return array.astype(dtype)
        return array.copy() if copy else array

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        # Without this, Python would iterate via __getitem__ until an IndexError.
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        _refuse_host_value_while_recording("bool()")
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any()/.all()")
        return bool(self.numpy())

    def __float__(self) -> float:
        _refuse_host_value_while_recording("float()")
        return float(self.numpy())

    def __int__(self) -> int:
        _refuse_host_value_while_recording("int()")
        return int(self.numpy())

    def item(self):
        _refuse_host_value_while_recording(".item()")
        return self.numpy().item()

    __hash__ = object.__hash__  # identity, like torch: == is elementwise

    def detach(self) -> Tensor:
        """The same value as a new Tensor that gradients do not flow through.

        While recording, the detached tensor is the same traced value (no op is recorded).
        """
        return self._detached(value_copy(self))

    def _stop_gradient(self) -> Tensor:
        """``detach()`` sharing this tensor's buffer: for an intermediate value the caller
        never sees (softmax's max, batch norm's statistics), which no compiled step can be
        given as state to donate, so the copy ``detach`` makes would be wasted."""
        return self._detached((self._host, self._device))

    def _detached(self, value) -> Tensor:
        out = object.__new__(type(self) if type(self) is Tensor else Tensor)
        # detach copies the value (value_copy): a shared device buffer would be deleted when a
        # compiled step donates this tensor's buffer (its state update), taking the copy with it.
        out._host, out._device = value
        out._origin, out._grad = self._origin, None
        recorder = current_recorder()
        if recorder is not None:
            recorder.alias(out, self)
        return out

    # -- in-place updates -----------------------------------------------------------------
    def _assign(self, value) -> Tensor:
        """Make this Tensor object hold ``value`` (same shape; cast within its kind).

        Eagerly this swaps the array; while recording, the tensor becomes the recorded
        value (an input updated in place becomes an output written back after each call);
        under autodiff, gradients flow through the new value.
        """
        if not isinstance(value, Tensor):
            value = F.broadcast_to(F.astype(value, self.dtype), self.shape)
        if value.shape != self.shape:
            raise _inplace_error(self, value, "would change its shape")
        if value.dtype != self.dtype:
            if dt.is_floating(value.dtype) and not dt.is_floating(self.dtype):
                raise _inplace_error(self, value, "would need an unsafe float-to-integer cast")
            value = F.astype(value, self.dtype)
        recorder = current_recorder()
        if recorder is not None:
            recorder.assign(self, value, user_location(2))
        for tape in TAPES:
            tape.assign(self, value)
        self._host, self._device = value._host, value._device
        VERSIONS.values += 1
        return self

    def __iadd__(self, other):
        return self._assign(F.add(self, other))

    def __isub__(self, other):
        return self._assign(F.subtract(self, other))

    def __imul__(self, other):
        return self._assign(F.multiply(self, other))

    def __itruediv__(self, other):
        return self._assign(F.divide(self, other))

    def __getitem__(self, index) -> Tensor:
        """Basic indexing (ints, slices, None, Ellipsis), ``x[int_tensor]`` (take along that
        axis; recordable) and ``x[bool_mask]`` (eager and under autodiff only: its shape
        depends on the mask's values). See :mod:`hlotrace.ops.gather.writes`."""
        return HOOKS.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        """``x[index] = value`` in place: ``x`` takes the value of ``F.setitem(x, value, index)``
        (recorded as an in-place update while recording, taped under autodiff)."""
        self._assign(F.setitem(self, value, index))

    # The operators (x + y, x @ w, ~mask, ...) and the op methods (x.sum(), ...) are
    # TensorMethods' (hlotrace.tensor_methods).


def from_device_buffer(buffer, _new=object.__new__) -> Tensor:
    """``Tensor._from_device(buffer)`` as a plain function: one bound-method call fewer for
    every result of a compiled call (hlotrace.compiled, the per-call hot path)."""
    self = _new(Tensor)
    self._host = None
    self._device = buffer
    self._origin = None
    self._grad = None
    return self


def value_copy(t: Tensor) -> tuple:
    """``(host, device)`` for a new Tensor with ``t``'s value that shares no device buffer
    with it (a compiled step that donates one owner's buffer would delete the other's): the
    host array when ``t`` has one (read-only, so sharing it is a copy), else a copy on the
    device when the eager engine can make one (the device engine), else the host value."""
    if t._host is not None or t._device is None:
        return t._host, None
    if HOOKS.device_copy is not None:
        buffer = HOOKS.device_copy(t)
        if buffer is not None:
            return None, buffer
    return t.numpy(), None


def _inplace_error(target: Tensor, value: Tensor, why: str) -> OpError:
    loc = user_location(3)
    return OpError(
        f"in-place update of a {dt.short_name(target.dtype)}{list(target.shape)} tensor with a "
        f"{dt.short_name(value.dtype)}{list(value.shape)} value {why}" + (f" (at {loc})" if loc else "")
    )


class Parameter(Tensor):
    """A Tensor that modules register as a trainable parameter (``.grad`` holds its gradient).

    >>> w = Parameter(np.zeros((3, 4), np.float32))
    """

    __slots__ = ()

    def __new__(cls, value, dtype=None):
        base = tensor(value, dtype=dtype)
        self = object.__new__(cls)
        self._host, self._device, self._origin, self._grad = base._host, base._device, user_location(2), None
        return self

    def __init__(self, value, dtype=None):
        pass

    def __repr__(self) -> str:
        return "Parameter" + super().__repr__()[len("tensor") :]


def _refuse_host_value_while_recording(what: str) -> None:
    if current_recorder() is not None:
        loc = user_location(3)
        raise TraceError(
            f"{what} on a tensor while recording would bake a data-dependent value into the "
            f"trace; compute it with tensor ops instead" + (f" (at {loc})" if loc else "")
        )


def tensor(value, dtype=None) -> Tensor:
    """Create a Tensor from an array-like, a NumPy array or another Tensor.

    Python lists and scalars default to 32 bits (float32, int32); NumPy arrays and an explicit
    ``dtype=`` keep 64 bits (``np.float64`` stays float64), as in PyTorch.

    >>> tensor([1, 2, 3]).dtype
    dtype('int32')
    >>> tensor(np.zeros(3), dtype="bfloat16").dtype
    dtype(bfloat16)
    """
    if isinstance(value, Tensor):
        value = value.numpy()
    try:
        target = dt.dtype_of_value(value, dtype)
        array = np.array(value, dtype=target, copy=True)
    except (ShapeDtypeError, ValueError, TypeError) as exc:
        loc = user_location(2)
        raise OpError(
            f"tensor(): cannot make a tensor of {type(value).__name__}: {exc}" + (f" (at {loc})" if loc else "")
        ) from None
    result = Tensor._from_array(array, checked=True)
    result._origin = user_location(2)
    recorder = current_recorder()
    if recorder is not None:
        recorder.add_constant(result)
    return result


class _Hooks:
    """What Tensor calls in layers above it, bound by them when they are imported."""

    __slots__ = ("device_copy", "dlpack_device", "getitem", "host_value", "sharding_of", "to_dlpack")

    def __init__(self):
        self.sharding_of = lambda tensor: None  # hlotrace.distributed.placement: a mesh placement
        self.host_value = None  # hlotrace.distributed.global_data: a value spread over processes
        self.getitem = None  # hlotrace.ops.gather.writes: x[index]
        self.to_dlpack = self.dlpack_device = None  # hlotrace.interop
        # hlotrace.engines (the device engine): a copy of a tensor's device buffer on its
        # device, or None where it cannot (then value_copy goes through the host).
        self.device_copy = None


HOOKS = _Hooks()
