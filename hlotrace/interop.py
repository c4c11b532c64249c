"""DLPack: hand hlotrace tensors to NumPy, jax or PyTorch and take theirs, without copies
where the device and layout allow.

- ``np.from_dlpack(t)``, ``jax.dlpack.from_dlpack(t)``, ``torch.from_dlpack(t)``: a Tensor
  exports its device buffer when it has one (a compiled result), else its host array. Host
  arrays are read-only (hlotrace never changes a value in place), and DLPack before 1.0
  cannot say "read-only": a consumer asking for the old protocol gets a copy.
- ``ht.from_dlpack(obj)``: a producer in host memory becomes a host Tensor viewing that
  memory (zero-copy: change the producer's array afterwards and the Tensor changes too; call
  ``ht.tensor(np.array(obj))`` for an independent copy); a device buffer on the platform
  hlotrace runs on becomes a device Tensor viewing it; a buffer on another device is copied
  to the host. Dtypes hlotrace does not support (uint8, complex) are converted (a copy), as
  ``ht.tensor`` does.
"""

from __future__ import annotations

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.errors import HlotraceError
from hlotrace.tensor import HOOKS, Tensor

KDL_CPU = 1  # DLPack's device type of host memory


def dlpack_device(t: Tensor) -> tuple[int, int]:
    if t._device is not None:
        return t._device.__dlpack_device__()
    return (KDL_CPU, 0)


def to_dlpack(t: Tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """The capsule behind ``Tensor.__dlpack__`` (the array API's keyword arguments)."""
    if t._device is not None:
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs.update(max_version=max_version, dl_device=dl_device, copy=copy)
        return t._device.__dlpack__(**kwargs)
    array = t.numpy()
    kwargs = {} if max_version is None else {"max_version": max_version, "dl_device": dl_device, "copy": copy}
    try:
        return array.__dlpack__(**kwargs)
    except BufferError:
        if copy is False:
            raise
        # A pre-1.0 consumer cannot be told the host array is read-only: it gets a copy.
        return np.array(array).__dlpack__(**kwargs)


def from_dlpack(obj) -> Tensor:
    """A Tensor of any DLPack producer (NumPy, jax, PyTorch, CuPy, ...).

    >>> t = ht.from_dlpack(np.arange(3.0))         # views NumPy's memory
    >>> ht.from_dlpack(torch.ones(2, device="cuda"))  # a device Tensor when hlotrace runs on CUDA
    """
    if isinstance(obj, Tensor):
        return obj
    if not hasattr(obj, "__dlpack__"):
        raise HlotraceError(f"from_dlpack: a {type(obj).__name__} is not a DLPack producer (no __dlpack__)")
    device_type, _ = obj.__dlpack_device__()
    if device_type == KDL_CPU:
        return Tensor._from_array(np.from_dlpack(obj))
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax
    from hlotrace import runtime  # lazy: loads runtime (7 modules)

    buffer = jaxlib_compat.array_from_dlpack(obj)
    if (
        jaxlib_compat.buffer_platform(buffer) != runtime.platform_name()
        or dt.canonicalize(buffer.dtype) != buffer.dtype
    ):
        # Another device than hlotrace's, or a dtype it converts: through the host.
        return Tensor._from_array(np.asarray(buffer))
    return Tensor._from_device(buffer)


HOOKS.to_dlpack, HOOKS.dlpack_device = (
    to_dlpack,
    dlpack_device,
)  # Tensor calls it through this slot (hlotrace.tensor.HOOKS)
