"""Gradient utilities (PyTorch's ``torch.nn.utils`` names): ``clip_grad_norm_``,
``clip_grad_value_``. Both rewrite each ``.grad`` in place with tensor ops, so they work
eagerly and inside a compiled step (between ``gm.backward`` and ``opt.step``).

>>> with gm:
...     loss = F.cross_entropy(net(x), y)
...     gm.backward(loss)
>>> total_norm = nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
>>> opt.step().clear_grad()
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hlotrace import functional as F
from hlotrace.errors import HlotraceError
from hlotrace.recording import current_recorder
from hlotrace.tensor import Tensor, tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> Tensor:
    """Scale every gradient by ``min(1, max_norm / (total_norm + 1e-6))``, in place.

    ``total_norm`` is the ``norm_type``-norm of all gradients together (as if concatenated;
    ``float("inf")`` for the largest magnitude) and is returned as a 0-d float32 Tensor.
    Parameters without a ``.grad`` are skipped. ``error_if_nonfinite`` checks the norm on the
    host, so it works eagerly only (a compiled step cannot stop on a value).
    """
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return tensor(0.0, dtype="float32")
    if norm_type <= 0 or math.isnan(norm_type):
        raise HlotraceError(f"clip_grad_norm_: norm_type must be > 0 (or inf), got {norm_type}")
    norms = []
    for g in grads:
        size = F.abs(F.astype(g, "float32"))
        if math.isinf(norm_type):
            norms.append(F.max(size) if g.size else tensor(0.0, dtype="float32"))
        elif norm_type == 2.0:
            norms.append(F.sum(size * size))
        else:
            norms.append(F.sum(size**norm_type))
    stacked = F.stack(norms)
    if math.isinf(norm_type):
        total = F.max(stacked)
    elif norm_type == 2.0:
        total = F.sqrt(F.sum(stacked))
    else:
        total = F.sum(stacked) ** (1.0 / norm_type)
    if error_if_nonfinite:
        if current_recorder() is not None:
            raise HlotraceError(
                "clip_grad_norm_(error_if_nonfinite=True) needs the norm's value on the host, which a compiled "
                "step does not have; check the returned norm after the step instead"
            )
        if not math.isfinite(total.item()):
            raise HlotraceError(
                f"clip_grad_norm_: the total {norm_type}-norm of the gradients is {total.item()} "
                "(non-finite); set error_if_nonfinite=False to clip anyway"
            )
    scale = F.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        g._assign(g * F.astype(scale, g.dtype))
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float) -> None:
    """Clip every gradient to ``[-clip_value, clip_value]``, in place (NaN stays NaN)."""
    clip_value = float(clip_value)
    if clip_value < 0:
        raise HlotraceError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for g in _grads(parameters):
        g._assign(F.clip(g, -clip_value, clip_value))
