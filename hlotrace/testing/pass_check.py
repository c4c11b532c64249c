"""The generated differential test of the passes: every op sample, with and without each pass.

For one op and one sample (drawn by the op's own strategy, as the property tests do),
:func:`check_passes` records a program — the op itself, or, when the op is differentiable
and the sample has a float operand, ``grad(sum(w * op(x)))`` together with the op's value,
so that passes see a backward pass too (remat) — lowers it once with no passes, then runs
every pipeline of :func:`pipelines_under_test` over that module, compiles each result and
compares its outputs with the unoptimized module's: bitwise (NaN payloads aside) for exact
passes, and within the op's tolerance-table entry for the others (fuse-reductions: which
zero a merged max/min of +0.0 and -0.0 returns; elide-guards: XLA picks other kernels).
"""

from __future__ import annotations

import numpy as np
from hypothesis import Phase, given, seed, settings

import hlotrace.testing.strategies as strategies
from hlotrace import dtypes as dt
from hlotrace import passes
from hlotrace.dispatch import apply
from hlotrace.jit import xla_trace
from hlotrace.ops.registry import OpDef, is_differentiable
from hlotrace.passes.registry import platform_defaults
from hlotrace.tensor import Tensor
from hlotrace.testing.check import example_seed
from hlotrace.testing.differential import assert_bitwise_equal, run_lowered
from hlotrace.testing.sampling import OpSample
from hlotrace.testing.tolerances import assert_close, tolerance_for

# Examples per op: each costs one compile per pipeline that changes the module.
EXAMPLES = 3


def pipelines_under_test() -> list[str]:
    """Each of hlotrace's passes alone (default options), each platform's default pipeline
    (:func:`~hlotrace.passes.registry.platform_defaults`), and all of them in one pipeline."""
    passes.parse_pipeline("")  # registers hlotrace's own passes
    own = sorted(name for name, p in passes.PASSES.items() if not p.builtin and p.module.startswith("hlotrace."))
    result = list(own)
    for default in platform_defaults().values():
        if default and default not in result:
            result.append(default)
    everything = ",".join([*own, "cse"])
    if len(own) > 1:
        result.append(everything)
    return result


def _operand(value):
    return Tensor._from_array(np.array(value)) if isinstance(value, np.ndarray) else value


def _program(op: OpDef, sample: OpSample):
    """(function of the input tensors, host inputs): the op, or its value and gradient."""
    from hlotrace.autodiff import grad  # lazy: import hlotrace does not load autodiff (~3 ms)

    args = list(sample.args)
    positions = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    floats = [i for i in positions if dt.is_floating(args[i].dtype)]

    def fill(tensors, where):
        filled = [_operand(a) for a in args]
        for p, t in zip(where, tensors, strict=True):
            filled[p] = t
        return filled

    probe = apply(op, *[_operand(a) for a in args], **sample.attrs)
    differentiable = op.vjp is not None and is_differentiable(op)
    if not (differentiable and floats and dt.is_floating(probe.dtype)):
        return (lambda *xs: apply(op, *fill(xs, positions), **sample.attrs)), [args[i] for i in positions]

    weights = np.random.default_rng(len(floats)).standard_normal(probe.shape).astype(probe.dtype)

    def loss(*xs_and_w):
        *xs, w = xs_and_w
        return (apply(op, *fill(xs, floats), **sample.attrs) * w).sum()

    gradient = grad(loss, argnums=tuple(range(len(floats))))

    def value_and_gradients(*xs_and_w):
        *xs, _ = xs_and_w
        return (apply(op, *fill(xs, floats), **sample.attrs), *gradient(*xs_and_w))

    return value_and_gradients, [args[i] for i in floats] + [weights]


def check_passes(op: OpDef, sample: OpSample, pipelines) -> None:
    fn, inputs = _program(op, sample)
    traced = xla_trace(fn, passes="", capture_as_const=True)
    traced(*[Tensor._from_array(np.array(a)) for a in inputs])
    lowered = traced.lowered
    expected = run_lowered(lowered, inputs)
    outputs = {lowered.text(): expected}  # module text -> its outputs: each module compiled once
    for pipeline in pipelines:
        optimized = passes.run(lowered, pipeline)
        text = optimized.text()
        if text not in outputs:  # (the CPU's default pipeline leaves a program without convolutions as the common one)
            outputs[text] = run_lowered(optimized, inputs)
        actual = outputs[text]
        what = f"{op.name} with passes {pipeline!r} on {sample!r}"
        if all(passes.PASSES[s.name].exact for s in passes.parse_pipeline(pipeline)):
            assert_bitwise_equal(actual, expected, what)
        else:
            for a, e in zip(actual, expected, strict=True):
                assert_close(a, e, tolerance_for(op.name, e.dtype), what=what)


def pass_differential_test(op: OpDef, base: int, pipelines=None, examples: int = EXAMPLES):
    """The seeded hypothesis test of every pipeline on ``op``'s samples."""
    pipelines = pipelines_under_test() if pipelines is None else pipelines

    @settings(max_examples=examples, phases=[Phase.explicit, Phase.generate], deadline=None)
    @seed(example_seed(f"{op.name}-passes", base))
    @given(strategies.with_captures(op.sample(strategies)))
    def run(sample):
        check_passes(op, sample, pipelines)

    return run
