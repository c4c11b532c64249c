"""What ``xla_trace`` calls when some input lives on a mesh (see hlotrace/jit.py's hooks).

- :func:`prepare` (every call, only once anything was placed): the inputs' placements as a
  cache-key part, or None when every input is on one device; inputs whose device array is
  laid out otherwise than their placement are sent back to their host value, so the
  executable's ``to_device`` lays them out anew (the executable checks again, see
  :mod:`hlotrace.runtime.spmd`).
- :func:`plan` (when recording): the :class:`Plan` the lowering annotates the module with
  (Shardy shardings on every argument and result, ``sdy.mesh``) and the runtime compiles
  for (one partition per mesh device).

One mesh per call: inputs on two meshes are a TraceError naming both. Unplaced inputs are
replicated. The ``.grad`` of a placed tensor and the optimizer state of a placed parameter
take its placement (ZeRO/FSDP style when it is split over the data axis). Results are left
open for the partitioner to choose; the state a step writes back keeps its input's layout
(donation needs equal per-device shapes).
"""

from __future__ import annotations

import contextlib
import itertools
import operator

import hlotrace.distributed.process as process
import hlotrace.distributed.replicas as replicas
import hlotrace.runtime.jaxlib_spmd as jaxlib_spmd
from hlotrace import spmd_hooks
from hlotrace.distributed.mesh import NamedSharding
from hlotrace.distributed.placement import registered, runtime_sharding, set_placement, sharding_of
from hlotrace.errors import TraceError
from hlotrace.lowering.registry import MESH_SYMBOL, SPMD_PLAN
from hlotrace.ops.registry import OPS
from hlotrace.tensor import Tensor
from hlotrace.versions import VERSIONS

# Op families whose operands keep their spatial dimensions (2 and up) whole on a mesh.
WINDOWED_FAMILIES = frozenset({"conv", "pooling"})

# The plan of the module being lowered (read by the sharding_constraint rule): lowering's slot.
CURRENT = SPMD_PLAN


def _inherit_optimizer_state(holders) -> bool:
    """Optimizer state tensors of a placed parameter take its placement (replicated on its
    mesh for a step count, and a group's hyper tensors on its parameters' mesh), and follow
    it when the parameter is re-placed; whether any changed now."""
    changed = False
    for holder in holders:
        per_param = getattr(holder, "state", None)
        if not isinstance(per_param, dict) or not hasattr(holder, "param_groups"):
            continue
        for param, tensors in per_param.items():
            sharding = sharding_of(param)
            if sharding is None or not isinstance(tensors, dict):
                continue
            for t in tensors.values():
                if isinstance(t, Tensor):
                    # State of the parameter's shape takes its placement, the rest (a step
                    # count) is replicated on its mesh.
                    changed |= _take(t, sharding if t.shape == param.shape else NamedSharding(sharding.mesh))
        # A group's hyper tensors (lr, betas): replicated on its parameters' mesh.
        for group, hyper in zip(holder.param_groups, getattr(holder, "_hyper", ()), strict=False):
            mesh = next((s.mesh for s in map(sharding_of, group["params"]) if s is not None), None)
            if mesh is not None:
                for t in hyper.values():
                    changed |= _take(t, NamedSharding(mesh))
    return changed


def _take(tensor, wanted: NamedSharding) -> bool:
    """Place optimizer-held ``tensor`` as ``wanted`` (again, when its parameter was re-placed
    since); whether it changed."""
    if registered(tensor) != wanted:
        set_placement(tensor, wanted)
        return True
    return False


def _placements(inputs):
    """(placement per input, placement per input's .grad) with None for unplaced. A .grad
    of a placed tensor takes its placement unless placed itself with ``dist.shard``: one
    computed by eager ops on the mesh (laid out as XLA chose) follows its tensor too."""
    own = [sharding_of(t) for t in inputs]
    grads = []
    for t, s in zip(inputs, own, strict=True):
        g = t._grad
        if s is not None and g is not None and registered(g) is None and sharding_of(g) is not None:
            grads.append(s)  # on the mesh as an eager op (or a step) left it: follows its tensor
            continue
        grads.append(None if g is None else (sharding_of(g) or s))
    return own, grads


