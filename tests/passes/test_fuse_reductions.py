"""fuse-reductions: which reductions merge (and which must not), and bitwise-equal results."""

from __future__ import annotations

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.jit import xla_trace
from hlotrace.passes.fuse_reductions import combiners
from hlotrace.testing.differential import assert_equal_up_to_zero_sign, run_lowered


def _reduces(lowered) -> list:
    return [
        op
        for op in passes.main_function(lowered.module).regions[0].blocks[0].operations
        if op.operation.name == "stablehlo.reduce"
    ]


def _check(fn, arrays, pipeline="cse,fuse-reductions"):
    """(reduces before, reduces after, result combiners) after checking bitwise equality."""
    traced = xla_trace(fn, passes="")
    traced(*[ht.tensor(a) for a in arrays])
    out = passes.run(traced.lowered, pipeline)
    # Bitwise, except the sign of a zero max/min (the pass's stated contract).
    assert_equal_up_to_zero_sign(run_lowered(out, arrays), run_lowered(traced.lowered, arrays), f"{pipeline} on {fn}")
    return len(_reduces(traced.lowered)), len(_reduces(out)), [combiners(op) for op in _reduces(out)]


def _special_rows(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1, shape[-1])
    flat[0, shape[-1] // 2] = np.nan  # one NaN in a row
    if len(flat) > 1:
        flat[1, :] = -0.0  # the max/min of signed zeros
        flat[1, 1] = 0.0
    if len(flat) > 2:
        flat[2, 0], flat[2, -1] = np.inf, -np.inf
    if len(flat) > 3:
        flat[3, :] = np.nan
    return x


@pytest.mark.parametrize("width", [7, 4100])  # 4096+ elements: XLA:CPU's YNNPACK path
def test_nan_exact_max_reads_its_input_once(width):
    before, after, kinds = _check(lambda x: F.max(x, axis=-1), [_special_rows((5, width))], "fuse-reductions")
    assert (before, after) == (2, 1)
    assert kinds == [["stablehlo.maximum", "stablehlo.or"]]


def test_softmax_max_is_merged_and_exact():
    before, after, _ = _check(lambda x: F.softmax(x, axis=-1), [_special_rows((6, 33))])
    assert (before, after) == (3, 2)  # max + its NaN test merged; the sum stays alone


def test_max_and_min_of_one_operand_share_one_reduce():
    x = _special_rows((4, 3, 9), seed=1)
    before, after, kinds = _check(lambda x: (F.max(x, axis=(0, 2)), F.min(x, axis=(0, 2))), [x])
    assert (before, after) == (4, 1)  # cse makes the two NaN tests one: max, or, min
    assert kinds == [["stablehlo.maximum", "stablehlo.or", "stablehlo.minimum"]]


def test_siblings_of_different_tensors_and_keepdims_merge():
    rng = np.random.default_rng(2)
    x, y = _special_rows((5, 8), seed=3), rng.standard_normal((5, 8)).astype(np.float32)
    before, after, _ = _check(lambda x, y: (F.max(x, axis=1, keepdims=True), F.min(y, axis=1)), [x, y])
    assert (before, after) == (4, 1)


def test_integer_and_bool_reductions_merge():
    rng = np.random.default_rng(4)
    x = rng.integers(-(2**31), 2**31 - 1, (6, 5), dtype=np.int32)
    b = rng.random((6, 5)) < 0.5
    before, after, kinds = _check(
        lambda x, b: (F.max(x, axis=0), F.min(x, axis=0), F.any(b, axis=0), F.all(b, axis=0)), [x, b]
    )
    assert after == 1 and before == 4
    assert sorted(kinds[0]) == sorted(["stablehlo.maximum", "stablehlo.minimum", "stablehlo.or", "stablehlo.and"])


def test_sums_are_never_merged():
    x = _special_rows((8, 16))
    fn = lambda x: (F.sum(x, axis=1), F.sum(x * x, axis=1), F.mean(x, axis=1))  # noqa: E731
    before, after, kinds = _check(fn, [x], "fuse-reductions")
    assert before == after == 3
    assert all(k == ["stablehlo.add"] for k in kinds)


def test_different_dimensions_or_shapes_do_not_merge():
    x = _special_rows((4, 6))
    z = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    before, after, _ = _check(lambda x, z: (F.max(x, axis=0), F.max(x, axis=1), F.max(z, axis=1)), [x, z])
    assert before == 6 and after == 3  # each max only with its own NaN test


def test_a_reduction_of_another_ones_result_is_not_merged():
    x = _special_rows((5, 8))

    def dependent(x):
        m = F.max(x, axis=1, keepdims=True)
        return F.max(x - m, axis=1)  # reads m: not a sibling of the first max

    before, after, _ = _check(dependent, [x])
    assert (before, after) == (4, 2)


def test_zero_size_reduced_dimension():
    x = np.zeros((3, 0), np.float32)
    before, after, _ = _check(lambda x: (F.any(x != x, axis=1), F.all(x == x, axis=1)), [x])
    assert (before, after) == (2, 1)


def test_a_training_step_with_the_pass_matches_bitwise():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    x = _special_rows((4, 8))

    from hlotrace.autodiff import value_and_grad

    def loss(w, x):
        h = F.tanh(x @ w)
        return F.sum(F.log_softmax(h, axis=-1) * F.softmax(h, axis=0))

    before, after, _ = _check(lambda w, x: value_and_grad(loss)(w, x), [w, x])
    assert after < before


WEIRD_BODY = """
func.func public @main(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %init = stablehlo.constant dense<0.0> : tensor<f32>
  %a = stablehlo.reduce(%x init: %init) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%acc: tensor<f32>, %v: tensor<f32>) {
    %m = stablehlo.maximum %acc, %acc : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }
  %b = stablehlo.reduce(%x init: %init) applies stablehlo.minimum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}
"""


def test_a_reduce_whose_body_is_not_one_combiner_is_left_alone():
    from hlotrace.lowering import LoweredModule
    from hlotrace.ops.registry import Aval
    from hlotrace.runtime.jaxlib_compat import ir, shared_context

    with shared_context():
        module = ir.Module.parse(WEIRD_BODY)
    lowered = LoweredModule(module, [Aval((4, 8), np.float32)], [Aval((4,), np.float32)] * 2, "weird")
    out = passes.run(lowered, "fuse-reductions")
    assert len(_reduces(out)) == 2
    x = _special_rows((4, 8))
    assert_equal_up_to_zero_sign(run_lowered(out, [x]), run_lowered(lowered, [x]), "weird body")


def test_the_dependency_walk_runs_once_per_merge_not_per_pair(monkeypatch):
    """A chain of same-shaped max reductions, each reading the last (an unrolled model's
    layers): every pair is refused by the cheap checks, so the dependency walk (defence in
    depth) must not run per pair. It did, and the pass took 239 s of a 48-layer
    transformer step's first call (its cost grew as the fourth power of the depth)."""
    import hlotrace.passes.fuse_reductions as pass_module

    walks = []
    real = pass_module._depends_on
    monkeypatch.setattr(pass_module, "_depends_on", lambda *a: walks.append(1) or real(*a))

    def chain(x):
        for _ in range(12):
            x = F.tanh(x - F.max(x, axis=1, keepdims=True))
        return x + F.max(x, axis=1, keepdims=True) + F.min(x, axis=1, keepdims=True)

    before, after, _ = _check(chain, [_special_rows((3, 5))])
    merges = before - after  # each max with its any-NaN flag, and the last max with the min
    assert merges > 0
    assert len(walks) <= 4 * merges, (len(walks), merges)  # per operand of each merge
