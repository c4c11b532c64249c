"""What hlotrace's one-device paths call into hlotrace.distributed: the functions bound into
the slots of :mod:`hlotrace.spmd_hooks` (whose ``active`` flag keeps them uncalled until
something is placed on a mesh) when this module is imported."""

import hlotrace.distributed.process as process
from hlotrace import spmd_hooks
from hlotrace.distributed.placement import place, registered, sharding_of
from hlotrace.distributed.process import spans_processes as spans


def prepare(inputs, holders=(), memo=None):
    """The cache-key part of the inputs' placements, or None (see distributed.compile)."""
    from hlotrace.distributed.compile import prepare as prepare_inputs  # lazy: loads jax

    return prepare_inputs(inputs, holders, memo)


def plan(trace, placements, io, num_results):
    """The SPMD plan of a step just recorded from inputs whose placements (``prepare``'s,
    when the call began) are ``placements`` (see distributed.compile)."""
    from hlotrace.distributed.compile import plan as make_plan  # lazy: loads jax

    return make_plan(trace, placements, io, num_results)


def eager_layout(tensors):
    """The mesh and layout of one eager op application on it (see distributed.compile)."""
    from hlotrace.distributed.compile import eager_layout as layout  # lazy: loads jax

    return layout(tensors)


def eager_plan(mesh, in_dims, out_ranks):
    """The SPMD plan of one eager op: its inputs laid out as given, results open."""
    from hlotrace.distributed.compile import eager_plan as make_plan  # lazy: loads jax

    return make_plan(mesh, in_dims, out_ranks)


def placed(tensors) -> bool:
    """Whether any of ``tensors`` lives on a mesh (a one-device executable must not get it)."""
    return any(sharding_of(t) is not None for t in tensors)


def spans_processes(tensors) -> bool:
    """Whether the mesh of ``tensors`` (placed ones) includes another process's devices:
    then the recording runs on shapes only and every process must compile the same module."""
    for t in tensors:
        sharding = sharding_of(t)
        if sharding is not None:
            return spans(sharding.mesh.devices)
    return False


def agree_on_module(name, trace, text, devices) -> None:
    """Before compiling for ``devices``: when they span processes, check that every process
    compiles this very module (see distributed.process.agree_on_module)."""
    if process.spans_processes(devices):
        process.agree_on_module(name, trace, text)


def keep_placements(pairs) -> None:
    """After ``load_state_dict`` swapped in host values: put every ``(tensor, like)`` back on
    its mesh, laid out as it was placed (or, when it never was, as ``like``, its parameter,
    if it has the parameter's shape: optimizer state follows its parameter)."""
    for tensor, like in pairs:
        sharding = registered(tensor)
        if sharding is None and like is not None and tensor.shape == like.shape:
            sharding = registered(like)
        if sharding is not None:
            place(tensor, sharding)


spmd_hooks.bind(
    prepare=prepare,
    plan=plan,
    eager_layout=eager_layout,
    eager_plan=eager_plan,
    placed=placed,
    spans_processes=spans_processes,
    agree_on_module=agree_on_module,
    keep_placements=keep_placements,
    peer_failure=process.peer_failure,
)
