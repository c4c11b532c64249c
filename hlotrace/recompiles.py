"""Why did it compile? A readable description of a call's input signature, and the warning
that names what changed when a traced function compiles again.

Enabled by ``HLOTRACE_EXPLAIN_RECOMPILES=1`` or ``xla_trace(explain_recompiles=True)``:
every compile after a function's first logs one warning through the ``logging`` logger
``"hlotrace"``, e.g.::

    hlotrace: step compiles again (signature 2) at train.py:41 (in <module>):
      args[0]: f32[32,8] -> f32[16,8]

It names the function, the user's call site and what differs from the nearest signature
compiled before (argument paths with the old and new shape/dtype/static value, a holder's
structural key or tensors, the aliasing of arguments, the pass pipeline).
"""

from __future__ import annotations

import logging

from hlotrace import config
from hlotrace.dtypes import short_name
from hlotrace.tensor import Tensor

ENV = "HLOTRACE_EXPLAIN_RECOMPILES"
LOGGER = logging.getLogger("hlotrace")
MAX_LINES = 8  # differences shown per warning


def enabled(option: bool | None) -> bool:
    if option is not None:
        return option
    return config.get(ENV)


def _aval(t: Tensor) -> str:
    return f"{short_name(t.dtype)}[{','.join(map(str, t.shape))}]"


def describe(pipeline: str, args, kwargs, held, slots) -> dict[str, str]:
    """``{path: description}`` of everything that selects a compiled program."""
    out: dict[str, str] = {"pass pipeline": repr(pipeline)}
    leaf_paths: list[str] = []
    holder_paths: list[str] = []

    def walk(obj, path: str) -> None:
        kind = type(obj)
        if isinstance(obj, Tensor):
            leaf_paths.append(path)
            grad = "" if obj.grad is None else f" with .grad {_aval(obj.grad)}"
            out[path] = _aval(obj) + grad
        elif kind is tuple or kind is list:
            out[path] = f"{kind.__name__} of {len(obj)}"
            for i, item in enumerate(obj):
                walk(item, f"{path}[{i}]")
        elif kind is dict:
            out[path] = f"dict with keys {sorted(obj)}"
            for name in sorted(obj):
                walk(obj[name], f"{path}[{name!r}]")
        elif hasattr(kind, "_trace_state"):
            holder_paths.append(path)
            out[path] = kind.__name__
        else:
            out[path] = f"static value {obj!r}"

    for i, arg in enumerate(args):
        walk(arg, f"args[{i}]")
    for name in sorted(kwargs):
        walk(kwargs[name], name)
    if held is not None:
        for path, (name, static, owned) in zip(holder_paths, held.static, strict=False):
            parts = getattr(static, "parts", None)  # a module tree's key: flags, then settings
            if parts is None:
                out[f"{path} structure"] = f"{name} {static!r}"
            else:
                for part, text in parts().items():
                    out[f"{path} {part}"] = f"{name} {text}" if part == "structure" else text
            tensors = [held.tensors[k] for k in owned]
            grads = sum(t.grad is not None for t in tensors)
            elements = sum(t.size for t in tensors)
            out[f"{path} state"] = f"{len(tensors)} tensors of {elements} elements, .grad set on {grads}"
    out["aliasing"] = _aliasing(leaf_paths, holder_paths, held, slots)
    return out


def _aliasing(leaf_paths, holder_paths, held, slots) -> str:
    if slots is None:
        return "every argument tensor distinct"
    first: dict[int, str] = {}
    same = []
    for path, slot in zip(leaf_paths, slots, strict=False):
        if slot in first:
            same.append(f"{path} is {first[slot]}")
        else:
            first[slot] = path
    if held is not None:
        for path, (_, _, owned) in zip(holder_paths, held.static, strict=False):
            for k in owned:
                slot = slots[len(leaf_paths) + k]
                if slot in first:
                    same.append(f"{first[slot]} is held by {path}")
    return "; ".join(dict.fromkeys(same)) or "every argument tensor distinct"


def differences(old: dict[str, str], new: dict[str, str]) -> list[str]:
    lines = []
    for path in dict.fromkeys([*old, *new]):
        before, after = old.get(path, "absent"), new.get(path, "absent")
        if before != after:
            lines.append(f"{path}: {before} -> {after}")
    return lines


def explain(name: str, location, new: dict[str, str], earlier: list[dict[str, str]]) -> None:
    """Log why ``name`` compiles again: the differences from the nearest earlier signature."""
    where = f" at {location}" if location else ""
    if not earlier:
        return
    nearest = min((differences(old, new) for old in earlier), key=len)
    if not nearest:
        nearest = ["no difference in the described signature (a cache entry was evicted or state was re-derived)"]
    shown = nearest[:MAX_LINES]
    if len(nearest) > MAX_LINES:
        shown.append(f"... and {len(nearest) - MAX_LINES} more")
    LOGGER.warning(
        "hlotrace: %s compiles again (signature %d)%s:\n  %s", name, len(earlier) + 1, where, "\n  ".join(shown)
    )
