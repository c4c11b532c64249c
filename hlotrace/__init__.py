"""hlotrace: record eager NumPy-backed programs, lower them to StableHLO, run them via PJRT.

>>> import hlotrace as ht
>>> from hlotrace.interop import from_dlpack
from hlotrace.jit import partial_trace, xla_trace
>>> @xla_trace
... def f(x):
...     return (x * 2).sum()
"""

from hlotrace import (
    dtypes,
    functional,
    nn,
    optim,
    random,
)
from hlotrace.errors import BackendError, HlotraceError, LoweringError, OpError, TraceError
from hlotrace.interop import from_dlpack
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.metrics import metrics, metrics_report, reset_metrics
from hlotrace.serialization import load, save
from hlotrace.tensor import Parameter, Tensor, tensor

F = functional

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "F",
    "HlotraceError",
    "LoweringError",
    "OpError",
    "Parameter",
    "Tensor",
    "TraceError",
    "dtypes",
    "from_dlpack",
    "functional",
    "load",
    "metrics",
    "metrics_report",
    "nn",
    "optim",
    "partial_trace",
    "random",
    "reset_metrics",
    "save",
    "tensor",
    "xla_trace",
]
