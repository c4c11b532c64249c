"""fuse-elementwise: named and anonymous composites, their attributes, bitwise results,
backward ops grouped apart (`hlotrace export`: test_export.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import passes
from hlotrace.autodiff import value_and_grad
from hlotrace.jit import xla_trace
from hlotrace.testing.differential import assert_bitwise_equal, run_lowered


def _fused(fn, arrays):
    traced = xla_trace(fn, passes="")
    traced(*[ht.tensor(a) for a in arrays])
    out = passes.run(traced.lowered, "fuse-elementwise")
    assert_bitwise_equal(run_lowered(out, arrays), run_lowered(traced.lowered, arrays), "fuse-elementwise")
    return traced, out


def _composites(lowered) -> list[tuple[str, str, str]]:
    """(name, records, lines) of every composite in @main."""
    text = lowered.text(debug_info=False)
    found = re.findall(r'stablehlo\.composite "([^"]+)".*?lines = "([^"]*)", records = "([^"]*)"', text)
    return [(name, records, lines) for name, lines, records in found]


def _values(shape=(3, 8), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return x


def test_named_patterns_become_named_composites():
    q = _values((2, 3, 4), 1)
    x = _values()

    def program(q, x):
        return (
            F.scaled_dot_product_attention(q, q, q),
            F.softmax(x, axis=-1),
            F.log_softmax(x, axis=-1),
            F.gelu(x),
            F.layer_norm(x, (8,), ht.tensor(np.full(8, 2.0, np.float32)), None),
        )

    _, out = _fused(program, [q, x])
    names = [c[0] for c in _composites(out)]
    for name in (
        "hlotrace.attention",
        "hlotrace.softmax",
        "hlotrace.log_softmax",
        "hlotrace.gelu",
        "hlotrace.layer_norm",
    ):
        assert names.count(name) == 1, names
    attention = next(c for c in _composites(out) if c[0] == "hlotrace.attention")
    assert "matmul" in attention[1] and "test_fuse_elementwise.py:" in attention[2]
    # The dot_generals of attention moved into its decomposition.
    main_kinds = [op.operation.name for op in passes.main_function(out.module).regions[0].blocks[0].operations]
    assert "stablehlo.dot_general" not in main_kinds


def test_elementwise_chains_and_a_final_reduction_become_one_fusion():
    x = _values()
    _, out = _fused(lambda x: F.sum(F.tanh(x) * F.exp(x) - 3.0, axis=-1) + 1.0, [x])
    comps = _composites(out)
    assert [c[0] for c in comps][:1] == ["hlotrace.fusion.0"]
    assert comps[0][1].split() == ["0:tanh", "1:exp", "2:multiply", "3:subtract", "4:sum"]  # the sum ends the group


def test_a_single_op_is_not_outlined():
    _, out = _fused(lambda x: F.exp(x), [_values()])
    assert _composites(out) == []


def test_a_group_computed_from_constants_only_is_left_to_xlas_folder():
    """Fuzzer (seed 3178024215, session seed 13): a captured constant's slice divided by 6
    (adaptive_avg_pool2d_backward) gave 1.1666666666666665 outlined and ...667 without the
    pass: XLA folded the plain module at compile time (an exact division) but computed the
    composite at run time, where it rewrites x / 6 as x * (1/6)."""
    c = ht.tensor(np.array([[6.0, -7.0], [2.0, 7.0]]))
    x = _values()
    traced = xla_trace(
        lambda x: (F.adaptive_avg_pool2d_backward(c[1:, :1][None, None], (3, 2)), F.tanh(x) * 2.0),
        passes="",
        capture_as_const=True,
    )
    traced(ht.tensor(x))
    out = passes.run(traced.lowered, "fuse-elementwise")
    assert_bitwise_equal(run_lowered(out, [x]), run_lowered(traced.lowered, [x]), "fuse-elementwise")
    outlined = [[r.split(":")[1] for r in records.split()] for _, records, _ in _composites(out)]
    assert outlined == [["tanh", "multiply"]]  # the constant group stays in @main


def test_backward_ops_are_grouped_apart_from_forward_ones():
    w = _values((8, 8), 2)
    x = np.abs(_values((4, 8), 3)) + 0.5

    def step(w, x):
        return value_and_grad(lambda w: F.sum(F.tanh(x @ w) * 2.0 + 1.0))(w)

    _, out = _fused(step, [w, x])
    kinds = set()
    for name, records, _ in _composites(out):
        ops = {r.split(":")[0] for r in records.split()}
        backward = {int(i) in out_trace_backward(step, w, x) for i in ops}
        assert len(backward) == 1, f"{name} mixes forward and backward ops"
        kinds |= backward
    assert kinds == {True, False}  # both passes have fusions


def out_trace_backward(step, w, x) -> set:
    traced = xla_trace(step, passes="")
    traced(ht.tensor(w), ht.tensor(x))
    return traced.trace.backward


def test_composites_keep_results_and_speed_neutral_structure_after_xla():
    x = _values()
    traced, out = _fused(lambda x: F.softmax(F.gelu(x) * 3.0, axis=-1), [x])
    from hlotrace import runtime

    plain = runtime.compile(traced.lowered.text(), traced.lowered.in_avals, traced.lowered.out_avals)
    fused = runtime.compile(out.text(), out.in_avals, out.out_avals)
    fusions = [len(re.findall(r"\bfusion\(", e.hlo_text())) for e in (plain, fused)]
    assert fusions[0] == fusions[1]  # XLA inlined the composites: the same fusions


def test_a_group_whose_value_is_needed_midway_is_left_alone():
    x, w = _values((4, 8), 4), _values((8, 8), 5)

    def program(x, w):
        t = F.tanh(x)
        return t * 2.0 + (t @ w)  # the matmul between the tanh and the add reads the tanh

    _, out = _fused(program, [x, w])
    assert _composites(out) == []


@pytest.mark.parametrize("shape", [(3, 8), (0, 8), (4, 0)])
def test_plain_elementwise_chain_is_bitwise_equal_with_special_and_zero_size_values(shape):
    x = _values(shape, 6) if 0 not in shape else np.zeros(shape, np.float32)
    y = -x if 0 in shape else np.flip(_values(shape, 7))

    def chain(x, y):
        return F.maximum(F.abs(x) * y, -0.0) / (y + 1.0) - F.sqrt(F.abs(y))

    _, out = _fused(chain, [x, y.copy()])
    assert [c[0] for c in _composites(out)] == ["hlotrace.fusion.0"]


def test_each_scope_instance_and_record_is_its_own_composite():
    x = _values()
    _, out = _fused(lambda x: (F.softmax(x, axis=-1), F.softmax(x * 2.0, axis=0), F.gelu(x), F.gelu(-x)), [x])
    names = [c[0] for c in _composites(out)]
    assert names.count("hlotrace.softmax") == 2 and names.count("hlotrace.gelu") == 2, names
