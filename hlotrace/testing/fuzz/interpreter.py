"""The StableHLO reference interpreter as an oracle, run in a worker subprocess.

The interpreter aborts its process (LLVM ERROR, SIGFPE) on some ops, so it never runs in
the fuzzer's own process: :class:`Interpreter` keeps one worker (``python -m
hlotrace.testing.fuzz.interpreter``), sends it a module and inputs, and restarts it when it
dies or hangs. Modules holding an op it is known not to run are skipped before sending.
"""

from __future__ import annotations

import os
import pickle
import re
import select
import struct
import subprocess
import sys

import numpy as np

from hlotrace import dtypes as dt

# Ops the interpreter aborts on (JAXLIB_NOTES.md), and integer division (SIGFPE on x/0).
_UNSUPPORTED = re.compile(
    r"stablehlo\.rng\b|rng_bit_generator|custom_call|cholesky|"
    r"stablehlo\.(?:divide|remainder)\b[^\n]*tensor<(?:[0-9]+x)*u?i\d+>"
)
# A convolution whose output is feature-major (``->[f, b, ...]``, as conv2d_weight_grad's)
# aborts the interpreter ("Incompatible index and shape found while flattening index";
# jaxlib 0.10.2): such a module is skipped with that reason instead of killing the worker.
_FEATURE_MAJOR_CONVOLUTION = re.compile(r"stablehlo\.convolution\b[^\n]*->\[f, b")
TIMEOUT_SECONDS = 5.0  # the interpreter's reduce_window and gathers are slow; longer counts as skipped


def unsupported_reason(module_text: str) -> str | None:
    """Why the interpreter cannot run ``module_text`` (None: it can)."""
    if _FEATURE_MAJOR_CONVOLUTION.search(module_text):
        return "the interpreter aborts on a convolution with a feature-major output ([f, b, ...])"
    match = _UNSUPPORTED.search(module_text)
    return None if match is None else f"the interpreter does not run {match.group(0).split()[0]!r}"


class Interpreter:
    """A client of the worker process. ``run`` returns the outputs, or a string saying why
    there are none (an unsupported op, a crash, a timeout)."""

    def __init__(self):
        self._proc = None
        self.crashes = 0

    def _start(self):
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hlotrace.testing.fuzz.interpreter"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def run(self, module_text: str, inputs, timeout: float = TIMEOUT_SECONDS):
        reason = unsupported_reason(module_text)
        if reason:
            return reason
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        payload = pickle.dumps((module_text, [np.asarray(a) for a in inputs]))
        try:
            self._proc.stdin.write(struct.pack("<Q", len(payload)) + payload)
            self._proc.stdin.flush()
            reply = _read_message(self._proc.stdout, timeout)
        except (BrokenPipeError, EOFError, TimeoutError) as exc:
            self.crashes += 1
            self.close()
            return f"the interpreter died ({type(exc).__name__})"
        status, value = reply
        return value if status == "ok" else f"the interpreter refused the module: {value}"


def _read_message(stream, timeout: float):
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise TimeoutError
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


# -- the worker -----------------------------------------------------------------------------


def interpret(module_text: str, inputs) -> list[np.ndarray]:
    """Run ``module_text``'s @main in the reference interpreter (in this process)."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax
    from hlotrace.lowering.builder import main_function  # lazy: loads jax
    from hlotrace.lowering.hlo import element_type, tensor_type  # lazy: loads jax
    from hlotrace.runtime.jaxlib_compat import dense_elements, ir, stablehlo  # lazy: loads jax

    with jaxlib_compat.shared_context(), ir.Location.unknown():
        module = ir.Module.parse(module_text)
        jaxlib_compat.legalize_chlo(module)
        main = main_function(module)
        block = main.regions[0].blocks[0]
        ret = list(block.operations)[-1]
        results = list(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
        shapes = [tuple(ir.RankedTensorType(t).shape) for t in results]
        bf16 = [ir.RankedTensorType(t).element_type == ir.BF16Type.get() for t in results]
        if any(bf16):  # the bindings cannot read bfloat16 attributes: return their bits
            with ir.InsertionPoint(ret):
                for i, is_bf16 in enumerate(bf16):
                    if is_bf16:
                        bits = ir.RankedTensorType.get(list(shapes[i]), ir.IntegerType.get_signless(16))
                        ret.operands[i] = stablehlo.BitcastConvertOp(bits, ret.operands[i]).result
                        results[i] = bits
            inputs_types = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).inputs
            main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs_types, results))
        arguments = [
            dense_elements(
                np.asarray(a), element_type(np.asarray(a).dtype), tensor_type(np.shape(a), np.asarray(a).dtype)
            )
            for a in inputs
        ]
        outs = jaxlib_compat.eval_module(module, arguments)
        arrays = []
        for attr, shape, is_bf16 in zip(outs, shapes, bf16, strict=True):
            value = np.array(attr)
            if value.shape != shape:  # a splat comes back as its one element
                value = np.full(shape, value.reshape(-1)[0] if value.size else 0, dtype=value.dtype)
            arrays.append(value.view(np.int16).view(dt.bfloat16) if is_bf16 else value)
        return arrays


def _worker() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = stdin.read(8)
        if len(header) < 8:
            return
        (size,) = struct.unpack("<Q", header)
        module_text, inputs = pickle.loads(stdin.read(size))
        try:
            reply = ("ok", interpret(module_text, inputs))
        except Exception as exc:  # a module the interpreter refuses with an error, not a crash
            reply = ("error", " ".join(str(exc).split())[:300])
        data = pickle.dumps(reply)
        stdout.write(struct.pack("<Q", len(data)) + data)
        stdout.flush()


if __name__ == "__main__":
    _worker()
