"""Placing tensors on a mesh, and reading back where a tensor lives.

A placement is kept per Tensor *object* (a registry keyed by identity, entries dropped when
the tensor dies), not inside the value: the eager first call of a compiled step replaces a
parameter's value with a host array, and the parameter must stay sharded. A tensor that is
not registered may still hold a device array laid out across a mesh (a result of an SPMD
executable): its placement is read from that array.
"""

from __future__ import annotations

import fnmatch
import weakref

import numpy as np

import hlotrace.runtime.spmd as spmd
from hlotrace import spmd_hooks, state
from hlotrace.distributed.mesh import Mesh, NamedSharding, P, as_spec, spec_from_dims
from hlotrace.errors import HlotraceError, argument_error
from hlotrace.ops.distributed import sharding_constraint
from hlotrace.recording import current_recorder
from hlotrace.runtime.spmd import placement_of
from hlotrace.tensor import HOOKS, Parameter, Tensor
from hlotrace.tensor import tensor as make_tensor

# id(tensor) -> (weak reference to it, NamedSharding)
_PLACED: dict[int, tuple] = {}


def _forget(key: int, ref) -> None:
    entry = _PLACED.get(key)
    if entry is not None and entry[0] is ref:
        del _PLACED[key]


def set_placement(tensor: Tensor, sharding: NamedSharding) -> None:
    key = id(tensor)
    ref = weakref.ref(tensor, lambda r, key=key: _forget(key, r))
    _PLACED[key] = (ref, sharding)
    spmd_hooks.active = True
    spmd_hooks.placements += 1


def registered(tensor) -> NamedSharding | None:
    entry = _PLACED.get(id(tensor))
    if entry is not None and entry[0]() is tensor:
        return entry[1]
    return None


_MESHES: dict = {}
_SHARDINGS: dict = {}


def _from_runtime(placement) -> NamedSharding:
    devices, shape, names, dims = placement
    key = (devices, shape, names)
    sharding = _SHARDINGS.get(placement)
    if sharding is None:
        mesh = _MESHES.get(key)
        if mesh is None:
            mesh = _MESHES[key] = Mesh(shape, names, devices=devices)
        sharding = _SHARDINGS[placement] = NamedSharding(mesh, spec_from_dims(dims))
    return sharding


def sharding_of(tensor) -> NamedSharding | None:
    """``tensor.sharding``: its placement on a mesh, or None (one device / the host)."""
    entry = _PLACED.get(id(tensor))
    if entry is not None and entry[0]() is tensor:
        return entry[1]
    buffer = getattr(tensor, "_device", None)
    if buffer is None:
        return None
    placement = placement_of(buffer)
    return None if placement is None else _from_runtime(placement)


def runtime_sharding(sharding: NamedSharding, ndim: int):
    """The runtime's (jax) sharding object for ``sharding`` on a rank-``ndim`` tensor."""
    mesh = sharding.mesh
    return spmd.jax_sharding(mesh.devices, mesh.shape, mesh.axis_names, sharding.dims(ndim))


def _as_sharding(mesh_or_sharding, spec, api: str = "dist.shard") -> NamedSharding:
    if isinstance(mesh_or_sharding, NamedSharding):
        if spec is not None:
            raise argument_error(api, "spec", spec, "None when a NamedSharding is given (it holds the spec)")
        return mesh_or_sharding
    if not isinstance(mesh_or_sharding, Mesh):
        raise argument_error(api, "mesh", mesh_or_sharding, "a dist.Mesh (or a NamedSharding)")
    if isinstance(spec, NamedSharding):
        return spec
    return NamedSharding(mesh_or_sharding, spec, api=api)


def _describe(tensor, name=None) -> str:
    label = f"{name!r} " if name else ""
    return f"tensor {label}({tensor.dtype}{list(tensor.shape)})"


