"""Optimizers: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta``, ``Lion`` (PyTorch's update
formulas, MegEngine's API), learning-rate schedulers (:mod:`hlotrace.optim.lr_scheduler`).

>>> import hlotrace as ht
>>> from hlotrace import nn, optim
>>> from hlotrace.autodiff import GradManager
>>> net = nn.Linear(4, 1)
>>> gm = GradManager().attach(net.parameters())
>>> opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
>>> with gm:
...     loss = (net(x) - y).mean()
...     gm.backward(loss)
>>> opt.step().clear_grad()

Every update is made of tensor ops applied in place to the existing tensor objects
(``Tensor._assign``), so a whole training step recorded by ``xla_trace`` compiles into one
executable that takes parameters, optimizer state and hyper-parameters as inputs and
writes the updated state back. For that:

- state tensors (momentum buffers, moments, per-parameter step counts) exist before the
  first step: they are created with the optimizer, or by :meth:`Optimizer._trace_state`
  before a recording when a changed hyper-parameter needs a new kind of state;
- hyper-parameters enter the math as 0-d *hyper tensors* the optimizer owns (one per group
  and name), refreshed from ``param_groups`` outside any recording, so changing
  ``opt.param_groups[0]["lr"]`` takes effect without recompiling;
- choices that change which ops run (momentum on/off, nesterov, weight decay on/off,
  amsgrad) are read from the Python values and form the static key of ``_trace_state``,
  so changing one selects another compiled program;
- "first step" logic is tensor logic on the step-count tensors (``F.where``).

Step counts are per parameter, as in PyTorch: a parameter whose ``.grad`` is None is
skipped entirely (its step count does not advance), so its first real update later gets
the first-step treatment and bias corrections PyTorch would give it. ``step_per_group=True``
(SGD, Adam, AdamW, Adagrad) keeps one count per parameter group instead, with the same
results and the same ``state_dict()`` layout (:mod:`hlotrace.optim.steps`).
"""

from hlotrace.optim import lr_scheduler
from hlotrace.optim.adam import Adam, AdamW
from hlotrace.optim.adaptive import Adadelta, Adagrad, Lion, RMSprop
from hlotrace.optim.optimizer import Optimizer
from hlotrace.optim.sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Lion", "Optimizer", "RMSprop", "lr_scheduler"]
