"""Adam and AdamW (PyTorch's formulas)."""

from __future__ import annotations

from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.optim.optimizer import Optimizer
from hlotrace.tensor import Tensor


class Adam(Optimizer):
    """Adam (PyTorch's ``torch.optim.Adam``; weight decay is L2, added to the gradient).

    Per parameter ``p`` with gradient ``g`` (γ = lr, β₁, β₂ = betas, ε = eps,
    λ = weight_decay, t = this parameter's step count, 1 on the first update; with
    ``step_per_group=True`` one count per parameter group, see :mod:`hlotrace.optim.steps`)::

        if maximize:  g ← −g
        if λ ≠ 0:  g ← g + λ·p
        m ← β₁·m + (1 − β₁)·g
        v ← β₂·v + (1 − β₂)·g²
        if amsgrad:  v_max ← max(v_max, v);  v̂ = v_max   else  v̂ = v
        p ← p − (γ / (1 − β₁ᵗ)) · m / (√v̂ / √(1 − β₂ᵗ) + ε)

    >>> opt = optim.Adam(net.parameters(), lr=1e-3, betas=(0.9, 0.999))
    """

    _hyper_names = ("lr", "beta1", "beta2", "eps", "weight_decay")
    _decoupled = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
        step_per_group: bool = False,
    ):
        defaults = dict(
            lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize
        )
        super().__init__(params, defaults, step_per_group=step_per_group)

    def _hyper_values(self, group: dict) -> dict[str, float]:
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"])

    def _validate_group(self, group: dict) -> None:
        super()._validate_group(group)
        for i, beta in enumerate(group["betas"]):
            if not 0.0 <= float(beta) < 1.0:
                raise HlotraceError(f"{type(self).__name__}: betas[{i}] must be in [0, 1), got {beta}")

    def _state_names(self, group: dict) -> tuple[str, ...]:
        names = ("step", "exp_avg", "exp_avg_sq")
        return (*names, "max_exp_avg_sq") if group["amsgrad"] else names

    def _group_key(self, group: dict) -> tuple:
        return (group["weight_decay"] != 0, bool(group["amsgrad"]), bool(group.get("maximize", False)))

    def _update_group(self, group: dict, hyper: dict[str, Tensor]) -> None:
        decay_on, amsgrad, maximize = self._group_key(group)
        lr, beta1, beta2, eps = hyper["lr"], hyper["beta1"], hyper["beta2"], hyper["eps"]
        counts = self._advance_steps(group)
        corrections: dict[int, tuple[Tensor, Tensor]] = {}  # per count: (γ / (1 − β₁ᵗ), √(1 − β₂ᵗ))
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if maximize:
                g = -g
            state = self.state[p]
            step, m, v = counts[id(p)], state["exp_avg"], state["exp_avg_sq"]
            if decay_on:
                if self._decoupled:
                    p._assign(p * (1 - lr * hyper["weight_decay"]))
                else:
                    g = g + hyper["weight_decay"] * p
            m._assign(beta1 * m + (1 - beta1) * g)
            v._assign(beta2 * v + (1 - beta2) * (g * g))
            if amsgrad:
                v_max = state["max_exp_avg_sq"]
                v_max._assign(F.maximum(v_max, v))
                v = v_max
            correction = corrections.get(id(step))
            if correction is None:
                bias_correction1 = 1 - beta1**step
                bias_correction2 = 1 - beta2**step
                correction = corrections[id(step)] = (lr / bias_correction1, F.sqrt(bias_correction2))
            step_size, root_correction2 = correction
            denom = F.sqrt(v) / root_correction2 + eps
            p._assign(p - step_size * (m / denom))


class AdamW(Adam):
    """AdamW (PyTorch's ``torch.optim.AdamW``): Adam with decoupled weight decay.

    As :class:`Adam` without the L2 term, after first decaying the parameter::

        p ← p · (1 − γ·λ)
        m ← β₁·m + (1 − β₁)·g
        v ← β₂·v + (1 − β₂)·g²
        p ← p − (γ / (1 − β₁ᵗ)) · m / (√v̂ / √(1 − β₂ᵗ) + ε)

    >>> opt = optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
    """

    _decoupled = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        maximize: bool = False,
        step_per_group: bool = False,
    ):
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            step_per_group=step_per_group,
        )