def place(tensor: Tensor, sharding: NamedSharding, name: str | None = None) -> Tensor:
    """Re-place ``tensor`` itself: its value moves onto the mesh (each device receives only
    its slice) and it keeps ``sharding`` from now on."""
    if current_recorder() is not None:
        raise HlotraceError("dist.shard cannot run inside a recorded function; use dist.constraint(x, spec) there")
    if state.is_implicit(tensor):
        raise HlotraceError(
            f"{_describe(tensor, name)} is implicit state (a random generator's key): it stays replicated"
        )
    sharding.check(tensor.shape, _describe(tensor, name))
    host = tensor.numpy()
    tensor._device = spmd.put(np.asarray(host), runtime_sharding(sharding, tensor.ndim))
    set_placement(tensor, sharding)
    return tensor


def shard(tensor, mesh, spec=None) -> Tensor:
    """``tensor`` laid out across ``mesh`` as ``spec`` says (``dist.P("data", None)``; a bare
    axis name ``"data"`` means ``dist.P("data")``, None replicates).

    A :class:`~hlotrace.Parameter` (or a module's buffer, see :func:`shard_module`) is
    re-placed in place and returned, so modules, optimizers and GradManagers that hold it
    keep working; any other tensor (or array) gives a new Tensor. ``mesh`` may also be a
    ``NamedSharding`` (then no spec).

    >>> x = dist.shard(ht.tensor(batch), mesh, dist.P("data"))
    """
    sharding = _as_sharding(mesh, spec)
    if not isinstance(tensor, Tensor):
        tensor = make_tensor(tensor)
    elif not isinstance(tensor, Parameter):
        out = Tensor._from_array(np.array(tensor.numpy()), checked=True)
        return place(out, sharding)
    return place(tensor, sharding)


def shard_module(module, mesh: Mesh, plan: dict | None = None):
    """Place every parameter and buffer of ``module`` by name: ``plan`` maps fnmatch
    patterns (``"fc1.weight"``, ``"*.bias"``) to specs; the first pattern that matches wins
    and unmatched names are replicated. A pattern that matches no name is an error naming it
    (a typo would otherwise replicate what it meant to split). Returns the module.

    >>> dist.shard_module(net, mesh, {"fc1.weight": dist.P("model", None), "*.bias": dist.P()})
    """
    if plan is not None and not isinstance(plan, dict):
        raise argument_error("dist.shard_module", "plan", plan, 'a dict of name patterns to specs ({"*.bias": P()})')
    plan = dict(plan or {})
    named = [*module.named_parameters(), *module.named_buffers()]
    unmatched = [p for p in plan if not any(fnmatch.fnmatchcase(name, p) for name, _ in named)]
    if unmatched:
        shown = ", ".join(name for name, _ in named[:12]) + (", ..." if len(named) > 12 else "")
        raise argument_error(
            "dist.shard_module",
            "plan",
            unmatched,
            f"patterns that match parameter or buffer names; these match none (the names: {shown})",
        )
    shardings = {p: _as_sharding(mesh, spec, "dist.shard_module") for p, spec in plan.items()}
    for name, tensor in named:
        pattern = next((p for p in plan if fnmatch.fnmatchcase(name, p)), None)
        place(tensor, shardings[pattern] if pattern is not None else _as_sharding(mesh, None), name)
    return module


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def constraint(x, spec):
    """Inside a compiled function: ``x`` unchanged, and a request that XLA's partitioner lay
    it out as ``spec`` (a ``P``, or a ``NamedSharding`` on the call's mesh). Identity in the
    eager first call and in one-device compiles; an error outside a recording.

    >>> h = dist.constraint(F.relu(x @ w1), dist.P("data", None))
    """
    if current_recorder() is None:
        raise HlotraceError(
            "dist.constraint(x, spec) only works inside a function being compiled (xla_trace); outside one, "
            "place the tensor with dist.shard(x, mesh, spec)"
        )
    spec = spec.spec if isinstance(spec, NamedSharding) else as_spec(spec, "dist.constraint")
    return sharding_constraint(x, spec.dims(len(spec)))


HOOKS.sharding_of = sharding_of  # Tensor calls it through this slot (hlotrace.tensor.HOOKS)
