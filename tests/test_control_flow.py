"""Structured control flow (F.cond, F.switch, F.while_loop, F.fori_loop, F.scan): eager ==
compiled, eager scan == the unrolled loop bit for bit, clamping, data-dependent trip counts,
nesting, pytrees, closures, every record-time error (naming this file's line), and trace
files with regions."""

import json

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.engines import current_eager_engine
from hlotrace.errors import OpError, TraceError
from hlotrace.jit import xla_trace
from hlotrace.trace import Region, Trace

settings_few = settings(max_examples=6, deadline=None)


def _t(a):
    return ht.tensor(np.asarray(a))


def _both(fn, *args, **kwargs):
    """(eager result, compiled result) of ``fn`` as NumPy trees."""
    eager = fn(*args)
    traced = xla_trace(fn, **kwargs)
    traced(*args)
    compiled = traced(*args)
    assert traced.cache_size == 1
    return _numpy(eager), _numpy(compiled)


def _numpy(tree):
    if isinstance(tree, tuple | list):
        return [_numpy(t) for t in tree]
    if isinstance(tree, dict):
        return {k: _numpy(v) for k, v in sorted(tree.items())}
    return tree.numpy()


def _assert_trees(a, b, rtol=1e-6):
    if isinstance(a, list | dict):
        items = a.items() if isinstance(a, dict) else enumerate(a)
        for k, v in items:
            _assert_trees(v, b[k], rtol)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)


# A body made of several registered ops, chosen by a drawn code.
def _body(code):
    def body(x, y):
        for k in code:
            if k == 0:
                x = F.tanh(x * y)
            elif k == 1:
                x = F.maximum(x, y) - 0.5 * x
            elif k == 2:
                x = F.exp(-F.abs(x)) + F.sum(y, axis=-1, keepdims=True)
            else:
                x = F.where(x > y, x @ F.transpose(y) @ y * 0.1, x)
        return x

    return body


codes = st.lists(st.integers(0, 3), min_size=1, max_size=4)
values = st.integers(0, 2**31 - 1).map(lambda s: np.random.default_rng(s).standard_normal((2, 3)).astype(np.float32))


def _value(seed):
    return np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)


@settings_few
@given(codes, codes, values, values, st.booleans())
@example([0], [1], _value(5), _value(6), True)  # two different branches: the taken one counts
def test_cond_eager_matches_compiled(c1, c2, x, y, pred):
    def f(p, x, y):
        return F.cond(p, lambda x, y: _body(c1)(x, y), lambda x, y: _body(c2)(x, y), x, y)

    eager, compiled = _both(f, _t(pred), _t(x), _t(y))
    _assert_trees(eager, compiled)
    expected = _body(c1 if pred else c2)(_t(x), _t(y)).numpy()
    _same_eagerly(eager, expected)  # the taken branch, by the same ops


@settings_few
@given(codes, codes, values, values, st.integers(-3, 5))
@example([0], [1], _value(1), _value(2), -3)  # XLA alone would run the last branch
def test_switch_eager_matches_compiled_and_clamps(c1, c2, x, y, index):
    branches = [lambda x, y: _body(c1)(x, y), lambda x, y: _body(c2)(x, y), lambda x, y: x - y]

    def f(k, x, y):
        return F.switch(k, branches, x, y)

    eager, compiled = _both(f, _t(np.int32(index)), _t(x), _t(y))
    _assert_trees(eager, compiled)
    taken = branches[min(max(index, 0), 2)]
    _same_eagerly(eager, taken(_t(x), _t(y)).numpy())


@settings_few
@given(codes, values, values, st.booleans(), st.integers(0, 4))
@example([0], _value(3), _value(4), True, 3)  # reversed: ys still in index order
def test_scan_eager_matches_compiled_and_the_unrolled_loop_bit_for_bit(code, h, w, reverse, length):
    body = _body(code)
    xs = np.random.default_rng(length).standard_normal((length, 2, 3)).astype(np.float32)

    def step(carry, x):
        h = body(carry["h"], x + carry["w"])
        return {"h": h, "w": carry["w"]}, (h, F.sum(h))

    def f(h, w, xs):
        return F.scan(step, {"h": h, "w": w}, xs, reverse=reverse)

    eager, compiled = _both(f, _t(h), _t(w), _t(xs))
    _assert_trees(eager, compiled, rtol=1e-5)
    carry, ys, sums = {"h": _t(h), "w": _t(w)}, [None] * length, [None] * length
    for t in reversed(range(length)) if reverse else range(length):
        carry, (ys[t], sums[t]) = step(carry, _t(xs)[t])
    _same_eagerly(eager[0]["h"], carry["h"].numpy())
    if length:
        _same_eagerly(eager[1][0], np.stack([y.numpy() for y in ys]))
        _same_eagerly(eager[1][1], np.stack([s.numpy() for s in sums]))
    else:
        assert eager[1][0].shape == (0, 2, 3) and eager[1][1].shape == (0,)


