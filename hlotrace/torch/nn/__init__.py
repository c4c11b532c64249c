"""``torch.nn``: hlotrace's modules (PyTorch's names, constructor arguments and state_dict
keys), ``nn.Parameter``, ``nn.init``, ``nn.utils`` and ``nn.functional`` with PyTorch's
signatures (:mod:`hlotrace.torch.nn.functional`). ``BatchNorm1d``/``BatchNorm2d`` take
PyTorch's ``momentum`` (the batch's weight, default 0.1; hlotrace's is MegEngine's ``1 -
momentum``): :mod:`hlotrace.torch.nn.normalization`.

>>> from hlotrace.torch import nn
>>> up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
>>> isinstance(nn.Parameter(nn.init.zeros_(nn.Linear(2, 2).weight)), nn.Parameter)
True
"""

from hlotrace.nn import *  # noqa: F403
from hlotrace.nn import __all__ as _modules
from hlotrace.nn import init, utils  # noqa: F401  (torch.nn.init, torch.nn.utils)
from hlotrace.tensor import Parameter
from hlotrace.torch.nn import functional
from hlotrace.torch.nn.normalization import BatchNorm1d, BatchNorm2d  # noqa: F401  (PyTorch's momentum)

__all__ = ["Parameter", "functional", *_modules]