def _describe(position: int, tensor) -> str:
    return f"input {position} ({tensor.dtype}{list(tensor.shape)})"


def _one_mesh(inputs, own, grads, runs_on: str = "one compiled call runs on one mesh"):
    mesh, first = None, None
    for i, (s, g) in enumerate(zip(own, grads, strict=True)):
        for sharding, is_grad in ((s, False), (g, True)):
            if sharding is None:
                continue
            if mesh is None:
                mesh, first = sharding.mesh, (i, is_grad)
            elif sharding.mesh is not mesh and sharding.mesh != mesh:  # `is`: no __eq__ on the hot path

                def where(i, is_grad):
                    return ("the .grad of " if is_grad else "") + _describe(i, inputs[i])

                raise TraceError(
                    f"{runs_on}, but {where(*first)} is placed on {mesh!r} and "
                    f"{where(i, is_grad)} on {sharding.mesh!r}; dist.shard them onto the same mesh"
                )
    return mesh


# (placement, or the mesh for a replicated tensor; shape) -> (dims, the runtime's sharding):
# computed once per layout, so a steady call does a dict lookup per input.
_LAYOUTS: dict = {}


def _layout(tensor, sharding, mesh):
    """``tensor``'s dims under ``sharding`` (None: replicated on ``mesh``) and the runtime
    sharding its device array must have; HlotraceError when the spec does not fit."""
    shape = tensor.shape
    key = (mesh if sharding is None else sharding, shape)
    found = _LAYOUTS.get(key)
    if found is None:
        if sharding is None:
            found = (((),) * len(shape), runtime_sharding(NamedSharding(mesh), len(shape)))
        else:
            found = (sharding.check(shape), runtime_sharding(sharding, len(shape)))
        _LAYOUTS[key] = found
    return found


def _relocate(tensor, wanted) -> None:
    """Send ``tensor`` back to its host value when its device array is not laid out as
    ``wanted`` (the runtime sharding of its placement)."""
    buffer = tensor._device
    if buffer is None or getattr(buffer, "sharding", None) is wanted:
        return
    tensor.numpy()
    tensor._device = None


# The holders whose optimizer state last took its parameters' placements, and the counters
# then: nothing new to inherit until a structural change or a new placement.
_INHERITED: list = [None]


_device_of = operator.attrgetter("_device")
_grad_of = operator.attrgetter("_grad")
_aval_of = operator.attrgetter("aval")
_runtime_sharding_of = operator.attrgetter("sharding")


def _snapshot(inputs):
    """What :func:`prepare`'s result depends on besides the placement counters: every input
    and ``.grad`` by identity, and every device array's aval and runtime sharding (compared
    by identity first). None when a value is on the host (then the work is done again)."""
    grads = list(map(_grad_of, inputs))
    buffers = list(map(_device_of, inputs))
    buffers += [g._device for g in grads if g is not None]
    if any(map(operator.is_, buffers, itertools.repeat(None))):
        return None
    return (
        list(map(id, inputs)),
        list(map(id, grads)),
        list(map(_aval_of, buffers)),
        list(map(_runtime_sharding_of, buffers)),
    )


def _stamp(holders) -> tuple:
    """The counters and holders a memoized :func:`prepare` result was made under."""
    return (VERSIONS.structure, spmd_hooks.placements, tuple(map(id, holders)))


def prepare(inputs, holders=(), memo=None):
    """The cache-key part for the inputs' placements, or None when none is placed.

    ``memo`` (a one-element list the caller keeps, e.g. one per traced function): a call
    whose inputs, ``.grad``s, device arrays' avals and runtime shardings are those its last
    call left, with no placement or structural change since, gets that call's result without
    the per-input work (~0.35 ms for the transformer step's 126 inputs): its arrays are
    laid out as it needs, so nothing would be re-placed."""
    if memo is None:
        return _checked(inputs, holders, None)
    last = memo[0]
    if last is not None and last[0] == _stamp(holders) and last[1] == _snapshot(inputs):
        return last[2]
    result = _checked(inputs, holders, memo)  # (may place optimizer state: the counters move)
    snapshot = _snapshot(inputs)
    memo[0] = None if snapshot is None else (_stamp(holders), snapshot, result)
    return result