def test_while_loop_trip_count_depends_on_the_data_compiled():
    def f(x, limit):
        def body(c):
            i, v = c
            return i + 1, v * 2.0 + 1.0

        return F.while_loop(lambda c: F.sum(c[1]) < limit, body, (ht.tensor(0), x))

    traced = xla_trace(f)
    x = _t(np.ones(3, np.float32))
    for limit in (0.0, 10.0, 1000.0, 10.0):
        eager_i, eager_v = f(x, _t(np.float32(limit)))
        i, v = traced(x, _t(np.float32(limit)))
        assert int(i.numpy()) == int(eager_i.numpy())
        np.testing.assert_array_equal(v.numpy(), eager_v.numpy())
    assert traced.cache_size == 1
    assert [int(traced(x, _t(np.float32(lim)))[0].numpy()) for lim in (0.0, 10.0, 1000.0)] == [0, 2, 8]


def test_while_loop_with_an_integer_predicate_and_closure():
    scale = _t(np.float32(3.0))

    def f(x, scale):
        return F.while_loop(lambda c: 5 - c[0], lambda c: (c[0] + 1, c[1] * scale), (ht.tensor(0), x))

    eager, compiled = _both(f, _t(np.ones(2, np.float32)), scale)
    _assert_trees(eager, compiled)
    np.testing.assert_array_equal(eager[1], np.full(2, 243.0, np.float32))


@pytest.mark.parametrize("bounds", ["int", "tensor"])
def test_fori_loop_with_int_and_tensor_bounds(bounds):
    def f(x, lo, hi):
        lower, upper = (2, 6) if bounds == "int" else (lo, hi)
        return F.fori_loop(lower, upper, lambda i, x: x * 2.0 + F.astype(i, "float32"), x)

    eager, compiled = _both(f, _t(np.ones(3, np.float32)), ht.tensor(2), ht.tensor(6))
    _assert_trees(eager, compiled)
    expected = np.ones(3, np.float32)
    for i in range(2, 6):
        expected = expected * 2 + i
    np.testing.assert_array_equal(eager, expected)
    traced = xla_trace(f)
    traced(_t(np.ones(3, np.float32)), ht.tensor(2), ht.tensor(6))
    op = "while_loop" if bounds == "tensor" else "scan"
    assert [r.op for r in traced.trace.records].count(op) == 1


def test_nested_control_flow_and_locations():
    def f(x, w):
        def outer(c, x_t):
            inner = F.cond(F.sum(x_t) > 0, lambda v: F.scan(lambda a, _: (a * w, None), v, length=2)[0], F.tanh, c)
            return inner + x_t, F.sum(inner)

        return F.scan(outer, x[0], x)

    x = _t(np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32))
    w = _t(np.float32(0.5))
    eager, compiled = _both(f, x, w)
    _assert_trees(eager, compiled)
    traced = xla_trace(f)
    traced(x, w)
    assert "rec1:scan/body/rec3:switch/branch1/rec0:scan/body/rec0:multiply" in traced.stablehlo_text
    assert "stablehlo.case" in traced.stablehlo_text and "stablehlo.while" in traced.stablehlo_text


def test_first_call_compiled_records_control_flow_without_values():
    def f(x):
        return F.scan(lambda c, x_t: (c + x_t, c * x_t), F.zeros_like(x[0]), x)

    x = _t(np.arange(6, dtype=np.float32).reshape(3, 2))
    eager = _numpy(f(x))
    compiled = _numpy(xla_trace(f, first_call="compiled")(x))
    _assert_trees(eager, compiled)


