"""Replicated values proven equal across processes, and copied from one process on request.

XLA assumes that an input laid out replicated holds the same value on every device. When a
mesh spans processes each process supplies its own copy, so a model initialized from
another seed in one process trains silently differently there. Before the first call of a
compiled step over such a mesh (and again whenever its inputs are other objects or
placed otherwise), every input that every process holds whole -- parameters, buffers,
optimizer state, ``.grad``s, plain arguments, and the default random generator's key
once a step reads it -- is fingerprinted (a SHA-1 of its host bytes) and the fingerprints
are exchanged through the coordination service's key-value store. A difference is a
:class:`ReplicaMismatch` raised on every process, naming each tensor and the processes
that differ. ``dist.make_global`` checks replicated data the same way, on every call.

``HLOTRACE_DIST_CHECK=off`` skips both checks (see README.md, "Several processes").

>>> dist.broadcast_from(0, [net, opt])   # process 0's values everywhere, before the first step
"""

from __future__ import annotations

import base64
import hashlib
import weakref

import numpy as np

import hlotrace.distributed.process as process
import hlotrace.runtime.jaxlib_dist as jaxlib_dist
from hlotrace import config
from hlotrace.distributed.placement import sharding_of
from hlotrace.errors import HlotraceError
from hlotrace.random import default_generator
from hlotrace.recording import current_recorder
from hlotrace.tensor import AbstractValue, Tensor
from hlotrace.versions import VERSIONS

CHECK_ENV = "HLOTRACE_DIST_CHECK"
SHOWN = 12  # differing tensors listed in an error (then a count of the rest)
CHUNK = 1 << 20  # characters per key-value entry when broadcasting (base64 text)
FIX = (
    "To fix it, give every process the same values before the first step: call ht.random.seed(n) with the "
    "same n in every process before building the model and the optimizer, or copy process 0's values into "
    "every process once they are built: dist.broadcast_from(0, [net, opt]). ({env}=off skips this check.)"
)
ARGUMENT_HINT = (
    "An argument that is not placed on the mesh is replicated: a batch each process holds its own part of goes "
    'in through dist.make_global(part, mesh, dist.P("data")).'
)
GLOBAL_FIX = (
    "A value replicated on a mesh that spans processes is given whole by every process, so every process must "
    "pass the same data (draw it from a generator seeded the same everywhere), or split it on a mesh axis that "
    'spans the processes (dist.P("data")) so that each gives its own part. ({env}=off skips this check.)'
)


class ReplicaMismatch(HlotraceError):
    """Values that must be the same on every process differ between processes."""


def enabled() -> bool:
    return config.get(CHECK_ENV)


# -- which tensors every process holds whole --------------------------------------------------

_SPANNING: dict = {}  # mesh -> the names of its axes along which the owning process changes


def _spanning_axes(mesh) -> frozenset:
    found = _SPANNING.get(mesh)
    if found is None:
        owners = np.array([jaxlib_dist.process_index_of(d) for d in mesh.devices]).reshape(mesh.shape)
        found = frozenset(name for k, name in enumerate(mesh.axis_names) if np.any(np.diff(owners, axis=k) != 0))
        _SPANNING[mesh] = found
    return found


def whole_in_every_process(sharding, ndim: int) -> bool:
    """Whether a tensor placed as ``sharding`` (None: replicated) is held whole by every
    process: it is split over no mesh axis along which the process changes."""
    if sharding is None:
        return True
    found = _WHOLE.get((sharding, ndim))
    if found is None:
        axes = {a for dim in sharding.dims(ndim) for a in dim}
        found = _WHOLE[(sharding, ndim)] = not axes & _spanning_axes(sharding.mesh)
    return found


_WHOLE: dict = {}  # (placement, rank) -> whole_in_every_process


def local_value(tensor: Tensor) -> np.ndarray | None:
    """This process's whole copy of ``tensor`` on the host (None: no value, a recording's
    placeholder)."""
    from hlotrace.distributed.global_data import local_part  # cycle: distributed.global_data imports this module

    host = tensor._host
    if host is not None:
        return None if isinstance(host, AbstractValue) else np.asarray(host)
    buffer = tensor._device
    if buffer is None:
        return None
    if jaxlib_dist.is_fully_addressable(buffer):
        return np.asarray(buffer)
    if jaxlib_dist.is_fully_replicated(buffer):
        return jaxlib_dist.local_replica(buffer)
    return local_part(tensor)


