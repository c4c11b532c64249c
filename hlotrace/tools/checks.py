"""Checks the ``hlotrace`` commands make before they work, so that a bad value is one
``hlotrace: error:`` line at once: argparse integer types with a lower bound, output paths
that cannot be written, inputs too large for this machine's memory, traces of ops this
process has not registered."""

from __future__ import annotations

import os

import hlotrace
from hlotrace.ops.registry import OPS
from hlotrace.tools.common import CliError, random_input


def int_at_least(minimum: int):
    """An argparse ``type``: an int >= ``minimum`` (argparse names the option and the value)."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} is less than {minimum}")
        return value

    parse.__name__ = f"int >= {minimum}"
    return parse


def check_source_file(path: str) -> None:
    """CliError unless ``path`` (of a FILE.py:FUNC target) is an existing file."""
    if not os.path.exists(path):
        raise CliError(f"no such file: {path}")
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory, expected a Python file")


def finite_float(text: str) -> float:
    """An argparse ``type``: a float that is not NaN or infinite."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


finite_float.__name__ = "float"


def check_writable(path: str, what: str, directory: bool = False) -> None:
    """CliError now, before the work, when ``path`` (a file, or with ``directory`` a
    directory to create) cannot be written: its nearest existing ancestor must be a writable
    directory (and ``path`` itself, when it exists, of the right kind)."""
    target = os.path.abspath(path)
    if os.path.exists(target):
        if directory and not os.path.isdir(target):
            raise CliError(f"{what} {path}: not a directory")
        if not directory and os.path.isdir(target):
            raise CliError(f"{what} {path}: is a directory")
        return
    parent = os.path.dirname(target)
    while not os.path.exists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CliError(f"{what} {path}: cannot be created, {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise CliError(f"{what} {path}: cannot be created, {parent} is not writable")


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def check_fits(specs, names) -> None:
    """CliError, not a MemoryError later, when arrays of the ``(shape, dtype)`` ``specs``
    (called ``names`` in the message) would not fit in this machine's memory together.
    Random floats are drawn in float64 first: they need at least 8 bytes an element."""
    import math

    import numpy as np

    memory = _memory_bytes()
    total = 0
    for (shape, dtype), name in zip(specs, names, strict=True):
        count = math.prod(shape)
        total += count * max(np.dtype(dtype).itemsize, 8)
        if memory is not None and total > memory:
            raise CliError(
                f"{name}: {count:,} elements ({_size(count * np.dtype(dtype).itemsize)}) do not fit in this "
                f"machine's {_size(memory)} of memory"
            )


def random_inputs(specs, input_texts, seed: int) -> list:
    """Random Tensors of the parsed --input ``specs`` (their texts ``input_texts``, for the
    messages); CliError when they do not fit in memory."""
    import numpy as np

    check_fits(specs, [f"--input {text!r}" for text in input_texts])
    rng = np.random.default_rng(seed)
    tensors = []
    for (shape, dtype), text in zip(specs, input_texts, strict=True):
        try:
            tensors.append(hlotrace.tensor(random_input(shape, dtype, rng), dtype=dtype))
        except MemoryError:
            raise CliError(f"--input {text!r}: out of memory while making it") from None
    return tensors


def require_registered_ops(trace, path: str) -> None:
    """CliError when ``trace`` records ops this process has not registered (a user's ops,
    whose module --import loads)."""

    def ops_of(records):
        for record in records:
            yield record.op
            for value in record.attrs.values():
                regions = value if isinstance(value, tuple | list) else (value,)
                for region in regions:
                    if hasattr(region, "records") and hasattr(region, "params"):
                        yield from ops_of(region.records)

    unknown = sorted(set(ops_of(trace.records)) - set(OPS))
    if unknown:
        raise CliError(f"{path} uses op(s) not registered here: {', '.join(unknown)} (use --import MODULE)")
