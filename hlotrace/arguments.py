"""Flattening a traced function's arguments and rebuilding its results.

``flatten`` is on the per-call hot path of ``xla_trace``: it turns the arguments (nested
tuples/lists/dicts of Tensors, state holders and hashable static values) into the tensor
leaves, the holders, and a key of their structure, shapes, dtypes and static values.
"""

from __future__ import annotations

import operator

import numpy as np

from hlotrace.errors import TraceError
from hlotrace.tensor import Tensor


def flatten(obj, leaves: list, key: list, holders: list) -> None:
    kind = type(obj)
    if kind is Tensor:
        leaves.append(obj)
        key.append(obj.shape)
        key.append(obj.dtype)
    elif kind is tuple or kind is list:
        key.append((kind, len(obj)))
        for item in obj:
            flatten(item, leaves, key, holders)
    elif kind is dict:
        names = sorted(obj)
        key.append((dict, tuple(names)))
        for name in names:
            flatten(obj[name], leaves, key, holders)
    elif hasattr(kind, "_trace_state"):
        # A Module / Optimizer / GradManager: its tensors are state (see hlotrace.state).
        holders.append(obj)
        key.append((kind, id(obj)))
    elif isinstance(obj, Tensor):
        leaves.append(obj)
        key.append(obj.shape)
        key.append(obj.dtype)
    elif kind is np.ndarray:
        raise ArrayArgument
    else:
        try:
            hash(obj)
        except TypeError:
            raise TraceError(
                f"argument of type {kind.__name__} is neither a Tensor (or a tuple/list/dict of them) "
                f"nor a hashable static value; wrap arrays with hlotrace.tensor()"
            ) from None
        key.append((kind, obj))


class ArrayArgument(Exception):
    """A NumPy array among the arguments: wrap them as Tensors and flatten again."""


def wrap_arrays(obj):
    """Replace NumPy arrays in the argument structure by Tensors (once, on entry)."""
    kind = type(obj)
    if kind is np.ndarray:
        return Tensor._from_array(obj)
    if kind is tuple or kind is list:
        return kind(wrap_arrays(item) for item in obj)
    if kind is dict:
        return {name: wrap_arrays(value) for name, value in obj.items()}
    return obj


def output_structure(obj, leaves: list):
    """Flatten outputs: returns a template in which Tensors are replaced by their index."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return _OutputSlot(len(leaves) - 1)
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind(output_structure(item, leaves) for item in obj)
    if kind is dict:
        return {name: output_structure(value, leaves) for name, value in obj.items()}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TraceError(
        f"a traced function may return Tensors, tuples/lists/dicts of them and plain Python "
        f"constants; got {type(obj).__name__}"
    )


class _OutputSlot:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def is_single_result(template) -> bool:
    """Whether the function returned one Tensor, bare (its results are then ``outs[0]``)."""
    return isinstance(template, _OutputSlot)


def make_rebuild(template):
    """A function list_of_tensors -> the function's return structure."""
    if isinstance(template, _OutputSlot):
        return operator.itemgetter(template.index)
    kind = type(template)
    if kind is tuple or kind is list:
        parts = [make_rebuild(item) for item in template]
        return lambda outs: kind(part(outs) for part in parts)
    if kind is dict:
        parts = {name: make_rebuild(value) for name, value in template.items()}
        return lambda outs: {name: part(outs) for name, part in parts.items()}
    return lambda outs: template
