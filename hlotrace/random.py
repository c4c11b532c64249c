"""Random number generators with explicit, counter-based state (Threefry-2x32 keys).

A :class:`Generator` holds one key: an ``int32[2]`` tensor. Each draw applies a random op
(:mod:`hlotrace.ops.random`) to the key and then replaces the key, in place, by
``random_split(key)``, so a seed determines the whole sequence of draws, eager or compiled::

    >>> import hlotrace as ht
    >>> ht.random.seed(0)
    >>> a = ht.random.uniform((3,))
    >>> ht.random.seed(0)
    >>> np.array_equal(ht.random.uniform((3,)).numpy(), a.numpy())
    True

Compiled steps (``xla_trace``): the key is device state like a parameter. A Generator
passed as an argument is a state holder (``_trace_state``); one that is not (the default
generator, or any other the function reaches by itself) is bound by the recording the
first time its key is read, as a late input: the step then takes the current key on every
call and writes the advanced key back (donating the old buffer). A mask or key is never
baked into the compiled program as a constant, and a compiled step draws the numbers the
eager function would have drawn, call after call.
"""

from __future__ import annotations

import contextlib
import contextvars
import operator

import numpy as np

from hlotrace import state
from hlotrace.errors import OpError, TraceError
from hlotrace.ops.random import dropout, normal, permutation, randint, random_split, uniform
from hlotrace.ops.registry import apply
from hlotrace.tensor import Tensor, tensor

__all__ = [
    "Generator",
    "default_generator",
    "dropout",
    "get_state",
    "host_generator",
    "normal",
    "permutation",
    "randint",
    "random_split",
    "seed",
    "set_state",
    "uniform",
]

# Why drawing random numbers is refused right now (see :func:`refusing_draws`), or None.
_REFUSED: contextvars.ContextVar[str | None] = contextvars.ContextVar("hlotrace_random_refused", default=None)


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
        state.register_implicit(self._key)

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
        reason = _REFUSED.get()
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
    from hlotrace import functional as F
    from hlotrace.ops.registry import current_recorder

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


# The host generator parameter initialization draws from (hlotrace.nn.init): seeded with
# the default generator, so one ``seed(n)`` fixes every random value, as torch.manual_seed
# and MegEngine's random.seed do. Both start from seed 0 (a fresh process is reproducible,
# and processes that build a model alike hold equal replicas, seeded or not).
_host_rng = np.random.default_rng(0)


def seed(n) -> None:
    """Seed everything random in hlotrace (``ht.random.seed(0)``): the default generator's
    Threefry key (dropout, ``ht.random.*`` draws, eager and compiled alike) and the host
    generator parameter initialization draws from (:func:`host_generator`)."""
    global _host_rng
    default_generator.seed(n)
    _host_rng = np.random.default_rng(operator.index(n) % 2**64)


def host_generator() -> np.random.Generator:
    """The NumPy generator that parameter initialization (``hlotrace.nn.init``) draws from;
    reseeded by :func:`seed`."""
    return _host_rng


def get_state() -> Tensor:
    """A copy of the default generator's key."""
    return default_generator.get_state()


def set_state(new_state) -> None:
    """Restore the default generator's key from :func:`get_state`."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def refusing_draws(reason: str):
    """Within this block every draw raises TraceError ``... not supported {reason}``."""
    token = _REFUSED.set(reason)
    try:
        yield
    finally:
        _REFUSED.reset(token)
