"""Lowering rules, one module per op family (mirrors hlotrace/ops/)."""

from hlotrace.lowering.rules import (  # noqa: F401
    activation,
    barrier,
    bitwise,
    control_flow,
    conv,
    creation,
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
