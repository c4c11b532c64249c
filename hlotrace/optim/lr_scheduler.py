"""Learning-rate schedulers (PyTorch's ``torch.optim.lr_scheduler`` names and values).

A scheduler writes ``optimizer.param_groups[i]["lr"]``; the optimizer feeds lr to a
compiled step as a 0-d input tensor (see :mod:`hlotrace.optim`), so ``scheduler.step()``
never recompiles. Every schedule here is a closed form of the step count (``last_epoch``),
which gives PyTorch's values when nothing else edits the lr between steps.

>>> from hlotrace import optim
>>> opt = optim.SGD(net.parameters(), lr=0.1)
>>> sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
>>> for batch in loader:
...     step(*batch, net, opt, gm)
...     sched.step()
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

from hlotrace.errors import HlotraceError
from hlotrace.optim.optimizer import Optimizer

__all__ = [
    "ConstantLR",
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "OneCycleLR",
    "SequentialLR",
    "StepLR",
]


class LRScheduler:
    """Base class: ``lr_at(epoch)`` gives each group's lr; :meth:`step` advances ``last_epoch``.

    Construction records each group's ``initial_lr`` (when ``last_epoch`` is -1) and applies
    epoch 0, as PyTorch does. ``get_last_lr()`` is what the last step set.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise HlotraceError(
                f"{type(self).__name__}: expected an hlotrace Optimizer, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        for i, group in enumerate(optimizer.param_groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise HlotraceError(
                    f"{type(self).__name__}: resuming at last_epoch={last_epoch} needs 'initial_lr' in param group {i}"
                )
        self.base_lrs = [float(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = int(last_epoch)
        self._last_lr: list[float] = []
        self.step()

    def lr_at(self, epoch: int) -> list[float]:
        """Each group's learning rate at ``epoch`` (0 = right after construction)."""
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        """Each group's learning rate at the current ``last_epoch``."""
        return self.lr_at(self.last_epoch)

    def get_last_lr(self) -> list[float]:
        """The learning rates the last :meth:`step` set."""
        return list(self._last_lr)

    def step(self) -> None:
        """Advance one step (call after ``optimizer.step()``) and set the new learning rates."""
        self.last_epoch += 1
        self._apply(self.get_lr())

    def _set_epoch(self, epoch: int) -> None:
        self.last_epoch = int(epoch)
        self._apply(self.get_lr())

    def _apply(self, values: Sequence[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            if group["lr"] != lr:  # an unchanged lr costs nothing in the next compiled call
                group["lr"] = float(lr)
        self._last_lr = [float(v) for v in values]

    def state_dict(self) -> dict:
        """Everything but the optimizer and functions (``lr_lambda``), as PyTorch."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v) and k != "lr_lambdas"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`state_dict` returned (then call nothing: the lr is not re-set)."""
        self.__dict__.update(state_dict)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, last_lr={self._last_lr})"


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``; one function, or one per parameter group.

    >>> warmup = optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 100))
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | Sequence[Callable], last_epoch: int = -1):
        groups = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, list | tuple) else [lr_lambda] * groups
        if len(lambdas) != groups:
            raise HlotraceError(f"LambdaLR: {len(lambdas)} lr_lambdas for {groups} parameter groups")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * float(fn(epoch)) for base, fn in zip(self.base_lrs, self.lr_lambdas, strict=True)]


