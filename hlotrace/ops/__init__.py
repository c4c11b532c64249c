"""Op definitions, one module per family; importing this package registers them all."""

from hlotrace.dispatch import apply
from hlotrace.ops import (  # noqa: F401
    activation,
    barrier,
    bitwise,
    control_flow,
    conv,
    creation,
    distributed,
    elementwise,
    gather,
    indexing,
    layout,
    linalg,
    math,
    nn,
    normalization,
    pooling,
    random,
    reduction,
    scan,
    shape,
    sorting,
)
from hlotrace.ops.registry import OPS, Aval, OpDef, get_op, register_op

__all__ = ["OPS", "Aval", "OpDef", "apply", "get_op", "register_op"]
