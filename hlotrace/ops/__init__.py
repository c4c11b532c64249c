"""Op definitions, one module per family; importing this package registers them all."""

from hlotrace.ops import creation, elementwise, indexing, linalg, nn, reduction, shape  # noqa: F401
from hlotrace.ops.registry import OPS, Aval, OpDef, apply, get_op, register_op

__all__ = ["OPS", "Aval", "OpDef", "apply", "get_op", "register_op"]
