"""Devices, meshes and partition specs: small immutable values (hashable, part of cache keys).

>>> mesh = dist.Mesh((4, 2), ("data", "model"))
>>> dist.NamedSharding(mesh, dist.P("data", None))      # rows split over "data"
"""

from __future__ import annotations

import math

import numpy as np

import hlotrace.distributed.process as process
import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace import runtime
from hlotrace.errors import HlotraceError, argument_error, is_size


def devices(platform: str | None = None) -> list:
    """The devices of hlotrace's PJRT client (``platform`` or the default one). On the CPU
    there is one unless ``HLOTRACE_CPU_DEVICES=N`` was set before hlotrace made its client.
    In a job of several processes (``dist.initialize``): every process's devices, process 0's
    first (``dist.local_devices()`` lists this process's own)."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    if process.is_initialized():
        return jaxlib_dist.global_devices(runtime.client(platform))
    return list(jaxlib_compat.client_devices(runtime.client(platform)))


def _more_devices_hint(found) -> str:
    platform = getattr(found[0], "platform", "cpu") if found else "cpu"
    if platform == "cpu":
        return (
            " On the CPU, set HLOTRACE_CPU_DEVICES=N in the environment before hlotrace's first computation "
            "(e.g. HLOTRACE_CPU_DEVICES=8) to get N devices."
        )
    return ""


class Mesh:
    """A grid of devices with named axes: ``Mesh((4, 2), ("data", "model"))`` takes the first
    8 devices of :func:`devices` (or ``devices=``, a list of those devices), row-major."""

    __slots__ = ("_hash", "axis_names", "devices", "shape")

    def __init__(self, shape=None, axis_names=None, devices=None):
        shape = (shape,) if isinstance(shape, int | np.integer) else shape
        if not isinstance(shape, tuple | list) or not shape or not all(is_size(n) for n in shape):
            raise argument_error(
                "Mesh", "shape", shape, 'one or more positive ints, as in Mesh((4, 2), ("data", "model"))'
            )
        shape = tuple(int(n) for n in shape)
        axis_names = (axis_names,) if isinstance(axis_names, str) else axis_names
        wanted = _axis_names_wanted(axis_names, shape)
        if wanted:
            raise argument_error("Mesh", "axis_names", axis_names, wanted)
        axis_names = tuple(axis_names)
        size = math.prod(shape)
        available = list(globals()["devices"]()) if devices is None else _device_list(devices)
        if size > len(available):
            where = "hlotrace's client has" if devices is None else "the devices given are"
            raise HlotraceError(
                f"Mesh {dict(zip(axis_names, shape, strict=True))} needs {size} devices, but {where} only "
                f"{len(available)}.{_more_devices_hint(available)}"
            )
        chosen = tuple(available[:size]) if devices is None else tuple(available)
        if devices is not None and len(chosen) != size:
            raise argument_error("Mesh", "devices", devices, f"exactly {size} devices for shape {shape}")
        if len({id(d) for d in chosen}) != len(chosen):
            raise argument_error("Mesh", "devices", devices, "distinct devices")
        self.shape, self.axis_names, self.devices = shape, axis_names, chosen
        self._hash = hash((shape, axis_names, tuple(int(d.id) for d in chosen)))

    def __setattr__(self, name, value):
        if hasattr(self, "_hash"):
            raise AttributeError("Mesh is immutable")
        object.__setattr__(self, name, value)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def axis_size(self, name: str) -> int:
        return self.shape[self.axis_names.index(name)]

    def __eq__(self, other):
        return (
            isinstance(other, Mesh)
            and self.shape == other.shape
            and self.axis_names == other.axis_names
            and self.devices == other.devices
        )

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        axes = ", ".join(f"{a!r}: {n}" for a, n in zip(self.axis_names, self.shape, strict=True))
        return f"Mesh({{{axes}}}, devices={describe_devices(self.devices)})"


def describe_devices(devices) -> str:
    """The devices as a reader counts them: their ids within one process (``[0, 1, 2, 3]``);
    across processes, each as ``p<process>:<its index in that process>`` (``[p0:0, p0:1,
    p1:0, p1:1]``), not the global ids XLA gives them (``[0, 1, 2048, 2049]`` on the CPU)."""
    if len({getattr(d, "process_index", 0) for d in devices}) <= 1:
        return str([int(d.id) for d in devices])
    local = [d.local_hardware_id if getattr(d, "local_hardware_id", None) is not None else d.id for d in devices]
    return "[" + ", ".join(f"p{d.process_index}:{int(i)}" for d, i in zip(devices, local, strict=True)) + "]"


def _axis_names_wanted(axis_names, shape) -> str | None:
    """What ``axis_names`` should have been for a mesh of ``shape``; None when it is fine."""
    one_per_axis = f"{len(shape)} axis name{'s' if len(shape) > 1 else ''}, one per axis of shape {shape}"
    if not isinstance(axis_names, tuple | list) or len(axis_names) != len(shape):
        return one_per_axis
    if not all(isinstance(name, str) and name for name in axis_names):
        return f"{one_per_axis}, each a non-empty string"
    repeated = sorted({a for a in axis_names if axis_names.count(a) > 1})
    if repeated:
        return f"{one_per_axis}, each axis its own name ({', '.join(map(repr, repeated))} repeated)"
    return None


def _device_list(devices) -> list:
    """``devices`` as a list of device objects (what :func:`devices` returns); ints or other
    values are an ArgumentError that says where devices come from."""
    listed = list(devices) if isinstance(devices, tuple | list) else None
    if listed is None or not all(hasattr(d, "id") and hasattr(d, "platform") for d in listed):
        raise argument_error(
            "Mesh",
            "devices",
            devices,
            "a list of devices from dist.devices() (e.g. devices=dist.devices()[:4]), not indices",
        )
    return listed


class P(tuple):
    """A partition spec: per tensor dimension ``None`` (replicated), an axis name, or a tuple
    of axis names (split over all of them, major first); dimensions past the end are
    replicated. ``P()`` is fully replicated."""

    def __new__(cls, *entries):
        normalized = []
        for entry in entries:
            if entry is None or isinstance(entry, str):
                normalized.append(entry)
            elif isinstance(entry, tuple | list) and all(isinstance(a, str) for a in entry):
                normalized.append(tuple(entry) if len(entry) != 1 else entry[0])
            else:
                raise argument_error("P", "entry", entry, "None, an axis name or a tuple of axis names")
        return super().__new__(cls, normalized)

    def dims(self, ndim: int) -> tuple[tuple[str, ...], ...]:
        """Per dimension of a rank-``ndim`` tensor, the axes it is split over."""
        out = [() if e is None else ((e,) if isinstance(e, str) else tuple(e)) for e in self]
        return tuple(out) + ((),) * (ndim - len(out))

    def __repr__(self) -> str:
        return f"P({', '.join(map(repr, self))})"


def as_spec(spec, api: str = "NamedSharding") -> P:
    """``spec`` as a :class:`P`: a P, None (replicated), a bare axis name (``"data"`` is
    ``P("data")``: dimension 0 split over it), or a tuple/list of entries."""
    if isinstance(spec, P):
        return spec
    if spec is None:
        return P()
    if isinstance(spec, str):
        return P(spec)
    if isinstance(spec, tuple | list):
        return P(*spec)
    raise argument_error(api, "spec", spec, 'a dist.P(...), an axis name or None (e.g. dist.P("data", None))')


def spec_from_dims(dims) -> P:
    entries = [None if not axes else (axes[0] if len(axes) == 1 else tuple(axes)) for axes in dims]
    while entries and entries[-1] is None:
        entries.pop()
    return P(*entries)


def _stripped(spec) -> tuple:
    """``spec`` without trailing replicated entries (P("d", None) lays out like P("d"))."""
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


class NamedSharding:
    """How a tensor is laid out across ``mesh``: ``spec`` says which axes split which
    dimension. Hashable and immutable."""

    __slots__ = ("_hash", "mesh", "spec")

    def __init__(self, mesh: Mesh, spec=None, *, api: str = "NamedSharding"):
        if not isinstance(mesh, Mesh):
            raise argument_error(api, "mesh", mesh, "a dist.Mesh")
        spec = as_spec(spec, api)
        used: list[str] = []
        for entry in spec:
            for axis in () if entry is None else ((entry,) if isinstance(entry, str) else entry):
                if axis not in mesh.axis_names:
                    wanted = f"the mesh's axis names {mesh.axis_names} (unknown mesh axis {axis!r})"
                    raise argument_error(api, "spec", spec, wanted)
                if axis in used:
                    wanted = f"each mesh axis at most once: it splits one dimension (mesh axis {axis!r} is used twice)"
                    raise argument_error(api, "spec", spec, wanted)
                used.append(axis)
        object.__setattr__(self, "mesh", mesh)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "_hash", hash((mesh, _stripped(spec))))

    def __setattr__(self, name, value):
        raise AttributeError("NamedSharding is immutable")

    def __eq__(self, other):
        return (
            isinstance(other, NamedSharding)
            and self.mesh == other.mesh
            and _stripped(self.spec) == _stripped(other.spec)
        )

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        return f"NamedSharding({self.mesh!r}, {self.spec!r})"

    def dims(self, ndim: int) -> tuple[tuple[str, ...], ...]:
        return self.spec.dims(ndim)

    def check(self, shape, what: str | None = None) -> tuple[tuple[str, ...], ...]:
        """This sharding's dims for a tensor of ``shape``; HlotraceError when the spec is
        longer than its rank or an axis size does not divide its dimension."""
        what = what or f"a tensor of shape {tuple(shape)}"
        if len(self.spec) > len(shape):
            raise HlotraceError(f"{self.spec!r} has {len(self.spec)} entries but {what} has rank {len(shape)}")
        dims = self.dims(len(shape))
        for d, axes in enumerate(dims):
            parts = math.prod(self.mesh.axis_size(a) for a in axes)
            if shape[d] % parts:
                raise HlotraceError(
                    f"dimension {d} of {what} has size {shape[d]}, which mesh axes {axes} "
                    f"(together {parts} devices) do not divide; pad it or choose another spec"
                )
        return dims

    def shard_shape(self, shape) -> tuple[int, ...]:
        """The per-device shape of a tensor of global ``shape``."""
        dims = self.dims(len(shape))
        return tuple(n // math.prod(self.mesh.axis_size(a) for a in axes) for n, axes in zip(shape, dims, strict=True))
