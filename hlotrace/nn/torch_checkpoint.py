"""PyTorch checkpoints: ``load_torch_state_dict`` and ``torch_state_dict``.

hlotrace's modules keep PyTorch's parameter and buffer names and layouts (``Linear.weight`` is
``(out, in)``, ``Conv2d.weight`` ``(out, in, kh, kw)``, ``ConvTranspose2d.weight`` ``(in, out,
kh, kw)``, ``MultiheadAttention.in_proj_weight`` ``(3 * d, d)``, ``Embedding.weight`` ``(n,
d)``, BatchNorm's ``running_mean``/``running_var`` and its int64 ``num_batches_tracked``), and
``state_dict()`` lists them in PyTorch's order, so a PyTorch state dict of the same architecture
maps key for key, BatchNorm's batch counters included. Two things differ, and the loader
handles them:

- Tied parameters (GPT's ``lm_head.weight`` is ``transformer.wte.weight``): PyTorch's
  ``state_dict()`` lists the tensor under both names, hlotrace's under the first. Every name
  is accepted; the values given under the names of one tensor must be equal.
- PyTorch copies with a cast (``param.copy_(value)``): a float16 or float64 checkpoint loads
  into float32 parameters. Here too (floats to floats; integers must match exactly).

>>> import hlotrace.nn as nn
>>> nn.load_torch_state_dict(model, "resnet18.safetensors")  # safetensors.torch.save_file(...)
IncompatibleKeys(missing_keys=[], unexpected_keys=[])
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from hlotrace.errors import HlotraceError, argument_error
from hlotrace.nn.module import _BUFFER, _PARAM, IncompatibleKeys, Module
from hlotrace.serialization import load_safetensors
from hlotrace.tensor import Tensor

__all__ = ["load_torch_state_dict", "torch_state_dict"]


def _all_names(module: Module) -> dict[str, Tensor]:
    """Every PyTorch state_dict name of ``module``'s parameters and persistent buffers in
    PyTorch's order, tied tensors under each of their names (``state_dict()`` lists each
    tensor once)."""
    names: dict[str, Tensor] = {}
    for prefix, m in module.named_modules():
        transient = m.__dict__.get("_non_persistent", ())
        for kind in (_PARAM, _BUFFER):
            for name, value in m._direct(kind):
                if kind == _PARAM or name not in transient:
                    names.setdefault(f"{prefix}.{name}" if prefix else name, value)
    return names


def torch_state_dict(module: Module) -> dict[str, np.ndarray]:
    """``module``'s state as PyTorch's ``state_dict()`` of the same model has it: its keys in
    its order, every name of a tied parameter (BatchNorm's ``num_batches_tracked`` is an int64
    buffer here as there). Save it with ``ht.serialization.save_safetensors`` for PyTorch."""
    return {name: np.array(t.numpy(), copy=True) for name, t in _all_names(module).items()}


def _as_array(value, key: str) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.numpy()
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch.Tensor, where torch is installed
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise HlotraceError(f"load_torch_state_dict: {key!r} is a {type(value).__name__}, not an array")
    return array


def load_torch_state_dict(module: Module, path_or_dict, strict: bool = True) -> IncompatibleKeys:
    """Load a PyTorch state dict of the same architecture into ``module``, in place.

    ``path_or_dict``: a ``.safetensors`` file (``safetensors.torch.save_file(model.state_dict(),
    path)``) or a mapping of names to arrays (NumPy, hlotrace or torch tensors). Keys are
    PyTorch's (BatchNorm's ``num_batches_tracked`` included: it loads into the counter, and
    is 0 where an old checkpoint lacks it); tied parameters may appear under each of their
    names (see the module docstring). Shapes must match; float values are
    cast to the parameter's dtype. With ``strict`` (the default) a missing or unexpected key is
    an error naming it and nothing is loaded; otherwise they are returned, as PyTorch's
    ``load_state_dict`` does.
    """
    if not isinstance(module, Module):
        raise argument_error("load_torch_state_dict", "module", module, "an hlotrace nn.Module")
    if isinstance(path_or_dict, str | os.PathLike):
        state = load_safetensors(path_or_dict)
    elif isinstance(path_or_dict, Mapping):
        state = path_or_dict
    else:
        raise argument_error(
            "load_torch_state_dict", "path_or_dict", path_or_dict, "a .safetensors path or a dict of arrays"
        )
    names = _all_names(module)
    state = module._with_defaults(state, names)
    canonical = {id(t): name for name, t in module._persistent_state()}
    loaded: dict[str, np.ndarray] = {}
    given_as: dict[str, str] = {}
    unexpected = []
    for key, value in state.items():
        target = names.get(key)
        if target is None:
            unexpected.append(key)
            continue
        array = _as_array(value, key)
        if tuple(array.shape) != tuple(target.shape):
            raise HlotraceError(
                f"load_torch_state_dict: {key!r} has shape {tuple(array.shape)} in the checkpoint but "
                f"{tuple(target.shape)} in the {type(module).__name__}"
            )
        if array.dtype != target.dtype:
            if array.dtype.kind == "f" and np.dtype(target.dtype).kind == "f":
                array = array.astype(target.dtype)
            else:
                raise HlotraceError(
                    f"load_torch_state_dict: {key!r} has dtype {array.dtype} in the checkpoint but "
                    f"{target.dtype} in the {type(module).__name__} (only float values are cast)"
                )
        name = canonical[id(target)]
        if name in loaded and not np.array_equal(loaded[name], array):
            raise HlotraceError(
                f"load_torch_state_dict: {key!r} and {given_as[name]!r} are one tied tensor in the "
                f"{type(module).__name__} but have different values in the checkpoint"
            )
        loaded[name], given_as[name] = array, key
    missing = [name for name in canonical.values() if name not in loaded]
    if strict and (missing or unexpected):
        parts = [f"missing keys {missing}"] if missing else []
        parts += [f"unexpected keys {unexpected}"] if unexpected else []
        raise HlotraceError(f"load_torch_state_dict({type(module).__name__}): " + " and ".join(parts))
    module.load_state_dict(loaded, strict=False)
    return IncompatibleKeys(missing, unexpected)
