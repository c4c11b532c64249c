"""Op definitions, one module (or package) per family; importing this package registers them all.

A family module declares ``FAMILY`` (the ``OpDef.family`` of its ops); its ``__all__`` names the
user functions ``hlotrace.functional`` exposes (:data:`FAMILY_MODULES`, gathered below, not listed).
"""

import types

from hlotrace.dispatch import apply
from hlotrace.ops import (  # noqa: F401
    activation,
    barrier,
    bitwise,
    control_flow,
    conv,
    creation,
    cumulative,
    distributed,
    elementwise,
    gather,
    generator,
    indexing,
    layout,
    linalg,
    math,
    nn,
    normalization,
    pooling,
    random,
    reduction,
    shape,
    sorting,
)
from hlotrace.ops.registry import OPS, Aval, OpDef, get_op, register_op

# Every family imported above, in name order: a family added to the import list is exposed
# by hlotrace.functional without a second list to update.
FAMILY_MODULES = tuple(
    module
    for name, module in sorted(vars().items())
    if isinstance(module, types.ModuleType) and module.__name__ == f"{__name__}.{name}" and hasattr(module, "FAMILY")
)

__all__ = ["FAMILY_MODULES", "OPS", "Aval", "OpDef", "apply", "get_op", "register_op"]
