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

import operator

import numpy as np

from hlotrace.ops.generator import (  # noqa: F401  (key_from_seed, resolve: their home before)
    Generator,
    default_generator,
    dropout,
    key_from_seed,
    normal,
    permutation,
    randint,
    resolve,
    uniform,
)
from hlotrace.ops.random import random_split
from hlotrace.recording import refusing_draws  # noqa: F401  (its home before)
from hlotrace.tensor import Tensor

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
