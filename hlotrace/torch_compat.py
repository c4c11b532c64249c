"""PyTorch's spellings that hlotrace's Tensor methods and functional take besides their own:
``x.device`` values, ``dim=``/``keepdim=`` for ``axis=``/``keepdims=`` (one decorator), the
``(values, indices)`` pair ``x.max(dim=d)`` returns, and ``loss.backward()`` (through the
one GradManager recording)."""

from __future__ import annotations

import functools
from typing import NamedTuple

from hlotrace.errors import HlotraceError
from hlotrace.namespace import F
from hlotrace.recording import TAPES
from hlotrace.source import user_location

# DLPack's device types (dlpack.h) by the names PyTorch gives them.
DLPACK_DEVICE_TYPES = {1: "cpu", 2: "cuda", 3: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", 13: "cuda"}
_DEVICE_TYPES = frozenset({"cpu", "cuda", "gpu", "rocm", "tpu", "mps", "xla", "meta"})


class Device(str):
    """``x.device``: ``"cpu:0"``, ``"cuda:0"``, ... with PyTorch's ``.type`` and ``.index``."""

    __slots__ = ()

    @property
    def type(self) -> str:
        return self.partition(":")[0]

    @property
    def index(self) -> int:
        return int(self.partition(":")[2] or 0)


def is_device(value) -> bool:
    """A device as ``Tensor.to`` takes one: a Device, ``"cuda"``/``"cpu:0"``, a ``torch.device``."""
    if isinstance(value, str):
        return value.partition(":")[0].lower() in _DEVICE_TYPES
    return type(value).__name__ == "device" and isinstance(getattr(value, "type", None), str)


class ValuesIndices(NamedTuple):
    """``x.max(dim=d)`` / ``x.min(dim=d)``: PyTorch's pair (``torch.return_types.max``)."""

    values: object
    indices: object


_TORCH_KEYWORDS = (("dim", "axis"), ("keepdim", "keepdims"))


def dim_alias(fn=None, *, indices: str | None = None):
    """Let ``fn(..., axis=, keepdims=)`` also take PyTorch's ``dim=`` and ``keepdim=`` (the one
    place that maps them; giving both spellings of one is a TypeError). ``indices``: the name
    of the ``F`` function (``"argmax"``) whose result joins the values when ``dim=`` is given,
    as PyTorch's ``x.max(dim=d)`` returns ``(values, indices)``."""
    if fn is None:
        return functools.partial(dim_alias, indices=indices)

    @functools.wraps(fn)
    def with_dim(*args, **kwargs):
        torch_call = "dim" in kwargs
        for torch_name, name in _TORCH_KEYWORDS:
            if torch_name in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}: give {name}= or {torch_name}= (PyTorch's name), not both")
                kwargs[name] = kwargs.pop(torch_name)
        values = fn(*args, **kwargs)
        if indices is None or not torch_call:
            return values
        keepdims = kwargs.get("keepdims", False)
        return ValuesIndices(values, getattr(F, indices)(args[0], axis=kwargs["axis"], keepdims=keepdims))

    return with_dim


# Tapes set aside by ``torch.no_grad()`` blocks (hlotrace.torch), outermost block first.
PAUSED_TAPES: list[list] = []


def recording_grad_managers() -> list:
    """The GradManagers whose recording (``with gm:``) is active, paused by ``no_grad`` or
    not, outermost first (each owns one tape; ``grad``/``value_and_grad`` tapes have none)."""
    tapes = [tape for paused in PAUSED_TAPES for tape in paused] + TAPES
    return [tape.owner for tape in tapes if getattr(tape, "owner", None) is not None and tape.owner.recording]


_HOW = (
    "attach the parameters with a GradManager and record the forward pass in it: "
    "gm = GradManager().attach(net.parameters()) (from hlotrace.autodiff import GradManager), then "
    "`with gm: loss = loss_fn(net(x), y); loss.backward()` (which is gm.backward(loss))"
)


def backward(loss, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """PyTorch's ``loss.backward(gradient=None)``: ``gm.backward(loss, gradient)`` of the one
    GradManager now recording (``.grad`` of its attached tensors accumulates, the recording
    ends). No GradManager recording, or several, is an HlotraceError saying how to attach one.
    ``retain_graph`` is accepted (a GradManager's recording ends at backward either way);
    ``create_graph=True`` and ``inputs=`` are refused (use ``hlotrace.autodiff.grad``)."""
    where = f" (at {loc})" if (loc := user_location(2)) else ""
    if create_graph or inputs is not None:
        raise HlotraceError(
            "Tensor.backward: create_graph=True and inputs= are not offered; hlotrace.autodiff.grad "
            "(and grad of grad) computes such gradients" + where
        )
    managers = recording_grad_managers()
    if len(managers) != 1:
        state = "no GradManager is recording" if not managers else f"{len(managers)} GradManagers are recording"
        raise HlotraceError(
            f"Tensor.backward(): {state}, so which parameters get gradients is unknown. In hlotrace, "
            f"{_HOW}" + ("; with several, call gm.backward(loss) on the one you mean" if managers else "") + where
        )
    if gradient is None and loss.ndim != 0 and loss.size != 1:
        raise HlotraceError(
            f"Tensor.backward(): a gradient can be implied for a one-element loss only (as PyTorch), got shape "
            f"{loss.shape}: pass gradient= of that shape" + where
        )
    managers[0].backward(loss, gradient)
