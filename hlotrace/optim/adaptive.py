"""RMSprop, Adagrad, Adadelta and Lion (PyTorch's formulas; Lion as in Chen et al. 2023)."""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.optim.optimizer import Optimizer
from hlotrace.tensor import Tensor

__all__ = ["Adadelta", "Adagrad", "Lion", "RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (PyTorch's ``torch.optim.RMSprop``).

    Per parameter ``p`` with gradient ``g`` (γ = lr, α = alpha, ε = eps, λ = weight_decay,
    μ = momentum)::

        if maximize:  g ← −g
        if λ ≠ 0:  g ← g + λ·p
        v ← α·v + (1 − α)·g²
        if centered:  ḡ ← α·ḡ + (1 − α)·g;  d = √(v − ḡ²) + ε   else  d = √v + ε
        if μ ≠ 0:  b ← μ·b + g/d;  p ← p − γ·b   else  p ← p − γ·g/d

    >>> opt = optim.RMSprop(net.parameters(), lr=1e-2, momentum=0.9, centered=True)
    """

    _hyper_names = ("lr", "alpha", "eps", "weight_decay", "momentum")

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        maximize: bool = False,
    ):
        defaults = dict(
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        if not 0.0 <= float(group["alpha"]) <= 1.0:
            raise HlotraceError(f"RMSprop: alpha must be in [0, 1], got {group['alpha']}")

    def _state_names(self, group: dict) -> tuple[str, ...]:
        names = ("square_avg",)
        if group["momentum"] != 0:
            names += ("momentum_buffer",)
        if group["centered"]:
            names += ("grad_avg",)
        return names

    def _group_key(self, group: dict) -> tuple:
        return (group["momentum"] != 0, bool(group["centered"]), group["weight_decay"] != 0, bool(group["maximize"]))

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        momentum_on, centered, decay_on, maximize = self._group_key(group)
        lr, alpha, eps = hyper["lr"], hyper["alpha"], hyper["eps"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            if decay_on:
                g = g + hyper["weight_decay"] * p
            state = self.state[p]
            v = state["square_avg"]
            v._assign(alpha * v + (1 - alpha) * (g * g))
            if centered:
                g_avg = state["grad_avg"]
                g_avg._assign(alpha * g_avg + (1 - alpha) * g)
                denom = F.sqrt(v - g_avg * g_avg) + eps
            else:
                denom = F.sqrt(v) + eps
            if momentum_on:
                buf = state["momentum_buffer"]
                buf._assign(hyper["momentum"] * buf + g / denom)
                p._assign(p - lr * buf)
            else:
                p._assign(p - lr * (g / denom))


class Adagrad(Optimizer):
    """Adagrad (PyTorch's ``torch.optim.Adagrad``).

    Per parameter ``p`` with gradient ``g`` (γ = lr, η = lr_decay, λ = weight_decay,
    ε = eps, t = this parameter's step count, 1 on the first update (one per parameter group
    with ``step_per_group=True``, see :mod:`hlotrace.optim.steps`); the accumulator ``s``
    starts at ``initial_accumulator_value``)::

        if maximize:  g ← −g
        if λ ≠ 0:  g ← g + λ·p
        s ← s + g²
        p ← p − γ / (1 + (t − 1)·η) · g / (√s + ε)

    >>> opt = optim.Adagrad(net.parameters(), lr=1e-2)
    """

    _hyper_names = ("lr", "lr_decay", "weight_decay", "eps")

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        maximize: bool = False,
        step_per_group: bool = False,
    ):
        if float(initial_accumulator_value) < 0:
            raise HlotraceError(f"Adagrad: initial_accumulator_value must be >= 0, got {initial_accumulator_value}")
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=float(initial_accumulator_value),
            eps=eps,
            maximize=maximize,
        )
        super().__init__(params, defaults, step_per_group=step_per_group)

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return ("step", "sum")

    def _initial_state(self, group: dict, name: str) -> float:
        return group["initial_accumulator_value"] if name == "sum" else 0.0

    def _group_key(self, group: dict) -> tuple:
        return (group["weight_decay"] != 0, bool(group["maximize"]))

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        decay_on, maximize = self._group_key(group)
        counts = self._advance_steps(group)
        rates: dict[int, Tensor] = {}  # per count: γ / (1 + (t − 1)·η)
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            if decay_on:
                g = g + hyper["weight_decay"] * p
            step, total = counts[id(p)], self.state[p]["sum"]
            total._assign(total + g * g)
            clr = rates.get(id(step))
            if clr is None:
                clr = rates[id(step)] = hyper["lr"] / (1 + (step - 1) * hyper["lr_decay"])
            p._assign(p - clr * (g / (F.sqrt(total) + hyper["eps"])))


class Adadelta(Optimizer):
    """Adadelta (PyTorch's ``torch.optim.Adadelta``).

    Per parameter ``p`` with gradient ``g`` (γ = lr, ρ = rho, ε = eps, λ = weight_decay)::

        if maximize:  g ← −g
        if λ ≠ 0:  g ← g + λ·p
        v ← ρ·v + (1 − ρ)·g²
        Δ ← √(u + ε) / √(v + ε) · g
        u ← ρ·u + (1 − ρ)·Δ²
        p ← p − γ·Δ

    >>> opt = optim.Adadelta(net.parameters(), lr=1.0, rho=0.9)
    """

    _hyper_names = ("lr", "rho", "eps", "weight_decay")

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        maximize: bool = False,
    ):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        if not 0.0 <= float(group["rho"]) <= 1.0:
            raise HlotraceError(f"Adadelta: rho must be in [0, 1], got {group['rho']}")

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return ("square_avg", "acc_delta")

    def _group_key(self, group: dict) -> tuple:
        return (group["weight_decay"] != 0, bool(group["maximize"]))

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        decay_on, maximize = self._group_key(group)
        rho, eps = hyper["rho"], hyper["eps"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            if decay_on:
                g = g + hyper["weight_decay"] * p
            state = self.state[p]
            v, u = state["square_avg"], state["acc_delta"]
            v._assign(rho * v + (1 - rho) * (g * g))
            delta = F.sqrt(u + eps) / F.sqrt(v + eps) * g
            u._assign(rho * u + (1 - rho) * (delta * delta))
            p._assign(p - hyper["lr"] * delta)


class Lion(Optimizer):
    """Lion (EvoLved Sign Momentum, Chen et al. 2023), with decoupled weight decay.

    Per parameter ``p`` with gradient ``g`` (γ = lr, β₁, β₂ = betas, λ = weight_decay)::

        if maximize:  g ← −g
        p ← p · (1 − γ·λ)
        p ← p − γ · sign(β₁·m + (1 − β₁)·g)
        m ← β₂·m + (1 − β₂)·g

    Use a learning rate 3-10x smaller than AdamW's and a weight decay 3-10x larger.

    >>> opt = optim.Lion(net.parameters(), lr=1e-4, weight_decay=1e-2)
    """

    _hyper_names = ("lr", "beta1", "beta2", "weight_decay")

    def __init__(
        self,
        params,
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        maximize: bool = False,
    ):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay, maximize=maximize))

    def _hyper_values(self, group: dict) -> dict[str, float]:
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"])

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        for i, beta in enumerate(group["betas"]):
            if not 0.0 <= float(beta) <= 1.0:
                raise HlotraceError(f"Lion: betas[{i}] must be in [0, 1], got {beta}")

    def _state_names(self, group: dict) -> tuple[str, ...]:
        return ("exp_avg",)

    def _group_key(self, group: dict) -> tuple:
        return (group["weight_decay"] != 0, bool(group["maximize"]))

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        decay_on, maximize = self._group_key(group)
        lr, beta1, beta2 = hyper["lr"], hyper["beta1"], hyper["beta2"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            m = self.state[p]["exp_avg"]
            if decay_on:
                p._assign(p * (1 - lr * hyper["weight_decay"]))
            p._assign(p - lr * F.sign(beta1 * m + (1 - beta1) * g))
            m._assign(beta2 * m + (1 - beta2) * g)
