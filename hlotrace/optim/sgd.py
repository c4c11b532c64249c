"""SGD with momentum, dampening, weight decay and Nesterov (PyTorch's formulas)."""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.optim.optimizer import Optimizer
from hlotrace.tensor import Tensor


class SGD(Optimizer):
    """Stochastic gradient descent with momentum (PyTorch's ``torch.optim.SGD``).

    Per parameter ``p`` with gradient ``g`` (γ = lr, λ = weight_decay, μ = momentum,
    τ = dampening, t = this parameter's count of momentum updates, 1 on the first; one count
    per parameter group with ``step_per_group=True``, see :mod:`hlotrace.optim.steps`)::

        if maximize:  g ← −g
        if λ ≠ 0:  g ← g + λ·p
        if μ ≠ 0:  b ← g                    if t = 1
                   b ← μ·b + (1 − τ)·g      otherwise
                   g ← g + μ·b   if nesterov else   b
        p ← p − γ·g

    >>> opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    """

    _hyper_names = ("lr", "momentum", "dampening", "weight_decay")

    def __init__(
        self,
        params,
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
        step_per_group: bool = False,
    ):
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
        )
        super().__init__(params, defaults, step_per_group=step_per_group)

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise HlotraceError("SGD: nesterov momentum requires a momentum > 0 and zero dampening")

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return ("step", "momentum_buffer") if group["momentum"] != 0 else ()

    def _group_key(self, group: dict) -> tuple:
        return (
            group["momentum"] != 0,
            bool(group["nesterov"]),
            group["weight_decay"] != 0,
            bool(group.get("maximize", False)),
        )

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        momentum_on, nesterov, decay_on, maximize = self._group_key(group)
        lr, mu = hyper["lr"], hyper["momentum"]
        counts = self._advance_steps(group) if momentum_on else {}
        first: dict[int, Tensor] = {}  # per count: t = 1
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            if decay_on:
                g = g + hyper["weight_decay"] * p
            if momentum_on:
                step, buf = counts[id(p)], self.state[p]["momentum_buffer"]
                is_first = first.get(id(step))
                if is_first is None:
                    is_first = first[id(step)] = step == 1
                buf._assign(F.where(is_first, g, mu * buf + (1 - hyper["dampening"]) * g))
                g = g + mu * buf if nesterov else buf
            p._assign(p - lr * g)
