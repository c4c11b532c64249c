"""``torch.optim``: hlotrace's optimizers (PyTorch's update formulas) with PyTorch's
``zero_grad(set_to_none=True)``, and ``lr_scheduler``.

>>> from hlotrace.torch import nn, optim
>>> opt = optim.AdamW(nn.Linear(2, 2).parameters(), lr=1e-3)
>>> opt.zero_grad(set_to_none=True) is opt
True
"""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace import optim as _optim
from hlotrace.optim import lr_scheduler

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Lion", "Optimizer", "RMSprop", "lr_scheduler"]


class _ZeroGrad:
    """PyTorch's ``zero_grad(set_to_none=True)`` over hlotrace's ``clear_grad``."""

    def zero_grad(self, set_to_none: bool = True):
        """``set_to_none=True`` (PyTorch's default): every ``.grad`` becomes None
        (``clear_grad()``); ``False``: each existing ``.grad`` is zeroed in place."""
        if set_to_none:
            return self.clear_grad()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad._assign(F.zeros_like(p.grad))
        return self


Optimizer = _optim.Optimizer


class SGD(_ZeroGrad, _optim.SGD):
    __doc__ = _optim.SGD.__doc__


class Adam(_ZeroGrad, _optim.Adam):
    __doc__ = _optim.Adam.__doc__


class AdamW(_ZeroGrad, _optim.AdamW):
    __doc__ = _optim.AdamW.__doc__


class RMSprop(_ZeroGrad, _optim.RMSprop):
    __doc__ = _optim.RMSprop.__doc__


class Adagrad(_ZeroGrad, _optim.Adagrad):
    __doc__ = _optim.Adagrad.__doc__


class Adadelta(_ZeroGrad, _optim.Adadelta):
    __doc__ = _optim.Adadelta.__doc__


class Lion(_ZeroGrad, _optim.Lion):
    __doc__ = _optim.Lion.__doc__
