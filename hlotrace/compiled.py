"""One compiled input signature of an ``xla_trace`` function, and how it reads and writes state.

The executable's inputs are, in order: the distinct tensors the step reaches through its
arguments (the argument leaves, then the holders' state tensors that are not also arguments,
the holders the function closes over counted after the arguments' own, see
:func:`hlotrace.captures.closed_over`; :func:`hlotrace.state.distinct_inputs`), the ``.grad`` of those that had one, and the late
inputs (implicit state, e.g. the default random generator's key, bound by the recording
when the function first read it). Its outputs are the function's results, then every
input, gradient and late input the step updated, in that order; after a call each goes
back into its Tensor object. The old buffers of the holders' state, of gradients and of
late inputs are donated.
"""

from __future__ import annotations

import collections
import itertools
import os
from dataclasses import dataclass, field
from operator import is_

from hlotrace.arguments import output_structure
from hlotrace.tensor import from_device_buffer
from hlotrace.trace import Trace
from hlotrace.versions import VERSIONS


@dataclass
class StateIO:
    """How a compiled step reads and writes state (outputs index the output list)."""

    grad_inputs: tuple[int, ...] = ()  # inputs whose .grad is an executable input (after the inputs)
    writes: tuple[tuple[int, int], ...] = ()  # (input, output): updated in place
    donated: tuple[int, ...] = ()  # inputs among ``writes`` whose old buffer the executable consumes
    grad_writes: tuple[tuple[int, int | None], ...] = ()  # (input, output or None: grad unset)
    late_writes: tuple[tuple[int, int], ...] = ()  # (late input index, output) updated in place
    # Inputs whose .grad object the step accumulated into (a second backward): the new value
    # goes into that same object, as eagerly; any other written .grad is a new object.
    grad_kept: frozenset[int] = frozenset()


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
    single: bool = False  # the function returns one Tensor (no tuple/list/dict around it)
    # A stateless entry's whole call after its buffers are gathered: ``run_buffers(device
    # buffers) -> the function's result``, execute and Tensor wrapping in one closure
    # (``xla_trace``'s hot path calls it directly). None for a step that writes state.
    run_buffers: object = field(default=None, repr=False)
    # After a tiered first call (hlotrace.runtime.tiered): the optimized executable being
    # compiled in the background; the next call waits for it and runs it from then on.
    upgrade: object = field(default=None, repr=False)

    def __post_init__(self):
        self._bind()

    def settle(self) -> None:
        """Switch to the optimized executable of a tiered first call (waiting for its
        compile); nothing when there is none (or XLA failed it: the quick one stays)."""
        upgrade, self.upgrade = self.upgrade, None
        if upgrade is not None:
            optimized = upgrade.result()
            if optimized is not None:
                self.executable = optimized
                self._bind()

    def _bind(self):
        io = self.io
        if io is None:
            if self.single:
                self.run_buffers = self.executable.wrapping_runner(_from_device, single=True)
            else:
                run, rebuild = self.executable.wrapping_runner(_from_device), self.rebuild

                def run_buffers(buffers):
                    return rebuild(run(buffers))

                self.run_buffers = run_buffers

    def __call__(self, inputs):
        if self.upgrade is not None:
            self.settle()
        exe = self.executable
        buffers = [t._device for t in inputs]
        if any(map(is_, buffers, _NONES)):
            for index, buffer in enumerate(buffers):
                if buffer is None:  # a host value: copied to the device once, and kept there
                    tensor = inputs[index]
                    buffers[index] = tensor._device = exe.to_device(index, tensor._host)
        io = self.io
        if io is None:
            return self.run_buffers(buffers)
        late = self.late
        if io.grad_inputs or late:
            grads = [inputs[i].grad for i in io.grad_inputs]
            for index, tensor in enumerate((*grads, *late), start=len(buffers)):
                buffer = tensor._device
                if buffer is None:
                    buffer = tensor._device = exe.to_device(index, tensor._host)
                buffers.append(buffer)
        for i in io.donated:
            # A cached host copy may be a view of the device buffer (on CPU), which would keep
            # PJRT from donating it; it is stale after the call anyway.
            inputs[i]._host = None
        for i, _ in io.late_writes:
            late[i]._host = None
        outs = exe.run(buffers)
        # Write-back: the call succeeded, so every updated tensor moves to its new buffer at once.
        for i, o in io.writes:
            tensor = inputs[i]
            tensor._device, tensor._host = outs[o], None
        if io.grad_writes:
            kept = io.grad_kept
            for i, o in io.grad_writes:
                if i in kept:
                    grad = inputs[i]._grad
                    grad._device, grad._host = outs[o], None
                else:
                    inputs[i].grad = None if o is None else _from_device(outs[o])
        for i, o in io.late_writes:
            tensor = late[i]
            tensor._device, tensor._host = outs[o], None
        VERSIONS.values += 1
        if self.single:
            return _from_device(outs[0])
        return self.rebuild(list(map(_from_device, outs[: self.num_results])))