def _checked(inputs, holders, memo):
    """:func:`_prepare`; then, on a mesh spanning processes, the replicated inputs proven
    equal everywhere (once per traced function and set of tensor objects and placements,
    see distributed.replicas)."""
    result = _prepare(inputs, holders)
    if result is not None and process.spans_processes(result[0].devices):
        own, grads = _placements(inputs)
        replicas.check_step(inputs, own, grads, holders, result[0], memo)
    return result


def _prepare(inputs, holders):
    own, grads = _placements(inputs)
    if not any(own) and not any(grads):
        return None
    if holders:
        seen = (tuple(map(id, holders)), VERSIONS.structure, spmd_hooks.placements)
        if _INHERITED[0] != seen:
            if _inherit_optimizer_state(holders):
                own, grads = _placements(inputs)
            _INHERITED[0] = (seen[0], VERSIONS.structure, spmd_hooks.placements)
    mesh = _one_mesh(inputs, own, grads)
    in_dims, grad_dims = [], []
    for t, s, g in zip(inputs, own, grads, strict=True):
        dims, wanted = _layout(t, s, mesh)
        in_dims.append(dims)
        _relocate(t, wanted)
        if t._grad is not None:
            dims, wanted = _layout(t._grad, g, mesh)
            grad_dims.append(dims)
            _relocate(t._grad, wanted)
        else:
            grad_dims.append(None)
    return (mesh, tuple(in_dims), tuple(grad_dims))


class Plan:
    """How one recorded step is laid out on a mesh: what the lowering annotates and the
    runtime compiles for (see :mod:`hlotrace.runtime.spmd` for the fields it reads)."""

    def __init__(self, mesh, in_dims, out_dims, out_ranks):
        self.mesh = mesh
        self.devices = mesh.devices
        self.mesh_shape = mesh.shape
        self.axis_names = mesh.axis_names
        self.in_dims = tuple(in_dims)
        self.out_dims = tuple(out_dims)  # None: left open for the partitioner
        self.out_ranks = tuple(out_ranks)
        self.key = (mesh, self.in_dims, self.out_dims)

    def declare_mesh(self, module) -> None:
        """``sdy.mesh @mesh`` at the insertion point (the module body), partition counts."""
        jaxlib_spmd.mesh_op(MESH_SYMBOL, list(zip(self.axis_names, self.mesh_shape, strict=True)))
        jaxlib_spmd.set_partition_counts(module, self.mesh.size)

    def annotate(self, main) -> None:
        """``sdy.sharding`` on every @main argument and result (merged with donation)."""
        key = jaxlib_spmd.SHARDING_ATTR
        args = [{key: jaxlib_spmd.tensor_sharding(MESH_SYMBOL, dims)} for dims in self.in_dims]
        results = []
        for dims, rank in zip(self.out_dims, self.out_ranks, strict=True):
            if dims is None:
                results.append({key: jaxlib_spmd.tensor_sharding(MESH_SYMBOL, [()] * rank, closed=False)})
            else:
                results.append({key: jaxlib_spmd.tensor_sharding(MESH_SYMBOL, dims)})
        jaxlib_spmd.set_value_attrs(main, False, args)
        jaxlib_spmd.set_value_attrs(main, True, results)

    def guard(self, op: str, operands, in_avals):
        """``operands`` of record ``op``, constrained where XLA's partitioner is known to
        go wrong (found by tests/distributed/test_spmd_differential.py, jaxlib 0.10.2):

        - convolutions: only the batch dimension of the input (and of the output gradient
          of ``conv2d_weight_grad``) may stay split; everything else is whole. A
          convolution whose input is split along a spatial dimension (strided or dilated
          window) while its kernel is split gives wrong values (some doubled; jax.jit with
          the same shardings too, under Shardy and GSPMD alike), and a grouped one whose
          kernel's output features are split (after propagation) gives wrong values too.
        - pooling: spatial dimensions (2 and up) are whole: max_pool2d_backward with both
          operands split along one spatial dimension over two mesh axes aborts the process
          (spmd_partitioner.cc:885, ``Check failed: !target.IsReplicatedOrSingleDevice()``).
        """
        definition = OPS.get(op)
        if definition is None or definition.family not in WINDOWED_FAMILIES:
            return operands

        guarded = []
        for k, (value, aval) in enumerate(zip(operands, in_avals, strict=True)):
            rank = len(aval.shape)
            if rank < 3:
                guarded.append(value)
                continue
            if definition.family == "pooling":
                open_dims = 2
            else:
                open_dims = 1 if k == 0 or op == "conv2d_weight_grad" else 0
            dims = [None] * open_dims + [()] * (rank - open_dims)
            guarded.append(jaxlib_spmd.sharding_constraint(value, jaxlib_spmd.tensor_sharding(MESH_SYMBOL, dims)))
        return guarded

    @contextlib.contextmanager
    def lowering(self):
        token = CURRENT.set(self)
        try:
            yield self
        finally:
            CURRENT.reset(token)


