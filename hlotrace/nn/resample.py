"""Resampling modules: ``PixelShuffle``, ``PixelUnshuffle``, ``Upsample`` (nearest, integer
factors), composites of reshape, transpose and repeat.

>>> from hlotrace import nn
>>> nn.PixelShuffle(2)(ht.tensor(np.zeros((1, 8, 3, 3), np.float32))).shape
(1, 2, 6, 6)
"""

from __future__ import annotations

import numbers

from hlotrace import functional as F
from hlotrace.errors import HlotraceError, argument_error, positive_int
from hlotrace.nn.module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle", "Upsample"]


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
    """Nearest-neighbour upsampling of ``(N, C, *spatial)`` inputs by integer factors
    (PyTorch's ``nn.Upsample(mode="nearest")``): ``scale_factor`` (an int or one per spatial
    dim) or ``size`` (a multiple of the input's spatial size). Other modes are refused."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest"):
        super().__init__()
        if mode != "nearest":
            raise argument_error("nn.Upsample", "mode", mode, "'nearest' (the only mode supported)")
        if (size is None) == (scale_factor is None):
            raise HlotraceError("nn.Upsample: give exactly one of size and scale_factor")
        for argument, value in (("size", size), ("scale_factor", scale_factor)):
            entries = list(value) if isinstance(value, tuple | list) else [value]
            if value is not None and not (entries and all(_whole(e) for e in entries)):
                raise argument_error("nn.Upsample", argument, value, "a positive int or one per spatial dim")
        self.size, self.scale_factor, self.mode = size, scale_factor, mode

    def _factors(self, x) -> tuple[int, ...]:
        spatial = x.shape[2:]
        if self.scale_factor is not None:
            factors = (
                self.scale_factor if isinstance(self.scale_factor, tuple | list) else [self.scale_factor] * len(spatial)
            )
            if len(factors) != len(spatial) or any(float(f) != int(f) or int(f) < 1 for f in factors):
                raise HlotraceError(
                    f"Upsample: scale_factor {self.scale_factor!r} must be positive ints, one per spatial dim of {x.shape}"
                )
            return tuple(int(f) for f in factors)
        size = self.size if isinstance(self.size, tuple | list) else [self.size] * len(spatial)
        if len(size) != len(spatial) or any(s % d for s, d in zip(size, spatial, strict=True) if d):
            raise HlotraceError(
                f"Upsample: size {self.size!r} must be a multiple of the input's spatial size {spatial}"
            )
        return tuple(s // d if d else 1 for s, d in zip(size, spatial, strict=True))

    def forward(self, x):
        if x.ndim < 3:
            raise HlotraceError(f"Upsample expects (N, C, *spatial), got shape {x.shape}")
        for axis, factor in enumerate(self._factors(x), start=2):
            if factor != 1:
                x = F.repeat(x, factor, axis=axis)
        return x

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"
