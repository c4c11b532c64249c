"""The namespace op sample strategies see as ``s``: ``sample=lambda s: s.elementwise(2, s.ALL)``.

Everything here is re-exported from :mod:`.values` (element values: general, boundary and
special), :mod:`.sampling` (arrays, shapes, operand sets, captured constants) and
:mod:`.shape_samples` (shape and indexing ops), plus hypothesis's ``st``; an op family may
also build its own composite strategy from these (see ``hlotrace/ops/reduction.py``).
"""

from hypothesis import strategies as st

import hlotrace.testing.layout_samples as layout_samples
from hlotrace.testing.sampling import (
    ALL,
    FLOATS,
    NUMERIC,
    OpSample,
    arrays,
    astype_sample,
    axis_choice,
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
from hlotrace.testing.shape_samples import (
    broadcast_to_sample,
    concat_sample,
    distinct_arrays,
    expand_dims_sample,
    getitem_sample,
    reshape_sample,
    squeeze_sample,
    transpose_sample,
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
    "broadcast_to_sample",
    "concat_sample",
    "distinct_arrays",
    "dtypes",
    "elementwise",
    "expand_dims_sample",
    "fit_int_scalars",
    "generator",
    "getitem_sample",
    "layout_samples",
    "long_arrays",
    "other_dtypes",
    "pinned_dtype",
    "power_sample",
    "random_shape",
    "reshape_sample",
    "scalar_of",
    "shapes",
    "squeeze_sample",
    "st",
    "transpose_sample",
    "unary_range",
    "values",
    "where_sample",
    "with_captures",
]
