"""``partial_trace``: a function compiled forward and backward, joined into eager autodiff
as one tape node (MegEngine's ``partial_trace``). See :func:`partial_trace`."""

from __future__ import annotations

import functools

from hlotrace import dtypes as dt
from hlotrace import functional as F
from hlotrace import state
from hlotrace.arguments import flatten, output_structure, wrap_arrays
from hlotrace.errors import argument_error
from hlotrace.passes.selection import check_precision
from hlotrace.recording import RECORDER, TAPES, refusing_draws
from hlotrace.source import user_location
from hlotrace.traced import TracedFunction

# partial_trace's backward recomputes the forward, which would draw other random numbers
# (another dropout mask) than the forward did: refused rather than silently wrong.
_RECOMPUTED_DRAWS = (
    "in a partial_trace function under autodiff: its compiled backward recomputes the forward, "
    "which would draw different numbers (another dropout mask). Draw outside it and pass the "
    "result in, or compile the whole step with xla_trace"
)


class PartialTracedFunction:
    """A function compiled forward and backward, joined into eager autodiff; see :func:`partial_trace`."""

    def __init__(
        self,
        fn,
        *,
        platform: str | None = None,
        passes: str | None = None,
        explain_recompiles: bool | None = None,
        first_call: str | None = None,
        tiered_compile: bool | None = None,
        precision: str | None = None,
    ):
        self.fn = fn
        options = {
            "platform": platform,
            "passes": passes,
            "explain_recompiles": explain_recompiles,
            "first_call": first_call,
            "tiered_compile": tiered_compile,
            "precision": check_precision("partial_trace", precision),
        }
        self.forward = TracedFunction(fn, **options)
        self.backward = TracedFunction(self._backward_program, **options)
        self.backward.__name__ = f"{getattr(fn, '__name__', 'traced')}_backward"
        # The backward reads what the forward closes over (its parameters get gradients).
        self.backward._closure = self.forward._closure
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if RECORDER.get() is not None:
            return self.fn(*args, **kwargs)  # inside a recording: inline, like xla_trace
        if not TAPES:
            return self.forward(*args, **kwargs)
        args, kwargs = wrap_arrays(args), wrap_arrays(kwargs)
        tapes = TAPES[:]
        TAPES.clear()  # the forward's own ops are not taped: the function is one node
        try:
            with refusing_draws(_RECOMPUTED_DRAWS):
                result = self.forward(*args, **kwargs)
        finally:
            TAPES[:] = tapes
        outputs: list = []
        output_structure(result, outputs)
        inputs = _differentiable_inputs(args, kwargs, self.forward)

        def vjp(cotangents):
            return self.backward(args, kwargs, cotangents)

        name = getattr(self.fn, "__name__", "partial_trace")
        location = user_location(2)
        for tape in tapes:
            tape.record_function(name, inputs, outputs, vjp, location)
        return result

    def _backward_program(self, args, kwargs, cotangents):
        """Gradients of every input (argument tensors, then the holders' state tensors) for
        the given output cotangents. Recomputes the forward: only inputs cross the boundary."""
        from hlotrace.autodiff import Tape  # lazy: import hlotrace does not load autodiff (~3 ms)

        inputs = _differentiable_inputs(args, kwargs, self.forward)
        tape = Tape()
        with tape, refusing_draws(_RECOMPUTED_DRAWS):
            keys = [tape.watch(t) for t in inputs]
            result = self.fn(*args, **kwargs)
        outputs: list = []
        output_structure(result, outputs)
        grads = tape.backward(outputs, list(cotangents), keys)
        return [
            g if g is not None else (F.zeros_like(t) if dt.is_floating(t.dtype) else None)
            for g, t in zip(grads, inputs, strict=True)
        ]

    @property
    def cache_size(self) -> int:
        return self.forward.cache_size


def _differentiable_inputs(args, kwargs, forward: TracedFunction) -> list:
    """Argument tensors then holders' state, each Tensor once (as one tape input); the
    holders the function closes over count as arguments (hlotrace.captures.closed_over), so
    a closed-over module's parameters get their gradients through the compiled backward."""
    leaves: list = []
    holders: list = []
    flatten((args, kwargs), leaves, [], holders)
    if forward._closure is not None:
        holders.extend(forward._closure.holders())
    return state.distinct_inputs(leaves, state.collect(holders)[1] if holders else ())[0]


def partial_trace(
    fn=None,
    *,
    platform: str | None = None,
    passes: str | None = None,
    explain_recompiles: bool | None = None,
    first_call: str | None = None,
    tiered_compile: bool | None = None,
    precision: str | None = None,
):
    """Decorator: compile ``fn``'s forward, and its backward as a second executable, both
    joined into eager autodiff (MegEngine's ``partial_trace``).

    >>> @partial_trace
    ... def backbone(model, x):
    ...     return model(x)
    >>> with gm:
    ...     loss = F.cross_entropy(head(backbone(model, x)), y)   # backbone runs compiled
    ...     gm.backward(loss)                                      # and so does its backward

    Without an active GradManager/grad it is ``xla_trace``. Under autodiff the function is
    one node of the tape: its backward executable takes the same inputs plus the output
    cotangents and recomputes the forward (nothing but the inputs is kept between the two).
    A new input signature records and compiles both again. Gradients of gradients do not
    flow through it (the backward is a compiled call, not recorded ops). Under autodiff the
    function may not draw random numbers (TraceError): the backward's recomputation would
    draw others than the forward did. ``passes``, ``first_call``, ``tiered_compile``,
    ``precision``: as for both executables of :func:`xla_trace`.
    """
    if fn is not None and not callable(fn):
        raise argument_error("partial_trace", "fn", fn, "a function or a module to compile (or options only)")
    options = {
        "platform": platform,
        "passes": passes,
        "explain_recompiles": explain_recompiles,
        "first_call": first_call,
        "tiered_compile": tiered_compile,
        "precision": check_precision("partial_trace", precision),
    }
    if fn is None:
        return functools.partial(partial_trace, **options)
    return PartialTracedFunction(fn, **options)
