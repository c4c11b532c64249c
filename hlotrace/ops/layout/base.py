"""The layout family's helpers: attribute checks, the index maps the rules share
(:func:`index_runs`, :func:`pad_indices`) (semantics in :mod:`hlotrace.ops.layout`)."""

from __future__ import annotations

import numpy as np

from hlotrace.errors import ShapeDtypeError
from hlotrace.ops.registry import Aval

FAMILY = "layout"

PAD_MODES = ("constant", "reflect", "edge")


def _check_attrs(op, attrs, allowed, required=()):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise ShapeDtypeError(f"unknown attributes {sorted(unknown)} ({op} takes {', '.join(allowed)})")
    for key in required:
        if key not in attrs:
            raise ShapeDtypeError(f"needs {key}=")


def index_runs(indices) -> list[tuple[int, int, int, int]]:
    """A static index sequence as runs ``(out_start, source, length, step)``: output
    positions ``out_start + t`` read ``source + t * step`` with step 1, -1 or 0."""
    runs, i, n = [], 0, len(indices)
    while i < n:
        j, step = i + 1, int(indices[i + 1] - indices[i]) if i + 1 < n else 1
        if step in (-1, 0, 1):
            while j < n and indices[j] - indices[j - 1] == step:
                j += 1
        else:
            step = 1
        runs.append((i, int(indices[i]), j - i, step))
        i = j
    return runs


def pad_indices(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input index each output position of a reflect/edge-padded axis copies."""
    i = np.arange(-before, size + after)
    if mode == "edge" or size == 1:
        return np.clip(i, 0, size - 1)
    period = 2 * size - 2
    j = np.mod(i, period)
    return np.where(j >= size, period - j, j)


def _same_aval(x: Aval, **attrs) -> Aval:
    return x
