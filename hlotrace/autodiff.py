"""Reverse-mode autodiff over registered ops: a tape, ``grad``/``value_and_grad`` and a
MegEngine-style :class:`GradManager`, two front ends over one tape.

While a tape is active every op application whose inputs it tracks is appended to it. The
backward pass calls each op's VJP (``OpDef.vjp``, written beside the op in ``ops/``), and
those VJPs are ordinary op applications: eagerly they compute, inside ``xla_trace`` they
are recorded and lowered by the same rules as the forward pass, and under an outer tape
they are taped again, which gives gradients of gradients.

The VJP contract (one function per op, beside its OpDef)::

    def vjp(ct, out, *inputs, **attrs) -> tuple[Tensor | None, ...]

- ``ct`` is the cotangent of ``out`` (same shape and dtype as ``out``);
- ``inputs`` are the op's input Tensors as the op saw them (Python scalars already turned
  into tensors, dtypes not yet promoted), ``attrs`` its canonical attributes;
- return one cotangent per input, or None where it is zero. A cotangent may have the
  *broadcast* shape and the promoted dtype: the engine sums it over broadcast dims and casts
  it to the input's dtype (:func:`unbroadcast`), so VJPs never handle broadcasting or
  promotion themselves. Inputs that are not floating point get no gradient.
- It must use hlotrace.functional ops only (no NumPy on values), so it records.
- An op with several results (a control-flow op: its inference returned a tuple) gets
  ``ct`` and ``out`` as tuples, one entry per result; a result no cotangent reached gets
  zeros. Control-flow VJPs are control flow again (``hlotrace/ops/control_flow_grad.py``).

``OpDef.vjp = NOT_DIFFERENTIABLE`` marks ops whose outputs carry no gradient
(comparisons, logical ops); outputs of integer or bool dtype never carry one either.
``OpDef.vjp = ReverseModeRefused(what, why)`` tapes the op, and a cotangent reaching it is
an OpError naming where the op ran (``while_loop``).

A whole function can be one node too (``partial_trace``: :meth:`Tape.record_function`):
it is taped as an op of its own whose VJP calls the function's backward.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hlotrace import dtypes as dt
from hlotrace.errors import OpError, argument_error
from hlotrace.namespace import F
from hlotrace.ops.registry import NOT_DIFFERENTIABLE, OpDef, ReverseModeRefused
from hlotrace.recording import BACKWARD_DEPTH, TAPES, current_recorder
from hlotrace.source import SourceLocation
from hlotrace.tensor import Tensor, tensor, value_copy
from hlotrace.versions import structure_changed


@dataclass(frozen=True)
class _Node:
    op: OpDef
    attrs: dict
    inputs: tuple  # Tensors as the op saw them (kept alive: VJPs read them)
    in_keys: tuple  # tape key per input, None when the tape does not track it
    out: Tensor | tuple  # the output (a tuple of them for an op with several results)
    out_key: int | tuple  # its key (a tuple of keys for several results)
    location: SourceLocation | None


class Tape:
    """Records the op applications that depend on watched tensors.

    Tensors are tracked by *key*, not identity: an in-place update (``x += 1``) gives the
    same Tensor object a new key, so uses before and after the update stay distinct.
    """

    def __init__(self, owner=None):
        self.owner = owner  # the GradManager recording into it (``loss.backward()`` finds it), or None
        self.nodes: list[_Node] = []
        self._key_of: dict[int, int] = {}
        self._alive: list = []  # tensors whose id() is a key in _key_of
        self._keys = itertools.count()

    def watch(self, t: Tensor) -> int:
        """Start tracking ``t`` as a leaf; returns its key."""
        key = next(self._keys)
        self._key_of[id(t)] = key
        self._alive.append(t)
        return key

    def key(self, t: Tensor) -> int | None:
        return self._key_of.get(id(t))

    def record(self, op: OpDef, attrs: dict, inputs, out, location) -> None:
        """Tape one op application whose inputs this tape tracks; ``out`` is the output
        Tensor, or the tuple of them of an op with several results."""
        key_of = self._key_of
        in_keys = tuple(key_of.get(id(t)) for t in inputs)
        if not any(k is not None for k in in_keys):
            return
        if op.vjp is NOT_DIFFERENTIABLE:
            return
        if type(out) is tuple:
            out_key = tuple(self.watch(t) for t in out)
        elif dt.is_floating(out.dtype):
            out_key = self.watch(out)
        else:
            return
        self.nodes.append(_Node(op, attrs, tuple(inputs), in_keys, out, out_key, location))

    def record_function(self, name: str, inputs, outputs, vjp_fn: Callable, location=None) -> None:
        """Tape a whole function as one node (``partial_trace``): an op of several results
        whose VJP is ``vjp_fn(cotangents)``, one cotangent per output (zeros where none
        flows) in, one per input out."""

        def vjp(cts, out, *_inputs):  # the node's OpDef.vjp: the output cotangents, as a list, to vjp_fn
            return vjp_fn(list(cts))

        op = OpDef(name=name, family="function", reference=None, infer=None, vjp=vjp)
        self.record(op, {}, tuple(inputs), tuple(outputs), location)

    def assign(self, target: Tensor, value: Tensor) -> None:
        """``target`` now holds ``value`` (in-place update): it takes over value's key."""
        key = self._key_of.get(id(value))
        if key is None:
            self._key_of.pop(id(target), None)
        else:
            self._key_of[id(target)] = key
            self._alive.append(target)

    def __enter__(self) -> Tape:
        TAPES.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop recording (idempotent)."""
        if self in TAPES:
            TAPES.remove(self)

    def backward(self, outputs: Sequence[Tensor], cotangents: Sequence[Tensor], wrt: Sequence[int]) -> list:
        """Cotangents of the keys ``wrt`` (None where no path leads there).

        Runs with this tape (and any tape inside it) paused, so the VJPs' own ops are taped
        only by outer tapes: that is what makes gradients of gradients work.
        """
        position = TAPES.index(self) if self in TAPES else len(TAPES)
        paused = TAPES[position:]
        del TAPES[position:]
        BACKWARD_DEPTH[0] += 1
        try:
            cts: dict[int, Tensor] = {}
            for y, ct in zip(outputs, cotangents, strict=True):
                key = self.key(y)
                if key is not None:
                    _accumulate(cts, key, ct)
            needed = set(wrt)
            for node in reversed(self.nodes):
                grads = _node_cotangents(node, cts)
                if grads is None:
                    continue
                for key, x, g in zip(node.in_keys, node.inputs, grads, strict=True):
                    if key is not None and g is not None and dt.is_floating(x.dtype):
                        _accumulate(cts, key, unbroadcast(g, x, node))
            return [cts.get(k) if k in needed else None for k in wrt]
        finally:
            BACKWARD_DEPTH[0] -= 1
            TAPES[position:position] = paused


def _node_cotangents(node: _Node, cts: dict) -> tuple | None:
    """The cotangents of ``node``'s inputs, consuming its outputs' ones from ``cts``; None
    when no cotangent reached the node."""
    if type(node.out_key) is tuple:  # several results: zeros where no cotangent flows
        outs = [cts.pop(k, None) for k in node.out_key]
        if all(c is None for c in outs):
            return None
        ct = tuple(c if c is not None else F.zeros_like(o) for c, o in zip(outs, node.out, strict=True))
    else:
        ct = cts.pop(node.out_key, None)
        if ct is None:
            return None
    if isinstance(node.op.vjp, ReverseModeRefused):
        raise OpError(node.op.vjp.message(node.op.name, node.location))
    if node.op.vjp is None:
        where = f" at {node.location}" if node.location else ""
        raise OpError(
            f"{node.op.name}: no VJP is registered, so gradients cannot flow through it{where} "
            f"(add vjp= to its OpDef in hlotrace/ops/{node.op.family}.py)"
        )
    grads = node.op.vjp(ct, node.out, *node.inputs, **node.attrs)
    if len(grads) != len(node.inputs):
        raise AssertionError(
            f"internal error: the VJP of {node.op.name} returned {len(grads)} cotangents for {len(node.inputs)} inputs"
        )
    return grads


def distinct(grads, taken: set[int]) -> list:
    """``grads`` with each one a Tensor object of its own: one whose id is in ``taken`` (a
    tensor the caller holds, or a gradient already handed out) is replaced by a fresh object
    holding the same value. ``taken`` gains the ids handed out.

    A VJP may pass one cotangent object on unchanged (add's to both operands, or the ``dy``
    the user gave), so without this ``a.grad is b.grad`` or ``x.grad is dy``, and an in-place
    callback (``g *= 0.5``) or ``x.grad *= 2`` would change two tensors at once."""
    out = []
    for g in grads:
        if g is not None:
            if id(g) in taken:
                g = _fresh(g)
            taken.add(id(g))
        out.append(g)
    return out


def _fresh(g: Tensor) -> Tensor:
    """A new Tensor object with ``g``'s value: the same recorded value while recording and
    the same tape key under outer tapes (no op is recorded). Host arrays are read-only, so
    sharing one is a copy; a device buffer is not shared (a compiled step that donates one
    owner's buffer would delete the other's): the new tensor takes a copy (tensor.value_copy:
    on the device under the device engine, else the host value)."""
    out = object.__new__(Tensor)
    out._host, out._device = value_copy(g)
    out._origin, out._grad = g._origin, None
    recorder = current_recorder()
    if recorder is not None:
        recorder.alias(out, g)
    for tape in TAPES:
        tape.assign(out, g)
    return out


def _accumulate(cts: dict, key: int, g: Tensor) -> None:
    previous = cts.get(key)
    cts[key] = g if previous is None else previous + g


def unbroadcast(g: Tensor, x: Tensor, node: _Node | None = None) -> Tensor:
    """``g`` (of a broadcast shape) summed down to ``x``'s shape and cast to its dtype.

    A ``g`` whose shape ``x``'s does not broadcast to is a wrong VJP (a gradient in another
    layout of the same size would otherwise be reshaped silently): OpError naming the op."""
    if g.shape != x.shape:
        lead = g.ndim - x.ndim
        if lead < 0 or any(d != e and d != 1 for d, e in zip(x.shape, g.shape[lead:], strict=True)):
            what = "a function" if node is None or node.op is None else f"op {node.op.name}"
            where = f" (recorded at {node.location})" if node is not None and node.location is not None else ""
            raise OpError(
                f"the VJP of {what}{where} returned a gradient of shape {list(g.shape)} for an input of "
                f"shape {list(x.shape)}: it must be the input's shape or one it broadcasts to"
            )
        axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(x.shape) if d == 1 and g.shape[lead + i] != 1)
        if axes:
            g = F.sum(g, axis=axes, keepdims=True)
        if g.shape != x.shape:
            g = F.reshape(g, x.shape)
    if g.dtype != x.dtype:
        g = F.astype(g, x.dtype)
    return g


# -- functional front end ---------------------------------------------------------------


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """``fn``'s value and its gradient with respect to the arguments ``argnums``.

    ``fn`` must return a scalar floating-point Tensor (or ``(scalar, aux)`` with
    ``has_aux``). The gradient is one Tensor, or a tuple when ``argnums`` is a sequence;
    an argument the value does not depend on gets zeros.

    >>> value_and_grad(lambda x: (x * x).sum())(ht.tensor([1.0, 2.0]))
    (tensor(5.), tensor([2., 4.]))
    """
    positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def wrapped(*args, **kwargs):
        args = list(args)
        for i in positions:
            if i >= len(args):
                raise OpError(f"grad: argnums {i} is out of range for {len(args)} positional arguments")
            if not isinstance(args[i], Tensor):
                args[i] = tensor(args[i])
            if not dt.is_floating(args[i].dtype):
                raise OpError(
                    f"grad: argument {i} has dtype {args[i].dtype}; only floating-point arguments have gradients"
                )
        tape = Tape()
        with tape:
            keys = [tape.watch(args[i]) for i in positions]
            result = fn(*args, **kwargs)
        value, aux = result if has_aux else (result, None)
        if not isinstance(value, Tensor) or value.shape != () or not dt.is_floating(value.dtype):
            got = f"{value.dtype}{list(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
            raise OpError(f"grad: the function must return a scalar floating-point Tensor, got {got}")
        grads = tape.backward([value], [F.ones_like(value)], keys)
        grads = [g if g is not None else F.zeros_like(args[i]) for g, i in zip(grads, positions, strict=True)]
        grads = distinct(grads, {id(value), *(id(a) for a in args)})
        out = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((value, aux), out) if has_aux else (value, out)

    return wrapped


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued ``fn`` with respect to the arguments ``argnums``.

    >>> grad(lambda x: (x * x).sum())(ht.tensor([1.0, 2.0]))
    tensor([2., 4.])
    """
    vg = value_and_grad(fn, argnums, has_aux)

    def wrapped(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def vjp(fn: Callable, *primals: Tensor):
    """``(outputs, vjp_fn)``: ``vjp_fn(*cotangents)`` gives one cotangent per primal."""
    tape = Tape()
    with tape:
        keys = [tape.watch(p) for p in primals]
        out = fn(*primals)
    outs = out if isinstance(out, tuple | list) else (out,)

    def vjp_fn(*cts):
        grads = tape.backward(list(outs), list(cts), keys)
        grads = [g if g is not None else F.zeros_like(p) for g, p in zip(grads, primals, strict=True)]
        return tuple(distinct(grads, {id(t) for t in (*outs, *cts, *primals)}))

    return out, vjp_fn


# -- GradManager ------------------------------------------------------------------------


class GradManager:
    """MegEngine-style gradient manager.

    >>> gm = GradManager().attach(net.parameters())
    >>> with gm:
    ...     loss = F.mse_loss(net(x), y)
    ...     gm.backward(loss)          # param.grad += d loss / d param
    >>> opt.step().clear_grad()

    ``attach(params, callbacks=[fn])``: each callback maps ``(param, grad) -> grad`` before
    the gradient is accumulated into ``param.grad`` (clipping, scaling); callbacks are
    ordinary tensor code, so they are recorded inside a compiled step. Gradients accumulate
    across backward calls until the optimizer's ``clear_grad()``.
    """

    def __init__(self):
        self._attached: list[Tensor] = []
        self._callbacks: dict[int, list] = {}
        self._tape: Tape | None = None
        self._keys: list[int] = []

    def attach(self, params, callbacks=None) -> GradManager:
        if isinstance(params, Tensor):
            params = [params]
        if isinstance(params, str | dict) or not hasattr(params, "__iter__"):
            wanted = "a Tensor or an iterable of Tensors (e.g. net.parameters())"
            raise argument_error("GradManager.attach", "params", params, wanted)
        if callable(callbacks):
            callbacks = [callbacks]
        for p in params:
            if not isinstance(p, Tensor):
                raise OpError(f"GradManager.attach: expected Tensors, got {type(p).__name__}")
            if not dt.is_floating(p.dtype):
                raise OpError(f"GradManager.attach: a {p.dtype} tensor cannot have gradients")
            if id(p) not in self._callbacks:
                self._attached.append(p)
                self._callbacks[id(p)] = []
            self._callbacks[id(p)].extend(callbacks or ())
        structure_changed()  # a compiled step re-collects the attached tensors
        return self

    def attached_tensors(self) -> list[Tensor]:
        return list(self._attached)

    def _trace_state(self) -> tuple[tuple, list[Tensor]]:
        """For ``xla_trace`` (see hlotrace.state): the attached tensors are step inputs; the
        callbacks are part of the static key (another callback records another program)."""
        callbacks = tuple(tuple(self._callbacks[id(p)]) for p in self._attached)
        return (len(self._attached), callbacks), list(self._attached)

    def __enter__(self) -> GradManager:
        self.record()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def record(self) -> None:
        """Start recording (what ``with gm:`` does on entry)."""
        if self._tape is not None:
            raise OpError("GradManager is already recording")
        self._tape = Tape(owner=self)
        self._keys = [self._tape.watch(p) for p in self._attached]
        TAPES.append(self._tape)

    @property
    def recording(self) -> bool:
        """Whether ``with gm:`` (or :meth:`record`) is active and not yet ended by backward."""
        return self._tape is not None

    def release(self) -> None:
        """Stop recording and drop the tape (idempotent)."""
        if self._tape is not None:
            self._tape.stop()
            self._tape = None

    def backward(self, y: Tensor | Sequence[Tensor], dy=None) -> None:
        """Accumulate d(y·dy)/d(param) into every attached ``param.grad``; ends the recording.

        ``dy`` defaults to ones (``y`` is then usually a scalar loss).
        """
        if self._tape is None:
            raise OpError("GradManager.backward() outside `with gm:` (nothing was recorded)")
        ys = list(y) if isinstance(y, list | tuple) else [y]
        if dy is None:
            dys = [F.ones_like(t) for t in ys]
        else:
            dys = list(dy) if isinstance(dy, list | tuple) else [dy]
            dys = [d if isinstance(d, Tensor) else tensor(d, dtype=t.dtype) for d, t in zip(dys, ys, strict=True)]
        tape = self._tape
        tape.stop()
        try:
            grads = tape.backward(ys, dys, self._keys)
            # Every .grad its own object, never one the caller holds (y, dy, a parameter, an
            # existing .grad), so in-place callbacks and updates touch one gradient only.
            taken = {id(t) for t in (*ys, *dys, *self._attached)}
            taken.update(id(p._grad) for p in self._attached if p._grad is not None)
            grads = distinct(grads, taken)
            for p, g in zip(self._attached, grads, strict=True):
                if g is None:
                    continue
                given = g
                for callback in self._callbacks[id(p)]:
                    g = callback(p, g)
                if g is not given:
                    (g,) = distinct([g], taken)
                if p._grad is None:
                    p.grad = g
                else:  # accumulated into the same object, as PyTorch and MegEngine do
                    p._grad._assign(p._grad + g)
        finally:
            self._tape = None
