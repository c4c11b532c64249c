"""Resampling modules: ``PixelShuffle``, ``PixelUnshuffle``, ``Upsample`` (nearest and
(bi/tri)linear, PyTorch's formulas), composites of reshape, transpose, repeat and take.

>>> from hlotrace import nn
>>> nn.PixelShuffle(2)(ht.tensor(np.zeros((1, 8, 3, 3), np.float32))).shape
(1, 2, 6, 6)
"""

from __future__ import annotations

import numbers

from hlotrace import functional as F
from hlotrace.errors import HlotraceError, argument_error, positive_int
from hlotrace.nn.module import Module
from hlotrace.nn_functional import interpolate

__all__ = ["PixelShuffle", "PixelUnshuffle", "Upsample"]


_MODES = ("nearest", "linear", "bilinear", "trilinear")


def _positive(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0


def _whole(value) -> bool:
    """A positive whole number (2 or 2.0: a factor or a size)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= 1 and float(value).is_integer()


class PixelShuffle(Module):
    """``(N, C·r², H, W) -> (N, C, H·r, W·r)`` (PyTorch's ``nn.PixelShuffle``)."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = positive_int("nn.PixelShuffle", "upscale_factor", upscale_factor)

    def forward(self, x):
        r = self.upscale_factor
        if x.ndim != 4 or x.shape[1] % (r * r):
            raise HlotraceError(f"PixelShuffle({r}) expects (N, C·{r * r}, H, W), got shape {x.shape}")
        n, c, h, w = x.shape
        y = F.reshape(x, (n, c // (r * r), r, r, h, w))
        return F.reshape(F.transpose(y, (0, 1, 4, 2, 5, 3)), (n, c // (r * r), h * r, w * r))

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(N, C, H·r, W·r) -> (N, C·r², H, W)``, the inverse of :class:`PixelShuffle`."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = positive_int("nn.PixelUnshuffle", "downscale_factor", downscale_factor)

    def forward(self, x):
        r = self.downscale_factor
        if x.ndim != 4 or x.shape[2] % r or x.shape[3] % r:
            raise HlotraceError(f"PixelUnshuffle({r}) expects (N, C, H·{r}, W·{r}), got shape {x.shape}")
        n, c, h, w = x.shape
        y = F.reshape(x, (n, c, h // r, r, w // r, r))
        return F.reshape(F.transpose(y, (0, 1, 3, 5, 2, 4)), (n, c * r * r, h // r, w // r))

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class Upsample(Module):
    """Upsampling of ``(N, C, *spatial)`` inputs (PyTorch's ``nn.Upsample``): ``mode``
    "nearest" (default), "linear", "bilinear" or "trilinear" (with ``align_corners``, PyTorch's
    coordinate formulas: :func:`hlotrace.nn_functional.interpolate`); ``size`` (an int or one
    per spatial dim) or ``scale_factor``. Nearest by whole factors is a ``repeat`` per dim;
    every other case takes the two (or one) source neighbours with ``take`` and mixes them.

    >>> up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    >>> up(ht.tensor(np.zeros((1, 3, 4, 5), np.float32))).shape
    (1, 3, 8, 10)
    """

    def __init__(
        self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None, recompute_scale_factor=None
    ):
        super().__init__()
        if mode not in _MODES:
            raise argument_error("nn.Upsample", "mode", mode, f"one of {', '.join(map(repr, _MODES))}")
        if (size is None) == (scale_factor is None):
            raise HlotraceError("nn.Upsample: give exactly one of size and scale_factor")
        if mode == "nearest" and align_corners is not None:
            raise argument_error("nn.Upsample", "align_corners", align_corners, "None with mode='nearest' (as PyTorch)")
        for argument, value in (("size", size), ("scale_factor", scale_factor)):
            entries = list(value) if isinstance(value, tuple | list) else [value]
            if value is not None and not (entries and all(_positive(e) for e in entries)):
                raise argument_error("nn.Upsample", argument, value, "a positive number or one per spatial dim")
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def _whole_factors(self, x) -> tuple[int, ...] | None:
        """The integer factor per spatial dim when nearest upsampling is a repeat, else None."""
        spatial = x.shape[2:]
        if self.scale_factor is not None:
            factors = (
                self.scale_factor if isinstance(self.scale_factor, tuple | list) else [self.scale_factor] * len(spatial)
            )
            if len(factors) != len(spatial) or not all(_whole(f) for f in factors):
                return None
            return tuple(int(f) for f in factors)
        size = self.size if isinstance(self.size, tuple | list) else [self.size] * len(spatial)
        if len(size) != len(spatial) or any(not d or s % d for s, d in zip(size, spatial, strict=True)):
            return None
        return tuple(s // d for s, d in zip(size, spatial, strict=True))

    def forward(self, x):
        if x.ndim < 3:
            raise HlotraceError(f"Upsample expects (N, C, *spatial), got shape {x.shape}")
        factors = self._whole_factors(x) if self.mode == "nearest" else None
        if factors is None:
            return interpolate(
                x, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor
            )
        for axis, factor in enumerate(factors, start=2):
            if factor != 1:
                x = F.repeat(x, factor, axis=axis)
        return x

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        corners = f", align_corners={self.align_corners}" if self.align_corners is not None else ""
        return f"{what}, mode={self.mode!r}{corners}"