def fingerprint(array: np.ndarray | None) -> str:
    """dtype, shape and a SHA-1 of the bytes (bit-exact: -0.0 and NaN payloads count)."""
    if array is None:
        return "-"
    array = np.ascontiguousarray(array)
    digest = hashlib.sha1(array.reshape(-1).view(np.uint8), usedforsecurity=False).hexdigest()[:24]
    return f"{array.dtype.str}{list(array.shape)}:{digest}"


# -- names ------------------------------------------------------------------------------------


def tensor_names(holders) -> dict[int, str]:
    """id(tensor) -> a name a user recognizes (``MLP.fc1.weight``, ``AdamW state 'exp_avg'
    of MLP.fc1.weight``) for every tensor the holders own."""
    names: dict[int, str] = {}
    for holder in holders:
        if hasattr(holder, "named_parameters") and hasattr(holder, "named_buffers"):
            root = type(holder).__name__
            for name, t in (*holder.named_parameters(), *holder.named_buffers()):
                names.setdefault(id(t), f"{root}.{name}")
    for holder in holders:
        kind = type(holder).__name__
        per_param = getattr(holder, "state", None)
        if isinstance(per_param, dict) and hasattr(holder, "param_groups"):
            for p, tensors in per_param.items():
                owner = names.get(id(p), f"a {p.dtype}{list(p.shape)} parameter")
                for state_name, t in tensors.items() if isinstance(tensors, dict) else ():
                    names.setdefault(id(t), f"{kind} state {state_name!r} of {owner}")
            for g, hyper in enumerate(getattr(holder, "_hyper", ())):
                for hyper_name, t in hyper.items():
                    names.setdefault(id(t), f"{kind} {hyper_name} (param group {g})")
        key = getattr(holder, "key", None)
        if isinstance(key, Tensor):
            names.setdefault(id(key), f"{kind} key")
    return names


def _default_key() -> Tensor:
    return default_generator.key


# -- exchanging fingerprints ------------------------------------------------------------------

_CHECKS = [0]  # checks so far: the same sequence on every process (they run the same program)


def exchange(what: str, lines: list[str]) -> list[list[str]]:
    """Every process's ``lines`` (this one's included), in process order. A collective:
    every process calls it at the same point of the program."""
    state = process._STATE
    _CHECKS[0] += 1
    prefix = f"hlotrace/replicas/{_CHECKS[0]}/"
    jaxlib_dist.kv_set(state.client, f"{prefix}{state.process_id}", "\n".join(lines))
    tables = []
    for other in range(state.num_processes):
        if other == state.process_id:
            tables.append(list(lines))
            continue
        try:
            text = jaxlib_dist.kv_get(state.client, f"{prefix}{other}", state.timeout_s)
        except TimeoutError:
            raise HlotraceError(
                f"process {other} did not reach replica check #{_CHECKS[0]} ({what}) within {state.timeout_s} s "
                f"({process.TIMEOUT_ENV}): every process must run the same compiled steps in the same order, "
                f"with the same {CHECK_ENV} setting"
            ) from None
        tables.append(text.split("\n") if text else [])
    return tables


def _who_differs(column: list[str]) -> str:
    groups: dict[str, list[int]] = {}
    for p, value in enumerate(column):
        groups.setdefault(value, []).append(p)
    others = [ps for value, ps in groups.items() if value != column[0]]
    parts = []
    for ps in others:
        who = f"process {ps[0]}" if len(ps) == 1 else "processes " + ", ".join(map(str, ps))
        parts.append(who)
    verb = "differs" if len(others) == 1 and len(others[0]) == 1 else "differ"
    return f"{' and '.join(parts)} {verb} from process 0"


