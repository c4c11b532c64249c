"""What hlotrace's one-device paths call into hlotrace.distributed, behind one flag:
``active`` turns True the first time anything is placed on a mesh in this process. While it
is False, ``xla_trace`` pays one attribute read per call and never imports the rest."""

active = False


def prepare(inputs, holders=()):
    """The cache-key part of the inputs' placements, or None (see distributed.compile)."""
    from hlotrace.distributed.compile import prepare as prepare_inputs

    return prepare_inputs(inputs, holders)


def plan(trace, inputs, io, num_results):
    """The SPMD plan of a step just recorded, or None (see distributed.compile)."""
    from hlotrace.distributed.compile import plan as make_plan

    return make_plan(trace, inputs, io, num_results)


def placed(tensors) -> bool:
    """Whether any of ``tensors`` lives on a mesh (a one-device executable must not get it)."""
    from hlotrace.distributed.placement import sharding_of

    return any(sharding_of(t) is not None for t in tensors)