def test_closed_over_tensor_follows_the_recordings_rules():
    outside = _t(np.ones(3, np.float32))  # this line is named in the error

    @xla_trace
    def f(x):
        return F.cond(True, lambda x: x + outside, lambda x: x, x)

    with pytest.raises(
        TraceError, match=r"test_control_flow\.py:\d+.*not an input.*created at .*test_control_flow\.py"
    ):
        f(_t(np.ones(3, np.float32)))
    g = xla_trace(lambda x: F.cond(True, lambda x: x + outside, lambda x: x, x), capture_as_const=True)
    g(_t(np.ones(3, np.float32)))
    np.testing.assert_array_equal(g(_t(np.ones(3, np.float32))).numpy(), np.full(3, 2.0, np.float32))


# -- record-time errors, each naming this file's line ------------------------------------------

LINE = r"test_control_flow\.py:\d+"


def test_predicate_must_be_a_bool_or_integer_scalar():
    x = _t(np.ones(3, np.float32))
    with pytest.raises(OpError, match=rf"predicate must be a scalar.*i1\[3\].* at .*{LINE}"):
        F.cond(x > 0, lambda x: x, lambda x: x, x)
    with pytest.raises(OpError, match=rf"predicate must be a scalar.*f32\[\].* at .*{LINE}"):
        F.cond(F.sum(x), lambda x: x, lambda x: x, x)
    with pytest.raises(OpError, match=rf"index must be a scalar.* at .*{LINE}"):
        F.switch(_t(np.float32(1)), [lambda x: x], x)


def test_branch_outputs_that_differ_name_the_leaf():
    x = _t(np.ones(3, np.float32))
    with pytest.raises(
        OpError, match=rf"output\[1\]\['b'\] is i32\[3\] in false_fn of F.cond but f32\[3\] in true_fn.* at .*{LINE}"
    ):
        F.cond(True, lambda x: (x, {"b": x}), lambda x: (x, {"b": F.astype(x, "int32")}), x)
    with pytest.raises(OpError, match=rf"structures differ.* at .*{LINE}"):
        F.switch(0, [lambda x: (x, x), lambda x: x], x)


def test_a_carry_that_changes_shape_or_dtype_is_refused():
    x = _t(np.ones(3, np.float32))
    with pytest.raises(
        OpError, match=rf"carry\[1\] is f32\[3\] in init but f32\[1,3\] in body_fn's result.* at .*{LINE}"
    ):
        F.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, F.expand_dims(c[1], 0)), (ht.tensor(0), x))
    with pytest.raises(OpError, match=rf"carry\['h'\] is f32\[3\] in init but i32\[3\].* at .*{LINE}"):
        F.scan(lambda c, x_t: ({"h": F.astype(c["h"], "int32")}, None), {"h": x}, length=2)


def test_xs_with_different_leading_sizes_are_refused():
    with pytest.raises(OpError, match=rf"different leading sizes.*xs\[0\] has 3.*xs\[1\] has 4.* at .*{LINE}"):
        F.scan(lambda c, x: (c, None), ht.tensor(0.0), (_t(np.ones((3, 2))), _t(np.ones((4, 2)))))
    with pytest.raises(OpError, match=rf"length= has 5.* at .*{LINE}"):
        F.scan(lambda c, x: (c, None), ht.tensor(0.0), _t(np.ones(3)), length=5)


def test_in_place_update_of_an_outer_tensor_inside_a_body_is_refused():
    outer = _t(np.zeros(3, np.float32))

    def body(c, x):
        outer[0] = 1.0  # refused: not supported yet
        return c, None

    with pytest.raises(
        TraceError, match=rf"in-place update at .*{LINE}.*from outside the body of F.scan.*not supported"
    ):
        F.scan(body, ht.tensor(0.0), length=2)
    np.testing.assert_array_equal(outer.numpy(), np.zeros(3, np.float32))

    def local(c, x):  # a tensor of the body's own may be updated in place
        c = c * 1.0
        c += 1.0
        return c, None

    assert float(F.scan(local, ht.tensor(0.0), length=3)[0].numpy()) == 3.0


def test_random_draw_inside_a_body_is_refused():
    key = ht.random.get_state().numpy().copy()
    with pytest.raises(TraceError, match=rf"not supported inside true_fn of F.cond \(called at .*{LINE}"):
        F.cond(True, lambda x: x + ht.random.normal(x.shape), lambda x: x, _t(np.ones(2, np.float32)))
    np.testing.assert_array_equal(ht.random.get_state().numpy(), key)


