"""One compiled input signature of an ``xla_trace`` function, and how it reads and writes state.

The executable's inputs are, in order: the argument leaves, the holders' state tensors
(:mod:`hlotrace.state`), the ``.grad`` of those state tensors that had one, and the late
inputs (implicit state, e.g. the default random generator's key, bound by the recording
when the function first read it). Its outputs are the function's results, then every
state tensor, gradient, late input and argument the step updated in place, in that
order; after a call each goes back into its Tensor object, whose old buffer was donated.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlotrace.tensor import Tensor
from hlotrace.trace import Trace


@dataclass
class StateIO:
    """How a compiled step reads and writes state (all positions index the output list)."""

    grad_inputs: tuple[int, ...] = ()  # state tensors whose .grad is an input (after the state)
    state_writes: tuple[tuple[int, int], ...] = ()  # (state index, output) updated in place
    grad_writes: tuple[tuple[int, int | None], ...] = ()  # (state index, output or None: grad unset)
    arg_writes: tuple[tuple[int, int], ...] = ()  # (argument leaf, output) updated in place
    late_writes: tuple[tuple[int, int], ...] = ()  # (late input index, output) updated in place


@dataclass
class CompiledEntry:
    """One input signature's trace, lowered module and executable."""

    trace: Trace
    lowered: object  # hlotrace.lowering.LoweredModule
    executable: object  # hlotrace.runtime.Executable
    rebuild: object
    num_results: int = -1  # outputs that are the function's results (the rest write state)
    io: StateIO | None = None
    late: tuple = ()  # implicit state tensors read by the step (inputs after the gradients)
    optimized: object = None  # ``lowered`` after the pass pipeline: what was compiled

    def __call__(self, leaves, state=()):
        exe = self.executable
        buffers = []
        for index, tensor in enumerate(leaves):
            buffer = tensor._device
            if buffer is None:
                buffer = tensor._device = exe.to_device(index, tensor._host)
            buffers.append(buffer)
        io = self.io
        if io is None:
            return self.rebuild([_from_device(b) for b in exe.run(buffers)])
        grads = [state[i].grad for i in io.grad_inputs]
        late = self.late
        for index, tensor in enumerate((*state, *grads, *late), start=len(buffers)):
            buffer = tensor._device
            if buffer is None:
                buffer = tensor._device = exe.to_device(index, tensor._host)
            buffers.append(buffer)
        for i, _ in io.state_writes:
            # A cached host copy may be a view of the device buffer (on CPU), which would keep
            # PJRT from donating it; it is stale after the call anyway.
            state[i]._host = None
        for i, _ in io.late_writes:
            late[i]._host = None
        outs = exe.run(buffers)
        # Write-back: the call succeeded, so every state tensor moves to its new buffer at once.
        for i, o in io.state_writes:
            tensor = state[i]
            tensor._device, tensor._host = outs[o], None
        for i, o in io.grad_writes:
            state[i].grad = None if o is None else _from_device(outs[o])
        for i, o in io.late_writes:
            tensor = late[i]
            tensor._device, tensor._host = outs[o], None
        for i, o in io.arg_writes:
            tensor = leaves[i]
            tensor._device, tensor._host = outs[o], None
        return self.rebuild([_from_device(b) for b in outs[: self.num_results]])


_from_device = Tensor._from_device


def state_outputs(recorder, proxies, state_tensors, grad_inputs, snapshot, outputs) -> StateIO:
    """Append to ``outputs`` every tensor the recorded step updated; say where each goes."""
    state_writes, grad_writes, late_writes, arg_writes = [], [], [], []
    for i, t in enumerate(state_tensors):
        if id(t) in recorder.assigned:
            state_writes.append((i, len(outputs)))
            outputs.append(t)
    for i, t in enumerate(state_tensors):
        before, after = snapshot.grad_before(i), t.grad
        if after is None:
            if before is not None:
                grad_writes.append((i, None))
        elif after is not before or id(after) in recorder.assigned:
            grad_writes.append((i, len(outputs)))
            outputs.append(after)
    for k, t in enumerate(recorder.late_inputs):
        if id(t) in recorder.assigned:
            late_writes.append((k, len(outputs)))
            outputs.append(t)
    for j, proxy in enumerate(proxies):
        if id(proxy) in recorder.assigned:
            arg_writes.append((j, len(outputs)))
            outputs.append(proxy)
    return StateIO(grad_inputs, tuple(state_writes), tuple(grad_writes), tuple(arg_writes), tuple(late_writes))


def donation(trace: Trace, num_leaves: int, state_tensors, io: StateIO) -> dict[int, int]:
    """Input position -> output position for every state buffer the step replaces."""
    donate = {num_leaves + i: o for i, o in io.state_writes}
    grad_position = {i: num_leaves + len(state_tensors) + k for k, i in enumerate(io.grad_inputs)}
    for i, o in io.grad_writes:
        if o is not None and i in grad_position:
            position = grad_position[i]
            if trace.aval(trace.inputs[position]) == trace.aval(trace.outputs[o]):
                donate[position] = o
    first_late = num_leaves + len(state_tensors) + len(io.grad_inputs)
    for k, o in io.late_writes:
        donate[first_late + k] = o
    return donate