def plan(trace, placements, io, num_results: int):
    """The Plan of a step just recorded. ``placements``: what :func:`prepare` gave for its
    inputs when the call began (before the eager recording could change them: an optimizer
    clearing a ``.grad`` the step reads). The trace's inputs are ``(*inputs, *grads of
    io.grad_inputs, *late inputs)``; its outputs the function's results, then the state
    written back (``io``: hlotrace.compiled.StateIO)."""
    mesh, in_dims, grad_dims = placements
    grad_inputs = io.grad_inputs if io is not None else ()
    dims = [*in_dims, *(grad_dims[i] for i in grad_inputs)]
    dims.extend(() for _ in range(len(trace.inputs) - len(dims)))  # late inputs: replicated
    out_avals = [trace.aval(v) for v in trace.outputs]
    out_dims: list = [None] * len(out_avals)
    if io is not None:
        for i, o in io.writes:
            out_dims[o] = in_dims[i]
        for i, o in io.grad_writes:
            if o is not None:
                out_dims[o] = grad_dims[i] if grad_dims[i] is not None else in_dims[i]
        for _, o in io.late_writes:
            out_dims[o] = ()
    for o in range(num_results, len(out_dims)):
        if out_dims[o] is None:
            out_dims[o] = ()
    in_ranks = [len(trace.aval(v).shape) for v in trace.inputs]
    dims = [_padded(d, r) for d, r in zip(dims, in_ranks, strict=True)]
    out_ranks = [len(a.shape) for a in out_avals]
    out_dims = [None if d is None else _padded(d, r) for d, r in zip(out_dims, out_ranks, strict=True)]
    if len(trace.inputs) > len(in_dims) + len(grad_inputs):  # the step read implicit state (an RNG key)
        replicas.check_late_key(mesh)
    return Plan(mesh, dims, out_dims, out_ranks)


def _padded(dims, rank: int) -> tuple:
    return tuple(dims) + ((),) * (rank - len(dims))


def eager_layout(tensors):
    """One eager op application on a mesh (the device engine, hlotrace.engines.placed):
    ``(mesh, dims per input, placement per input or None)``, the first two its cache-key
    part. Placed inputs keep their placement (one whose device array is laid out otherwise
    is sent back to its host value, as :func:`prepare` does); unplaced ones are replicated.
    Inputs on two meshes are a TraceError naming both."""
    own = [sharding_of(t) for t in tensors]
    mesh = _one_mesh(tensors, own, [None] * len(own), "one eager op runs on one mesh")
    dims = []
    for t, s in zip(tensors, own, strict=True):
        d, wanted = _layout(t, s, mesh)
        if s is not None:
            _relocate(t, wanted)
        dims.append(d)
    return mesh, tuple(dims), own


def eager_plan(mesh, in_dims, out_ranks) -> Plan:
    """The Plan of one eager op: arguments laid out as :func:`eager_layout` said, results
    left open for the partitioner (as :func:`plan` leaves a step's results)."""
    return Plan(mesh, in_dims, [None] * len(out_ranks), out_ranks)
