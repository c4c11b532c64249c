"""The namespace op sample strategies see as ``s``: ``sample=lambda s: s.elementwise(2, s.ALL)``.

Everything here is re-exported from :mod:`.values` (element values: general, boundary and
special) and :mod:`.sampling` (arrays, shapes, operand sets, captured constants), plus hypothesis's
``st``; an op family builds its own composite strategies from these, beside its ops (see
``hlotrace/ops/shape.py``, ``hlotrace/ops/layout/samples.py``).
"""

from hypothesis import strategies as st

from hlotrace.testing.sampling import (
    ALL,
    FLOATS,
    NUMERIC,
    OpSample,
    arrays,
    astype_sample,
    axis_choice,
    distinct_arrays,
    dtypes,
    elementwise,
    fit_int_scalars,
    generator,
    long_arrays,
    other_dtypes,
    pinned_dtype,
    power_sample,
    random_shape,
    scalar_of,
    shapes,
    unary_range,
    values,
    where_sample,
    with_captures,
)
from hlotrace.testing.values import SPECIAL_FLOATS, Values, boundary_values

__all__ = [
    "ALL",
    "FLOATS",
    "NUMERIC",
    "SPECIAL_FLOATS",
    "OpSample",
    "Values",
    "arrays",
    "astype_sample",
    "axis_choice",
    "boundary_values",
    "distinct_arrays",
    "dtypes",
    "elementwise",
    "fit_int_scalars",
    "generator",
    "long_arrays",
    "other_dtypes",
    "pinned_dtype",
    "power_sample",
    "random_shape",
    "scalar_of",
    "shapes",
    "st",
    "unary_range",
    "values",
    "where_sample",
    "with_captures",
]