def compare(what: str, names: list[str], tables: list[list[str]], fix: str) -> None:
    """Raise :class:`ReplicaMismatch` (on every process: each has every table) when the
    processes' fingerprints differ anywhere."""
    if len({len(t) for t in tables}) > 1:
        counts = ", ".join(f"process {p}: {len(t)}" for p, t in enumerate(tables))
        raise ReplicaMismatch(
            f"{what}: the processes hold different numbers of replicated tensors ({counts}); every process must "
            f"call the same compiled step with the same model and optimizer"
        )
    lines = []
    for i, name in enumerate(names):
        column = [t[i] for t in tables]
        if any(value != column[0] for value in column):
            lines.append(f"  {name}: {_who_differs(column)}")
            if name.startswith("input ") and ARGUMENT_HINT not in fix:
                fix = f"{ARGUMENT_HINT} {fix}".rstrip()
    if lines:
        shown = lines[:SHOWN] + ([f"  ... and {len(lines) - SHOWN} more"] if len(lines) > SHOWN else [])
        raise ReplicaMismatch(
            f"{what}: {len(lines)} of {len(names)} replicated tensors differ between processes (XLA assumes a "
            f"replicated input holds the same value on every process; they would go on computing different "
            f"results without any error):\n" + "\n".join(shown) + "\n" + fix.format(env=CHECK_ENV)
        )


def check(what: str, named: list[tuple[str, Tensor | np.ndarray]], fix: str = FIX) -> None:
    """Fingerprint every ``(name, tensor or host array)`` and compare across processes (a
    collective)."""
    fingerprints = [fingerprint(t if isinstance(t, np.ndarray) else local_value(t)) for _, t in named]
    compare(what, [name for name, _ in named], exchange(what, fingerprints), fix)


# -- the compiled step's inputs (called by distributed.compile) ------------------------------

_VERIFIED: dict[int, tuple] = {}  # id(memo) -> (what was proven equal, weak references to the inputs)
_KEY: dict = {"stash": None, "read": False}  # the default generator's key: its value before a recording


def check_step(inputs, own, grads, holders, mesh, memo) -> None:
    """Before a call over ``mesh`` of ``inputs`` placed as ``own`` (their ``.grad``s as
    ``grads``; None: replicated): when the mesh spans processes and these objects in these
    placements were not proven equal yet (for the traced function ``memo`` belongs to)."""
    if not process.spans_processes(mesh.devices) or not enabled():
        return
    key = _default_key()
    _KEY["stash"] = key._host if key._host is not None else key._device
    whole = [t for t, s in zip(inputs, own, strict=True) if whole_in_every_process(s, t.ndim)]
    # Proven for these objects (not those split over the processes: a new batch on every
    # call), these placements and this structure (another signature after train/eval, new
    # optimizer state). A replicated argument that is a new object on every call is checked
    # on every call, as make_global's replicated data is.
    seen = (mesh, tuple(own), tuple(grads), tuple(map(id, whole)))
    structure = VERSIONS.structure
    slot = 0 if memo is None else id(memo)
    last = _VERIFIED.get(slot)  # (seen, weak references to ``whole``, structure or None)
    if last is not None and last[0] == seen and all(r() is t for r, t in zip(last[1], whole, strict=True)):
        if last[2] == structure:
            return
        if last[2] is None:
            # The call after a check: the structure the checked call's own recording left
            # (optimizer state created, .grads set and cleared) is the proven one.
            _VERIFIED[slot] = (seen, last[1], structure)
            return
    names = tensor_names(holders)
    named = []
    for i, (t, s, g) in enumerate(zip(inputs, own, grads, strict=True)):
        name = names.get(id(t)) or f"input {i} ({t.dtype}{list(t.shape)})"
        if whole_in_every_process(s, t.ndim):
            named.append((name, t))
        if t._grad is not None and whole_in_every_process(g, t._grad.ndim):
            named.append((f".grad of {name}", t._grad))
    if _KEY["read"] and all(t is not key for t in inputs):
        named.append(("the default random generator's key (ht.random)", key))
    check("the compiled step's replicated inputs", named)
    _VERIFIED[slot] = (seen, [weakref.ref(t) for t in whole], None)


