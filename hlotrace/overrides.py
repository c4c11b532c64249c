"""The active ``hlotrace.lowering.override`` layers, kept outside the lowering package so
that ``xla_trace``'s per-call path can check them without importing MLIR (eager use of
hlotrace never imports jax)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

OVERRIDES: list[dict[str, Callable[..., Any]]] = []  # innermost last


def override_token() -> tuple | None:
    """What the active overrides contribute to a compile-cache key (None without any)."""
    if not OVERRIDES:
        return None
    return tuple((name, id(fn)) for layer in OVERRIDES for name, fn in layer.items())