_NONES = itertools.repeat(None)  # map(is_, buffers, _NONES): which buffers are None, at C speed
_from_device = from_device_buffer


def state_outputs(recorder, inputs, donatable, grad_inputs, snapshot, outputs) -> StateIO:
    """Append to ``outputs`` every tensor the recorded step updated; say where each goes.

    ``donatable``: input positions holding a holder's state (their old buffers are donated
    when written; an argument that is only an argument keeps its buffer, which the caller may
    share with other tensors)."""
    writes, donated, grad_writes, late_writes, grad_kept = [], [], [], [], []
    for i, t in enumerate(inputs):
        if id(t) in recorder.assigned:
            writes.append((i, len(outputs)))
            outputs.append(t)
            if i in donatable:
                donated.append(i)
    for i, t in enumerate(inputs):
        before, after = snapshot.grad_before(i), t.grad
        if after is None:
            if before is not None:
                grad_writes.append((i, None))
        elif after is not before or id(after) in recorder.assigned:
            if after is before:
                grad_kept.append(i)
            grad_writes.append((i, len(outputs)))
            outputs.append(after)
    for k, t in enumerate(recorder.late_inputs):
        if id(t) in recorder.assigned:
            late_writes.append((k, len(outputs)))
            outputs.append(t)
    return StateIO(
        grad_inputs, tuple(writes), tuple(donated), tuple(grad_writes), tuple(late_writes), frozenset(grad_kept)
    )


def donation(trace: Trace, num_inputs: int, io: StateIO, *, pair_by_aval: bool = True) -> dict[int, int]:
    """Input position -> output position for every buffer the step replaces and may consume.

    Which inputs are donated is the step's business (the state it replaces); which output
    reuses each donated buffer is XLA's aliasing only. With ``pair_by_aval`` (one device) the
    outputs are paired with the donated buffers as jax.jit pairs them: each output in order
    takes the first unused donated input of its shape and dtype, so a result (the loss) may
    reuse a state tensor's old buffer and that tensor's new value another one. XLA:CPU runs
    the programs jax gives it measurably faster that way (BENCHMARKS.md, seventh session:
    bench_train's MLP step 2.1 -> 1.75 ms with the same kernels). Without it (a mesh: a
    result's layout is the partitioner's choice) each input aliases its own new value."""
    same_aval = lambda position, o: trace.aval(trace.inputs[position]) == trace.aval(trace.outputs[o])  # noqa: E731
    outputs = dict(io.writes)
    donate = {i: outputs[i] for i in io.donated if same_aval(i, outputs[i])}
    grad_position = {i: num_inputs + k for k, i in enumerate(io.grad_inputs)}
    for i, o in io.grad_writes:
        if o is not None and i in grad_position and same_aval(grad_position[i], o):
            donate[grad_position[i]] = o
    first_late = num_inputs + len(io.grad_inputs)
    for k, o in io.late_writes:
        donate[first_late + k] = o
    if not pair_by_aval:
        return donate
    donors: dict = collections.defaultdict(collections.deque)
    for i in sorted(donate):
        donors[trace.aval(trace.inputs[i])].append(i)
    paired = {}
    for o, var in enumerate(trace.outputs):
        queue = donors.get(trace.aval(var))
        if queue:
            paired[queue.popleft()] = o
    # Every donated input has an output of its aval (its own), so all stay donated.
    return paired


def produced_buffer(result, inputs, io: StateIO | None):
    """A device buffer the call just produced (an executable's outputs are computed
    together), or None: an updated state tensor's, else a result Tensor's."""
    tensors = [inputs[i] for i, _ in io.writes] if io is not None else []
    output_structure(result, tensors)
    return next((t._device for t in tensors if t._device is not None), None)


def write_dump(directory: str, stem: str, entry: CompiledEntry, text: str, optimized: str | None, upgrade=None):
    """$HLOTRACE_DUMP_TO's files for one compiled entry: ``{stem}.trace.json``, the lowered
    and optimized StableHLO, and XLA's optimized HLO (a tiered first call's optimized
    executable, waiting for its compile)."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, stem)
    entry.trace.save(f"{stem}.trace.json")
    with open(f"{stem}.stablehlo.mlir", "w") as f:
        f.write(text)
    if optimized is not None:  # after the pass pipeline; each pass's output is in {stem}.passes/
        with open(f"{stem}.optimized.mlir", "w") as f:
            f.write(optimized)
    with open(f"{stem}.compiled.hlo.txt", "w") as f:
        f.write(((upgrade and upgrade.result()) or entry.executable).hlo_text())
