"""PyTorch's spellings over hlotrace: ``import hlotrace.torch as torch``, ``from hlotrace.torch
import nn, optim``, ``import hlotrace.torch.nn.functional as F``, and a PyTorch model file runs
with only its imports changed.

Every function is a thin mapping onto hlotrace's registered ops or composites of them (so it
records, lowers, differentiates and is fuzzed like the rest), with PyTorch's names, signatures
and meanings where they differ from hlotrace's NumPy-named functions:

- creation (:mod:`hlotrace.torch.creation`): ``tensor``, ``from_numpy``, ``zeros``/``ones``/
  ``full``/``empty``/``arange``/``linspace``/``eye`` and their ``*_like``, with ``dtype=`` and
  ``device=`` (checked as ``Tensor.to`` checks it; placement stays hlotrace's);
  ``manual_seed``, ``randn``, ``rand``, ``randint``, ``randperm`` on :mod:`hlotrace.random`;
- math and shapes (:mod:`hlotrace.torch.ops`): ``cat``, ``stack``, ``tril``, ``triu``,
  ``flatten``, ``transpose`` (two dims), ``split``, ``where``, ``matmul``, ``softmax``,
  ``max``/``min`` (values and indices), reductions with ``dim=``/``keepdim=``, ...;
- ``no_grad``: the ops inside are taped by no GradManager (no gradient flows through them);
- dtypes: ``torch.float32`` (``float``), ``float16`` (``half``), ``bfloat16``, ``float64``
  (``double``), ``int32`` (``int``), ``int64`` (``long``), ``bool``: NumPy dtypes;
- ``Tensor``, ``nn`` (hlotrace.nn's modules, ``nn.functional`` with PyTorch's signatures,
  ``nn.Parameter``), ``optim`` (with ``zero_grad(set_to_none=True)``).

What differs: Python data without ``dtype=`` is 32-bit (``torch.arange(5)`` is int32;
PyTorch: int64), gradients come from a GradManager (``loss.backward()`` is the recording one's
``gm.backward(loss)``), and there is no ``torch.cuda`` (hlotrace picks the device).

>>> import hlotrace.torch as torch
>>> mask = torch.tril(torch.ones(3, 3)).view(1, 1, 3, 3)
>>> torch.cat([mask, mask], dim=1).shape
(1, 2, 3, 3)
"""

import numpy as _np

from hlotrace import dtypes as _dt
from hlotrace.tensor import Tensor
from hlotrace.torch import creation, ops
from hlotrace.torch.creation import *  # noqa: F403
from hlotrace.torch.ops import *  # noqa: F403
from hlotrace.torch_compat import Device

float32 = float = _dt.float32  # noqa: A001  (PyTorch's names)
float16 = half = _dt.float16
bfloat16 = _dt.bfloat16
float64 = double = _dt.float64
int32 = int = _dt.int32  # noqa: A001
int64 = long = _dt.int64
bool = _dt.bool_  # noqa: A001
dtype = _np.dtype  # isinstance(x.dtype, torch.dtype)

from hlotrace.torch import nn, optim  # noqa: E402  (after the names nn.functional uses)

__all__ = [
    "Device",
    "Tensor",
    "bfloat16",
    "bool",
    "double",
    "dtype",
    "float",
    "float16",
    "float32",
    "float64",
    "half",
    "int",
    "int32",
    "int64",
    "long",
    "nn",
    "optim",
    *creation.__all__,
    *ops.__all__,
]