class StepLR(LRScheduler):
    """``lr = base_lr * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if int(step_size) <= 0:
            raise HlotraceError(f"StepLR: step_size must be a positive int, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """``lr = base_lr * gamma ** (number of milestones <= epoch)``."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * self.gamma ** bisect.bisect_right(self.milestones, epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """``lr = base_lr * gamma ** epoch``."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * self.gamma**epoch for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """``lr = base_lr * factor`` for the first ``total_iters`` steps, then ``base_lr``."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1):
        if not 0.0 <= float(factor) <= 1.0:
            raise HlotraceError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = float(factor), int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        scale = self.factor if epoch < self.total_iters else 1.0
        return [base * scale for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Linear warmup (or decay): the factor goes from ``start_factor`` to ``end_factor``
    over ``total_iters`` steps, then stays.

    >>> warmup = optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=500)
    """

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ):
        if not 0.0 < float(start_factor) <= 1.0 or not 0.0 <= float(end_factor) <= 1.0:
            raise HlotraceError(
                f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got {start_factor}, {end_factor}"
            )
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        done = min(epoch, self.total_iters) / self.total_iters if self.total_iters > 0 else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * done
        return [base * factor for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`` (no restarts:
    past ``T_max`` the cosine goes on, as PyTorch's)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        if int(T_max) <= 0:
            raise HlotraceError(f"CosineAnnealingLR: T_max must be a positive int, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        cosine = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Runs ``schedulers[i]`` from ``milestones[i - 1]`` on, each restarted at its epoch 0
    (warmup then cosine: ``SequentialLR(opt, [LinearLR(...), CosineAnnealingLR(...)], [500])``)."""

    def __init__(
        self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int], last_epoch=-1
    ):
        self.schedulers = list(schedulers)
        self.milestones = [int(m) for m in milestones]
        if len(self.milestones) != len(self.schedulers) - 1:
            raise HlotraceError(
                f"SequentialLR: {len(self.schedulers)} schedulers need {len(self.schedulers) - 1} milestones, "
                f"got {len(self.milestones)}"
            )
        if any(s.optimizer is not optimizer for s in self.schedulers):
            raise HlotraceError("SequentialLR: every scheduler must drive the optimizer given to SequentialLR")
        for group, base in zip(optimizer.param_groups, self.schedulers[0].base_lrs, strict=True):
            group["lr"] = base  # undo the sub-schedulers' own construction steps
        super().__init__(optimizer, last_epoch)

    def _current(self, epoch: int) -> tuple[LRScheduler, int]:
        index = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[index - 1] if index else 0
        return self.schedulers[index], epoch - start

    def lr_at(self, epoch):
        scheduler, local = self._current(epoch)
        return scheduler.lr_at(local)

    def step(self) -> None:
        self.last_epoch += 1
        scheduler, local = self._current(self.last_epoch)
        scheduler._set_epoch(local)
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "schedulers")}
        state["schedulers"] = [s.state_dict() for s in self.schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        for scheduler, sub in zip(self.schedulers, state.pop("schedulers"), strict=True):
            scheduler.load_state_dict(sub)
        self.__dict__.update(state)


class OneCycleLR(LRScheduler):
    """The 1cycle policy (PyTorch's ``OneCycleLR``): lr rises from ``max_lr / div_factor`` to
    ``max_lr`` over ``pct_start`` of ``total_steps``, then anneals to ``initial_lr /
    final_div_factor`` ("cos" or "linear"); ``three_phase`` comes back down to the initial lr
    before the final anneal. With ``cycle_momentum`` the momentum (SGD) or beta1 (Adam*)
    moves inversely between ``max_momentum`` and ``base_momentum``. Stepping past
    ``total_steps`` is an error, as in PyTorch.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise HlotraceError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = int(epochs) * int(steps_per_epoch)
        if int(total_steps) <= 0:
            raise HlotraceError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if not 0.0 <= float(pct_start) <= 1.0:
            raise HlotraceError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise HlotraceError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps = int(total_steps)
        self.anneal_strategy = anneal_strategy
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, list | tuple) else [max_lr] * len(groups)
        if len(max_lrs) != len(groups):
            raise HlotraceError(f"OneCycleLR: {len(max_lrs)} max_lr values for {len(groups)} parameter groups")
        ends = (
            [pct_start * total_steps - 1, 2 * pct_start * total_steps - 2, total_steps - 1]
            if three_phase
            else [pct_start * total_steps - 1, total_steps - 1]
        )
        # (end step, lr from, lr to, momentum from, momentum to) per phase, by group key.
        if three_phase:
            keys = [
                ("initial_lr", "max_lr", "max_momentum", "base_momentum"),
                ("max_lr", "initial_lr", "base_momentum", "max_momentum"),
                ("initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            keys = [
                ("initial_lr", "max_lr", "max_momentum", "base_momentum"),
                ("max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        self.phases = [(float(end), *k) for end, k in zip(ends, keys, strict=True)]
        self.cycle_momentum = bool(cycle_momentum)
        self.use_beta1 = "betas" in optimizer.defaults
        if self.cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            raise HlotraceError(
                f"OneCycleLR: cycle_momentum needs an optimizer with momentum or betas, not {type(optimizer).__name__}"
            )
        for group, peak in zip(groups, max_lrs, strict=True):
            if last_epoch == -1:
                group["initial_lr"] = float(peak) / float(div_factor)
                group["max_lr"] = float(peak)
                group["min_lr"] = group["initial_lr"] / float(final_div_factor)
                if self.cycle_momentum:
                    group["max_momentum"], group["base_momentum"] = float(max_momentum), float(base_momentum)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _phase_values(self, group: dict, step: int) -> tuple[float, float | None]:
        start_step = 0.0
        for i, (end_step, lr_from, lr_to, m_from, m_to) in enumerate(self.phases):
            if step <= end_step or i == len(self.phases) - 1:
                pct = (step - start_step) / (end_step - start_step) if end_step != start_step else 1.0
                lr = self._anneal(group[lr_from], group[lr_to], pct)
                momentum = self._anneal(group[m_from], group[m_to], pct) if self.cycle_momentum else None
                return lr, momentum
            start_step = end_step
        raise AssertionError("unreachable: the last phase always matches")

    def lr_at(self, epoch):
        if epoch > self.total_steps:
            raise HlotraceError(
                f"OneCycleLR: stepped {epoch} times, past total_steps={self.total_steps} (make total_steps larger)"
            )
        return [self._phase_values(g, epoch)[0] for g in self.optimizer.param_groups]

    def step(self) -> None:
        super().step()
        if not self.cycle_momentum:
            return
        for group in self.optimizer.param_groups:
            _, momentum = self._phase_values(group, self.last_epoch)
            if self.use_beta1:
                betas = (momentum, *group["betas"][1:])
                if tuple(group["betas"]) != betas:
                    group["betas"] = betas
            elif group["momentum"] != momentum:
                group["momentum"] = momentum
