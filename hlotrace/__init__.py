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
from hlotrace.config import warn_unknown as _warn_unknown
from hlotrace.engines import configure_from_environment as _configure_engine
from hlotrace.engines import eager_engine
from hlotrace.errors import BackendError, HlotraceError, LoweringError, OpError, TraceError
from hlotrace.interop import from_dlpack
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.metrics import metrics, metrics_report, reset_metrics
from hlotrace.serialization import load, save
from hlotrace.tensor import Parameter, Tensor, tensor

F = functional
_configure_engine()  # $HLOTRACE_EAGER: numpy (default) or device

_warn_unknown()  # an HLOTRACE_* name hlotrace does not read (a typo) warns once

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
    "eager_engine",
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
