"""``xla_trace`` and ``partial_trace``: record on the first call, run compiled afterwards.

>>> @xla_trace
... def step(x, w):
...     return F.tanh(x @ w)
>>> step(x, w)   # eager run, recorded, lowered, compiled
>>> step(x, w)   # compiled executable; outputs stay on the device

``xla_trace`` and its call path (keys, caches, state read and written back) are in
:mod:`hlotrace.traced`; ``partial_trace``, built on it, in :mod:`hlotrace.partial`.
"""

from hlotrace.partial import PartialTracedFunction, partial_trace
from hlotrace.traced import FIRST_CALLS, TracedFunction, xla_trace

__all__ = ["FIRST_CALLS", "PartialTracedFunction", "TracedFunction", "partial_trace", "xla_trace"]
