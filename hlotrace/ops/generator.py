"""Random number generators with explicit, counter-based state (Threefry-2x32 keys), and the
draws users make with them (``uniform``, ``normal``, ``randint``, ``permutation``,
``dropout``; their ops are in :mod:`hlotrace.ops.random`). See :mod:`hlotrace.random` for
how a key behaves in compiled steps.

A :class:`Generator` holds one key: an ``int32[2]`` tensor. Each draw applies a random op to
the key and then replaces the key, in place, by ``random_split(key)``, so a seed determines
the whole sequence of draws, eager or compiled.
"""

from __future__ import annotations

import operator

import numpy as np

from hlotrace import dtypes as dt
from hlotrace.dispatch import apply
from hlotrace.errors import OpError, TraceError
from hlotrace.ops.common import F
from hlotrace.ops.random import random_split
from hlotrace.ops.registry import OPS
from hlotrace.recording import current_recorder, draws_refused, register_implicit
from hlotrace.tensor import Tensor, tensor

FAMILY = "random"  # the draws of the random family's ops (hlotrace.functional exposes __all__)

__all__ = ["dropout", "normal", "permutation", "randint", "uniform"]


def key_from_seed(seed) -> np.ndarray:
    """The int32[2] key of an integer seed: its high and low 32 bits (as JAX's PRNGKey)."""
    if isinstance(seed, bool | np.bool_):
        raise OpError(f"a seed must be an int, got {seed!r}")
    try:
        seed = operator.index(seed)
    except TypeError:
        raise OpError(f"a seed must be an int, got {type(seed).__name__} {seed!r}") from None
    if not -(2**63) <= seed < 2**64:
        raise OpError(f"a seed must fit in 64 bits, got {seed}")
    seed %= 2**64
    return np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32).view(np.int32)


class Generator:
    """A source of random numbers: one Threefry key (``int32[2]``) updated in place.

    >>> g = ht.random.Generator(42)
    >>> ht.random.normal((2, 3), generator=g).shape
    (2, 3)
    """

    def __init__(self, seed=0):
        # tensor() makes the key a constant of an active recording, so a Generator created
        # inside a traced function starts from its seed on every call.
        self._key = tensor(key_from_seed(seed), dtype="int32")
        register_implicit(self._key)

    @property
    def key(self) -> Tensor:
        """The live key tensor (the same object for the generator's lifetime)."""
        return self._key

    def seed(self, seed) -> Generator:
        """Restart the sequence from ``seed``; returns self."""
        self._key._assign(tensor(key_from_seed(seed), dtype="int32"))
        return self

    manual_seed = seed

    def get_state(self) -> Tensor:
        """A copy of the key (int32[2]): give it to :meth:`set_state` to replay from here."""
        return _copy(self._key)

    def set_state(self, new_state) -> Generator:
        """Continue from a state returned by :meth:`get_state` (a Tensor or array-like)."""
        value = new_state if isinstance(new_state, Tensor) else tensor(np.asarray(new_state))
        if value.shape != (2,) or value.dtype != np.int32:
            raise OpError(
                f"a generator state is an int32[2] tensor (from get_state()), got {value.dtype}{list(value.shape)}"
            )
        self._key._assign(_copy(value))
        return self

    def draw(self, op, **attrs) -> Tensor:
        """``op(key, **attrs)`` with the current key, which then advances in place."""
        reason = draws_refused()
        if reason is not None:
            raise TraceError(f"{op.name}: drawing random numbers is not supported {reason}")
        out = apply(op, self._key, **attrs)
        self._key._assign(random_split(self._key))
        return out

    def _trace_state(self) -> tuple[tuple, list[Tensor]]:
        """State of a compiled step (see :mod:`hlotrace.state`): the key, no static part."""
        return (), [self._key]

    def __repr__(self) -> str:
        return f"Generator(key={self._key.numpy().view(np.uint32).tolist()})"


def _copy(key: Tensor) -> Tensor:
    """A new tensor holding ``key``'s value (recorded as an op while recording)."""
    if current_recorder() is None:
        return Tensor._from_array(np.array(key.numpy()), checked=True)
    return F.add(key, 0)


default_generator = Generator(0)


def resolve(generator) -> Generator:
    """``generator``, or the default generator for None."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise OpError(f"generator= must be an hlotrace.random.Generator or None, got {type(generator).__name__}")
    return generator


# -- public functions ---------------------------------------------------------------------


def _draw(name, generator, **attrs):
    return resolve(generator).draw(OPS[name], **attrs)


def uniform(shape, low=0.0, high=1.0, dtype="float32", generator=None):
    """Samples from U[low, high) of ``shape`` and float ``dtype``, drawn from ``generator``
    (default: :data:`hlotrace.random.default_generator`), whose key advances in place."""
    return _draw("random_uniform", generator, shape=shape, dtype=dtype, low=low, high=high)


def normal(shape, mean=0.0, std=1.0, dtype="float32", generator=None):
    """Samples from N(mean, std**2) (Box–Muller) of ``shape`` and float ``dtype``."""
    return _draw("random_normal", generator, shape=shape, dtype=dtype, mean=mean, std=std)


def randint(low, high, shape, dtype="int32", generator=None):
    """Integers uniform in ``[low, high)`` of ``shape``; int32 or int64."""
    return _draw("random_randint", generator, shape=shape, low=low, high=high, dtype=dtype)


def permutation(n, generator=None, dtype="int32"):
    """A random permutation of ``range(n)`` (int32, or int64)."""
    return _draw("random_permutation", generator, n=n, dtype=dtype)


def dropout(x, p=0.5, training=True, generator=None):
    """Zero each element of ``x`` with probability ``p`` and scale the rest by
    ``1 / (1 - p)`` (PyTorch's ``F.dropout``); ``x`` unchanged when ``training`` is False
    or ``p`` is 0, zeros when ``p`` is 1 (no numbers drawn in those cases)."""
    x = F._as_tensor(x)
    if not dt.is_number(p) or not 0 <= (p := dt.as_python_number(p)) <= 1:  # NumPy, ml_dtypes scalars too
        raise F._composite_error("dropout", f"p must be a probability in [0, 1], got {p!r}", x)
    if x.dtype not in dt.FLOATING:
        raise F._composite_error("dropout", f"needs a float tensor, got {x.dtype}", x)
    if not training or p == 0:
        return x
    if p == 1:
        return F.zeros_like(x)
    keep = F.greater_equal(uniform(x.shape, generator=generator), float(p))
    return F.where(keep, F.multiply(x, 1.0 / (1.0 - p)), 0.0)
