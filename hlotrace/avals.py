"""Abstract values: what inference, recording and lowering know about a tensor."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hlotrace import dtypes as dt


class Aval(NamedTuple):
    """Abstract value: a shape and a dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __str__(self) -> str:
        return f"{dt.SHORT_NAMES.get(self.dtype, self.dtype)}[{','.join(map(str, self.shape))}]"


def describe_avals(avals) -> str:
    return ", ".join(str(a) for a in avals) if avals else "no inputs"