def check_late_key(mesh) -> None:
    """After recording a step over ``mesh``: when the step read the default random
    generator's key (a late input, replicated), prove its value before the call equal."""
    if not process.spans_processes(mesh.devices) or not enabled():
        return
    key = _default_key()
    value, _KEY["stash"] = _KEY["stash"], None
    if not isinstance(key._host, AbstractValue) or value is None:
        return  # not read by this recording (a recording from shapes leaves a placeholder)
    _KEY["read"] = True
    before = Tensor._from_array(value, checked=True) if isinstance(value, np.ndarray) else Tensor._from_device(value)
    try:
        mine = fingerprint(local_value(before))
    except Exception:  # a value from a call that did not record: since donated to a step
        mine = "-"
    what = "the compiled step's random key"
    compare(what, ["the default random generator's key (ht.random)"], exchange(what, [mine]), FIX)


# -- broadcast_from ---------------------------------------------------------------------------


def _gather_tensors(obj, out: list, names: dict) -> None:
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, list | tuple):
        for item in obj:
            _gather_tensors(item, out, names)
    elif hasattr(type(obj), "_trace_state"):  # a Module, Optimizer, GradManager, Generator
        names.update({k: v for k, v in tensor_names([obj]).items() if k not in names})
        out.extend(obj._trace_state()[1])
    else:
        raise HlotraceError(
            f"dist.broadcast_from copies Modules, Optimizers, Tensors or lists of them, got {type(obj).__name__}"
        )


def broadcast_from(src: int, obj):
    """Copy process ``src``'s values of ``obj`` (a Module, an Optimizer, a Tensor, or a list
    of them) into every process's replicated state, in place (placements are kept). A
    collective: every process calls it with the same structure. Only tensors that differ
    somewhere travel, through the coordination service. Returns ``obj``.

    >>> net = MLP(); opt = optim.AdamW(net.parameters())
    >>> dist.broadcast_from(0, [net, opt])
    """
    if current_recorder() is not None:
        raise HlotraceError("dist.broadcast_from cannot run inside a recorded function; call it before the step")
    n, me = process.process_count(), process.process_index()
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < n:
        raise HlotraceError(f"dist.broadcast_from: src must be a process index in [0, {n}), got {src!r}")
    tensors: list = []
    names: dict = {}
    _gather_tensors(obj, tensors, names)
    unique = list({id(t): t for t in tensors}.values())
    whole = [t for t in unique if whole_in_every_process(sharding_of(t), t.ndim)]
    if n == 1 or not process.is_initialized() or not whole:
        return obj
    values = [local_value(t) for t in whole]
    tables = exchange("dist.broadcast_from", [fingerprint(v) for v in values])
    theirs = tables[src]
    if len({len(t) for t in tables}) > 1:
        named = [names.get(id(t), f"{t.dtype}{list(t.shape)}") for t in whole]
        compare("dist.broadcast_from", named, tables, "")
    prefix = f"hlotrace/broadcast/{_CHECKS[0]}/"
    state = process._STATE
    moving = [i for i in range(len(whole)) if any(t[i] != theirs[i] for t in tables)]
    if me == src:
        for i in moving:
            data = base64.b64encode(np.ascontiguousarray(values[i]).tobytes()).decode("ascii")
            chunks = [data[k : k + CHUNK] for k in range(0, len(data), CHUNK)] or [""]
            jaxlib_dist.kv_set(state.client, f"{prefix}{i}/n", str(len(chunks)))
            for k, chunk in enumerate(chunks):
                jaxlib_dist.kv_set(state.client, f"{prefix}{i}/{k}", chunk)
        return obj
    for i in moving:
        if tables[me][i] == theirs[i]:
            continue
        t = whole[i]
        try:
            count = int(jaxlib_dist.kv_get(state.client, f"{prefix}{i}/n", state.timeout_s))
            text = "".join(jaxlib_dist.kv_get(state.client, f"{prefix}{i}/{k}", state.timeout_s) for k in range(count))
        except TimeoutError:
            raise HlotraceError(
                f"dist.broadcast_from: process {src} did not send {names.get(id(t), 'a tensor')} within "
                f"{state.timeout_s} s ({process.TIMEOUT_ENV})"
            ) from None
        array = np.frombuffer(base64.b64decode(text), dtype=t.dtype).reshape(t.shape).copy()
        t._assign(Tensor._from_array(array, checked=True))
    return obj