def test_scan_body_must_return_a_pair():
    with pytest.raises(OpError, match=rf"must return \(carry, y\).* at .*{LINE}"):
        F.scan(lambda c, x: c, ht.tensor(0.0), length=2)


# -- trace files ------------------------------------------------------------------------------


def _program(x, w):
    h, hs = F.scan(lambda h, x_t: (F.tanh(h * w + x_t), h), x[0], x)
    return F.cond(F.sum(h) > 0, lambda a: a * 2.0, lambda a: a, hs)


def test_trace_with_regions_round_trips(tmp_path):
    x = _t(np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32))
    w = _t(np.float32(0.7))
    traced = xla_trace(_program)
    traced(x, w)
    path = tmp_path / "cf.trace.json"
    traced.trace.save(path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    loaded = Trace.load(path)
    assert str(loaded) == str(traced.trace)
    (region,) = [r.attrs["body"] for r in loaded.records if r.op == "scan"]
    assert isinstance(region, Region) and region.table is loaded
    from hlotrace import lowering

    assert lowering.lower_trace(loaded).text() == lowering.lower_trace(traced.trace).text()


def test_version_1_files_still_load(tmp_path):
    traced = xla_trace(lambda x: F.tanh(x))
    traced(_t(np.ones(2, np.float32)))
    doc, _ = traced.trace.to_json()
    doc["version"] = 1
    assert str(Trace.from_json(doc)) == str(traced.trace)


def test_show_lower_prints_a_trace_with_a_scan(tmp_path, capsys):
    from hlotrace.tools.cli import main

    traced = xla_trace(_program)
    traced(_t(np.ones((4, 3), np.float32)), _t(np.float32(0.5)))
    path = tmp_path / "cf.trace.json"
    traced.trace.save(path)
    assert main(["show", str(path), "--lower"]) in (0, None)
    out = capsys.readouterr().out
    assert "stablehlo.while" in out and "stablehlo.case" in out


def test_the_stablehlo_interpreter_agrees_on_case_and_while():
    from hlotrace.testing.fuzz.interpreter import Interpreter

    def f(x, w, k):
        h = _program(x, w)
        i, v = F.while_loop(lambda c: F.sum(c[1]) < 50.0, lambda c: (c[0] + 1, c[1] * 2.0 + 1.0), (ht.tensor(0), x))
        hs = F.switch(k, [lambda a: a, lambda a: -a], v)
        return h, i, hs

    args = [np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32), np.float32(0.7), np.int32(5)]
    traced = xla_trace(f)
    eager = traced(*map(_t, args))
    interpreter = Interpreter()
    try:
        interpreted = interpreter.run(traced.stablehlo_text, args)
    finally:
        interpreter.close()
    assert not isinstance(interpreted, str), interpreted
    for e, i in zip(eager, interpreted, strict=True):
        np.testing.assert_allclose(np.asarray(i), e.numpy(), rtol=1e-6)


@pytest.mark.parametrize("unroll", [1, 2, 3, 5, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_unroll_gives_the_same_results(unroll, reverse):
    def f(h, xs):
        return F.scan(lambda h, x: (F.tanh(h * 0.9 + x), h * x), h, xs, reverse=reverse, unroll=unroll)

    h, xs = _t(np.ones(3, np.float32)), _t(np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32))
    eager, compiled = _both(f, h, xs)
    _assert_trees(eager, compiled)
    _assert_trees(eager, _numpy(F.scan(lambda h, x: (F.tanh(h * 0.9 + x), h * x), h, xs, reverse=reverse)))
    traced = xla_trace(f)
    traced(h, xs)
    whiles = traced.stablehlo_text.count("stablehlo.while")
    assert whiles == (0 if unroll is True or unroll == 5 else 1)


def test_unroll_must_be_positive():
    with pytest.raises(OpError, match=rf"unroll must be a positive int.* at .*{LINE}"):
        F.scan(lambda c, x: (c, None), ht.tensor(0.0), length=2, unroll=0)


def _same_eagerly(actual, expected):
    """A construct applied eagerly vs its body's ops applied one by one: bit for bit on the
    NumPy engine; on the device engine (make test-device) the construct is one executable whose
    body XLA fuses, the ops one executable each, so the last bits may differ."""
    if current_eager_engine() == "numpy":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=2e-6, atol=1e-6)
